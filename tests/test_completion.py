"""Shell completion: `qem completion SHELL` prints a script that each real shell sources and
completes with, asking the installed `qem` for the words; an ordinary run pays nothing for it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_qem

BIN = Path(sys.executable).parent  # where the installed `qem` script is, beside the interpreter


def shell_env(home: Path) -> dict[str, str]:
    """The installed qem first on the PATH; the shell's own files in the test's home."""
    assert (BIN / "qem").exists(), f"no installed qem script in {BIN}"
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", HOME=str(home))
    env.update(XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_CACHE_HOME=str(home / ".cache"))
    return env


def test_bash_sources_the_script_and_completes_a_subcommand_and_an_option(tmp_path: Path) -> None:
    # bash calls the function `complete -F` names with the words typed so far, as here
    script = r'''
        source <(qem completion bash)
        complete -p qem
        COMP_WORDS=(qem check); COMP_CWORD=1; _qem_completion qem; echo "subcommands: ${COMPREPLY[*]}"
        COMP_WORDS=(qem add --ki); COMP_CWORD=2; _qem_completion qem; echo "options: ${COMPREPLY[*]}"
    '''
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=shell_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "complete -o default -F _qem_completion qem"
    assert sorted(lines[1].removeprefix("subcommands: ").split()) == ["check-secrets", "checkin", "checkout", "checkouts"]
    assert lines[2] == "options: --kind"


def test_fish_completes_a_subcommand_with_its_help(tmp_path: Path) -> None:
    if not shutil.which("fish"):
        pytest.skip("fish is not installed (apt-get install fish)")
    done = subprocess.run(["fish", "--no-config", "-c", 'qem completion fish | source; complete -C "qem check"'],
                          capture_output=True, text=True, env=shell_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    words = dict(line.split("\t", 1) for line in done.stdout.splitlines())
    assert sorted(words) == ["check-secrets", "checkin", "checkout", "checkouts"]
    assert words["checkout"].startswith("Write an editable checkout")


# zsh completes only inside its line editor: an interactive zsh on a pseudo-terminal (zpty)
# sources the script after compinit, is typed `qem check` and a TAB, and lists the choices.
ZSH_DRIVER = r'''
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PROMPT=""; autoload -U compinit; compinit -u -D; zstyle ":completion:*" list-prompt ""; LISTMAX=1000'
zpty -w z 'eval "$(qem completion zsh)"'
zpty -w z "bindkey '^I' list-choices"
zpty -w -n z "qem check"$'\t'
sleep 3
all=""
while zpty -rt z line; do all+="$line"; done
print -r -- "$all"
zpty -d z
'''


def test_zsh_lists_the_subcommands_on_tab(tmp_path: Path) -> None:
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed (apt-get install zsh)")
    done = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER], capture_output=True, text=True, env=shell_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout).replace("\r", "\n")
    listed = dict(re.findall(r"^(check\S*)\s+-- (.*)$", screen, re.MULTILINE))
    assert sorted(listed) == ["check-secrets", "checkin", "checkout", "checkouts"], screen
    assert listed["checkout"].startswith("Write an editable checkout")


def test_an_unknown_shell_is_refused_with_the_choices(ws: Path) -> None:
    done = run_qem("completion", "tcsh", cwd=ws)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown shell 'tcsh'; use one of: bash, zsh, fish" in done.stderr


def test_an_ordinary_run_pays_nothing_for_completion(ws: Path) -> None:
    # add_completion stays off: `qem add` (and a hook) start without the command-line
    # framework at all, and typer's commands carry no completion options to build
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "qem_edit", "add", "-k", "task", "x"],
                          cwd=ws, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not re.search(r"\| +typer\b", done.stderr), "qem add imported typer"
    helped = run_qem("--help", cwd=ws)
    assert helped.returncode == 0 and "completion  " in helped.stdout
    assert "--install-completion" not in helped.stdout and "--show-completion" not in helped.stdout

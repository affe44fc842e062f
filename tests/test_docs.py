"""The documentation says what the commands do: every `qem ...` example in README.md and
docs/ still parses (its options and arguments exist and take what it gives them), and the
behaviours the docs describe in words hold."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from qem_edit.shells import cli

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "fixtures" / "golden" / "README.md"]
# Placeholders the docs write in capitals, and a value each parses as.
PLACEHOLDERS = {
    "ID": "12", "N": "3", "A": "12", "B": "40", "D": "57", "DISPUTE": "57", "FILE": "notes.md", "F": "notes.md",
    "REASON": "why", "WHY": "why", "K": "gotcha", "KEY=VALUE": "kind=task", "SEQ|DATE": "12", "NAME": "someone",
    "DIR": "somewhere", "TOKENS": "100", "REV": "HEAD",
}


def _shell_blocks(text: str) -> list[str]:
    """The lines of the fenced code blocks marked sh, bash, shell or console."""
    out: list[str] = []
    fence = None  # the open fence's backticks, and whether its block is shell
    for line in text.split("\n"):
        match = re.match(r"(`{3,})(\w*)", line)
        if fence is None and match:
            fence = (match[1], match[2] in ("sh", "bash", "shell", "console"))
        elif fence is not None and line.strip() == fence[0]:
            fence = None
        elif fence is not None and fence[1]:
            out.append(line)
    return out


def examples() -> list[tuple[str, str]]:
    """(where, command) for every qem command line in a shell block, and every inline
    `qem ...` with arguments (a synopsis with [optional] parts, or a mention of an
    option without its value, is not an example)."""
    found: list[tuple[str, str]] = []
    for path in DOCS:
        text = path.read_text("utf-8")
        inline = [c for c in re.findall(r"`((?:\.venv/bin/)?qem [^`]+)`", text)
                  if len(c.split()) > 2 and "[" not in c and not c.split()[-1].startswith("-")]
        for line in _shell_blocks(text) + inline:
            for part in re.split(r";|&&|\|\|?", line.split(" # ")[0]):
                part = part.strip()
                if re.match(r"(\.venv/bin/)?qem( |$)", part):
                    found.append((path.name, part))
    return sorted(set(found))


def argv_of(command: str) -> list[str]:
    return [PLACEHOLDERS.get(word, word) for word in shlex.split(command)[1:]]


def test_the_docs_have_examples() -> None:
    assert len(examples()) > 40


@pytest.mark.parametrize("where, command", examples())
def test_every_documented_command_parses(where: str, command: str) -> None:
    argv = argv_of(command)
    click_command, args, prog = cli._command(cli._with_optional_values(argv))
    assert prog != "qem" or not argv or argv[0].startswith("-"), f"{where}: unknown command in {command!r}"
    click_command.make_context(prog, list(args), resilient_parsing=False)


def test_every_install_line_names_the_distribution() -> None:
    """The distribution is `qem-edit` (pyproject.toml); `pip install qem` installs another
    project or nothing."""
    import tomllib

    name = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["name"]
    for path in DOCS:
        for target in re.findall(r"pip install (?:-\S+ )*'?([A-Za-z][\w.-]*)", path.read_text("utf-8")):
            assert target.split("[")[0] == name, f"{path.name}: pip install {target}"

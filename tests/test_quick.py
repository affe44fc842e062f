"""`qem add` started without the command-line framework (qem_edit.shells.quick).

The quick path's table of each command (`qem add`, `qem checkin`, the hooks' commands) is
its one declaration (qem_edit.shells.cli builds typer's from it); here typer's command is checked against the table, every plain line is
parsed to the very parameters typer gives the command, and every line that is not plain
(help, an unknown or malformed option, a missing argument) is left to typer, with its messages.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_qem

from qem_edit.shells import cli, quick


def typer_command(name: str):  # type: ignore[no-untyped-def]
    """typer's command `qem NAME` (a group's command, as `anchors check`, out of its group)."""
    words = name.split()
    command, _, _ = cli._command(words)
    return command.commands[words[1]] if len(words) > 1 else command


def body_name(name: str) -> str:
    return name.replace(" ", "_")


def typer_params(argv: list[str], name: str = "add") -> dict:
    """The parameters `qem NAME` under typer gives the command's body (shell.NAME)."""
    import inspect

    from qem_edit.shells import shell

    seen: dict = {}
    original = getattr(shell, body_name(name))
    signature = inspect.signature(original)

    def body(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(signature.bind(*args, **kwargs).arguments)
        return 0

    setattr(shell, body_name(name), body)
    try:
        typer_command(name).main(args=list(argv), prog_name=f"qem {name}", standalone_mode=False)
    finally:
        setattr(shell, body_name(name), original)
    return {k: v for k, v in signature.bind_partial(**seen).arguments.items()} | {
        k: p.default for k, p in signature.parameters.items() if k not in seen}


def body_defaults(name: str) -> dict:
    """The defaults of the body `qem NAME` runs (shell.NAME): what an option not given takes."""
    import inspect

    from qem_edit.shells import shell

    return {k: p.default for k, p in inspect.signature(getattr(shell, body_name(name))).parameters.items()
            if p.default is not inspect.Parameter.empty}


def quick_params(argv: list[str], name: str = "add") -> dict | None:
    """The parameters the quick path gives the body, its own defaults for the rest."""
    parsed = quick.parse(quick.SPECS[name], argv)
    return None if parsed is None else body_defaults(name) | parsed


@pytest.mark.parametrize("name", sorted(quick.SPECS))
def test_the_table_is_typer_s_declaration_of_the_command(name: str) -> None:
    spec, command = quick.SPECS[name], typer_command(name)
    options = {opt.dest: opt for opt in spec.options}
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    rest = (spec.rest.dest,) if spec.rest else ()
    assert tuple(arguments) == tuple(arg.dest for arg in spec.arguments) + rest
    assert all(p.nargs == -1 for p in command.params if p.name in rest)
    declared = [p for p in command.params if p.param_type_name == "option" and p.name not in ("help",)]
    assert sorted(p.name for p in declared) == sorted(options), f"an option of `qem {name}` the quick table lacks (or has)"
    for param in declared:
        opt = options[param.name]
        assert set(param.opts) == set(opt.names) and not param.secondary_opts, param.name
        takes = "flag" if param.is_flag else "many" if param.multiple else "value"
        assert takes == opt.takes, param.name
        assert (param.name in spec.required) == param.required, param.name
        if not param.required:
            assert body_defaults(name)[param.name] == param.default, param.name


PLAIN = [
    ["a note", "-k", "task"],
    ["a note", "--kind", "gotcha", "--priority", "high", "--json"],
    ["--kind=finding", "a note", "-p", "low", "--provenance", "user-stated"],
    ["-k", "task", "--", "-a text that starts with a dash"],
    ["-", "-k", "task"],
    ["x", "-k", "task", "--anchor", "src/a.py", "--anchor=src/b.py", "--on", "start", "--when-path", "src/**",
     "--when-run", "pytest*", "--when-run", "make test", "--expires", "2030-01-01", "--ttl", "30d"],
    ["x", "-k", "task", "-w", "/tmp/somewhere", "--store", "/tmp/else/.qem", "--actor", "ci", "--allow-secret"],
    ["x", "-k", "task", "-k", "gotcha", "--priority", "low", "--priority", "high"],  # the last wins
    ["x", "--kind", "-p"],  # an option's value may start with a dash
]


@pytest.mark.parametrize("argv", PLAIN, ids=lambda a: " ".join(a)[:40])
def test_a_plain_line_gives_what_typer_gives(argv: list[str]) -> None:
    assert quick_params(argv) == typer_params(argv)


CHECKIN_PLAIN = [
    [], ["--path", "MEMORY.md"], ["--path=x.md", "-m", "a reason", "--yes"], ["-y", "--dry-run", "--json"],
    ["--allow-mass-change", "--allow-secret", "-w", "/tmp/w", "--store", "/tmp/s", "--actor", "a", "-m", "-x"],
]


@pytest.mark.parametrize("argv", CHECKIN_PLAIN, ids=lambda a: " ".join(a)[:40] or "nothing")
def test_a_plain_checkin_line_gives_what_typer_gives(argv: list[str]) -> None:
    assert quick_params(argv, "checkin") == typer_params(argv, "checkin")


def test_every_option_alone_and_in_pairs_gives_what_typer_gives() -> None:
    samples = {"flag": [], "many": ["p/1", "p/2"], "value": ["v"]}
    words = []
    for opt in quick.ADD.options:
        for name in opt.names:
            values = samples[opt.takes] if opt.dest != "kind" else ["task"]
            words.append([name, *values[:1]] if opt.takes != "flag" else [name])
    for a, b in itertools.combinations(words, 2):
        argv = ["a text", "-k", "task", *a, *b]
        assert quick_params(argv) == typer_params(argv), argv


@pytest.mark.parametrize("argv", [
    ["--help"], ["x", "-k", "task", "-h"], ["x", "-kgotcha"], ["x"], ["-k", "task"], ["x", "y", "-k", "task"],
    ["x", "-k", "task", "--json=1"], ["x", "-k", "task", "--no-such"], ["x", "-k"], [],
], ids=lambda a: " ".join(a) or "nothing")
def test_a_line_that_is_not_plain_is_left_to_typer(argv: list[str]) -> None:
    assert quick.parse(quick.ADD, argv) is None


def test_add_starts_without_the_framework_and_writes(tmp_path: Path) -> None:
    probe = ("import sys; sys.argv = ['qem', 'add', 'quick note', '-k', 'task', '-w', sys.argv[1]]\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             "print(code, sorted(m for m in ('typer', 'click', 'dataclasses', 'inspect', 'tempfile') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    short, verdict = done.stdout.strip().splitlines()
    assert verdict == "0 []", verdict
    shown = run_qem("show", short, "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["text"] == "quick note"


def test_its_failures_read_as_typer_s_do(tmp_path: Path) -> None:
    empty = run_qem("add", "  ", "-k", "task", cwd=tmp_path)
    assert empty.returncode == 2 and "qem: error:" in empty.stderr and "Traceback" not in empty.stderr
    bad = run_qem("add", "x", "-k", "bogus", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown kind 'bogus'" in bad.stderr
    missing = run_qem("add", "x", cwd=tmp_path)
    assert missing.returncode == 2 and "Missing option '--kind'" in missing.stderr
    helped = run_qem("add", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "Usage: qem add" in helped.stdout


def test_checkin_starts_without_the_framework(tmp_path: Path) -> None:
    assert run_qem("add", "a note to edit", "-k", "task", cwd=tmp_path).returncode == 0
    target = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(target), cwd=tmp_path).returncode == 0
    target.write_text(target.read_text("utf-8").replace("a note to edit", "a note, edited"), "utf-8")
    probe = ("import sys; sys.argv = ['qem', 'checkin', '--path', sys.argv[1], '-m', 'by hand', '--yes', '-w', sys.argv[2]]\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             "print(code, sorted(m for m in ('typer', 'click') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, str(target), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout
    listed = run_qem("list", cwd=tmp_path).stdout
    assert "a note, edited" in listed


HOOK_PLAIN = {
    "export": [[], ["--check", "--staged"], ["--check", "--diff", "-w", "/tmp/w", "--store", "/tmp/s"],
               ["--stdout", "kind=gotcha", "text~lock"], ["--path=x.md", "--force"], ["--stdout", "--at", "HEAD~1"],
               ["--check", "--check", "--staged"]],
    "verify": [[], ["--staged"], ["--repair", "--fail-on-disputes", "--fail-on-drift", "--json"],
               ["--base", "origin/main", "-w", "/tmp/w", "--store=/tmp/s"]],
    "anchors check": [[], ["--staged", "--flag"], ["--rev", "HEAD~2", "--json"],
                      ["--staged", "--actor", "ci", "-w", "/tmp/w", "--store", "/tmp/s"]],
}


@pytest.mark.parametrize(("name", "argv"), [(n, a) for n, lines in HOOK_PLAIN.items() for a in lines],
                         ids=lambda a: " ".join(a)[:40] if isinstance(a, list) else a)
def test_a_plain_hook_command_line_gives_what_typer_gives(name: str, argv: list[str]) -> None:
    assert quick_params(argv, name) == typer_params(argv, name)


@pytest.mark.parametrize(("name", "argv"), [
    ("export", ["--help"]), ("export", ["--check", "--no-such"]), ("export", ["--check=1"]),
    ("verify", ["extra"]), ("verify", ["--base"]), ("anchors check", ["HEAD"]), ("anchors check", ["-h"]),
])
def test_a_hook_command_line_that_is_not_plain_is_left_to_typer(name: str, argv: list[str]) -> None:
    assert quick.parse(quick.SPECS[name], argv) is None


def test_the_commit_hooks_start_without_the_framework(tmp_path: Path) -> None:
    """`export --check --staged`, `anchors check --staged` and `verify --staged` in a
    repository with a note committed: each answers as under typer, and imports no typer."""
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert run_qem("add", "a note", "-k", "task", cwd=tmp_path).returncode == 0
    assert run_qem("export", cwd=tmp_path).returncode == 0
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "commit", "-qm", "m", "--no-verify"], cwd=tmp_path, check=True, env={**__import__("os").environ, **env})
    for argv in (["export", "--check", "--staged"], ["anchors", "check", "--staged"], ["verify", "--staged"]):
        probe = (f"import sys; sys.argv = ['qem', *{argv!r}]\n"
                 "from qem_edit.__main__ import main\n"
                 "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
                 "print(code, sorted(m for m in ('typer', 'click') if m in sys.modules))")
        done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
        assert done.stdout.strip().splitlines()[-1] == "0 []", (argv, done.stdout, done.stderr)
        under_typer = subprocess.run([sys.executable, "-c", "import sys; from qem_edit.shells.cli import main; main(sys.argv[1:])",
                                      *argv], cwd=tmp_path, capture_output=True, text=True)
        assert (under_typer.returncode, under_typer.stderr) == (0, done.stderr), argv
        assert under_typer.stdout == "".join(done.stdout.splitlines(keepends=True)[:-1]), argv


@pytest.mark.parametrize("given", [
    {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Edit",
     "tool_input": {"file_path": "nothing/declares/this.py", "old_string": "a", "new_string": "b"}},
    {"hook_event_name": "SessionStart", "session_id": "s2", "source": "startup"},
], ids=lambda g: g["hook_event_name"])
def test_a_hook_imports_no_framework_and_no_dataclass(tmp_path: Path, given: dict) -> None:
    """An agent hook runs before every edit: it imports neither typer nor what only other
    moments use (`dataclasses` and the `inspect` it brings cost a hook ~10 ms; hashlib,
    OpenSSL's start-up, ~3 ms: a session's ledger is named by the builtin SHA-256)."""
    assert run_qem("add", "run the tests in the venv", "-k", "directive", cwd=tmp_path).returncode == 0
    event = given["hook_event_name"]
    probe = (f"import sys; sys.argv = ['qem', 'hook', 'claude', {event!r}]\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             "print(code, sorted(m for m in ('typer', 'click', 'dataclasses', 'inspect', 'tempfile', 'subprocess',"
             " 'hashlib', '_hashlib', 'tomllib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          input=json.dumps({**given, "cwd": str(tmp_path)}))
    assert done.stdout.strip().splitlines()[-1] == "0 []", (done.stdout, done.stderr)
    if event == "SessionStart":
        assert "run the tests in the venv" in done.stdout

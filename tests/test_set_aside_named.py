"""A log file set aside as malformed is named by every command that meets it, on stderr,
in one line, until it is fixed; stdout (what scripts parse) is what it would be without it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_qem

from qem_edit.base import ids


def plant(ws: Path, count: int) -> list[str]:
    """`count` event files whose bytes do not hash to their names (a clone's damage)."""
    names = sorted(f"events/{ids.content_id(f'not {i}'.encode())}" for i in range(count))
    for name in names:
        (ws / ".qem" / name).write_bytes(b'{"not": "an event"}\n')
    return names


@pytest.fixture
def memory(ws: Path) -> Path:
    for text in ("first note", "second note"):
        assert run_qem("add", text, "--kind", "gotcha", cwd=ws).returncode == 0
    assert run_qem("export", cwd=ws).returncode == 0
    return ws


COMMANDS = [
    ("list",), ("list", "--json"), ("export", "--check"), ("export", "--stdout"), ("export",), ("context",),
    ("log",), ("query", "kind=gotcha"), ("add", "another note", "--kind", "task"),
]


def aside_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "set aside" in line]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_every_command_names_the_set_aside_file_once_and_keeps_stdout(memory: Path, args: tuple[str, ...]) -> None:
    clean = run_qem(*args, cwd=memory)
    assert not aside_lines(clean.stderr)
    if args[0] == "add":  # a second add would add a second note: compare with a fresh id's shape
        run_qem("revoke", clean.stdout.strip(), "-m", "again", cwd=memory)
    (name,) = plant(memory, 1)
    done = run_qem(*args, cwd=memory)
    assert done.returncode == clean.returncode, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = aside_lines(done.stderr)
    assert line.startswith("qem: 1 malformed log file is set aside") and name in line and "`qem verify`" in line
    if args[0] == "add":
        assert re.fullmatch(r"\w+\n", done.stdout)
    else:
        assert done.stdout == clean.stdout
    again = run_qem(*(("list",) if args[0] == "add" else args), cwd=memory)
    assert len(aside_lines(again.stderr)) == 1  # named again, until it is fixed
    (memory / ".qem" / name).unlink()
    assert not aside_lines(run_qem("list", cwd=memory).stderr)


def test_many_files_are_counted_in_one_short_line(memory: Path) -> None:
    names = plant(memory, 7)
    done = run_qem("list", cwd=memory)
    (line,) = aside_lines(done.stderr)
    assert line.startswith("qem: 7 malformed log files are set aside")
    assert all(n in line for n in names[:3]) and not any(n in line for n in names[3:])
    assert "and 4 more" in line
    verify = run_qem("verify", cwd=memory)  # verify names each itself, with why, once
    assert verify.returncode == 1
    assert all((verify.stdout + verify.stderr).count(n) == 1 for n in names)
    assert "malformed log files are set aside, not read" not in verify.stderr

"""A check-in of MEMORY.md whose only differences are what qem derives from the log (an
`answered by` marker removed or changed by hand) renders the file again and writes no
event, so that `qem export --check` and `qem export` agree with it after.  Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)


def test_a_derived_marker_edited_by_hand_is_rendered_again_and_the_loop_ends(ws: Path, qem) -> None:
    _git(ws, "init", "-q")
    _git(ws, "config", "user.email", "a@a")
    _git(ws, "config", "user.name", "a")
    assert qem("init").returncode == 0 and qem("export").returncode == 0
    request = qem("add", "Req", "--kind", "task", "--to", "bob").stdout.strip()
    answer = qem("answer", request, "Ans").stdout.strip()
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "a")
    memory = ws / "MEMORY.md"
    rendered = memory.read_bytes()
    assert f" · answered by #{answer}".encode() in rendered
    log_before = qem("log", "--json").stdout
    for edit in ("", " · answered by #zzzz"):  # removed, then changed
        memory.write_bytes(rendered.replace(f" · answered by #{answer}".encode(), edit.encode()))
        assert qem("export", "--check").returncode == 1
        done = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--yes")
        assert done.returncode == 0, done.stderr
        assert "no event written" in done.stderr and "rendered again" in done.stderr
        assert memory.read_bytes() == rendered
        check = qem("export", "--check")
        assert check.returncode == 0, check.stdout + check.stderr
        assert qem("export").returncode == 0
        assert qem("log", "--json").stdout == log_before
    again = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--yes")
    assert again.returncode == 0 and "no changes; nothing written" in again.stderr

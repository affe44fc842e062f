"""Interruptions and prompts at a real terminal (tmux): Ctrl-C and Ctrl-D at each prompt,
and a store that moves while the plan waits for its answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _edit_support import ACTIVE_GOTCHA, ACTIVE_TASK, SEED_HEAD, TEXTS, aliases, events, head, make_editor, seed
from test_edit_tty import CONFLICTING_EDIT, Terminal, qem_command, term  # noqa: F401  (term is a fixture)

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "tmux"], capture_output=True).returncode != 0, reason="needs tmux"
)

A_CHANGE = f"drop({TEXTS[ACTIVE_TASK]!r})"


def start_edit(term: Terminal, ws: Path, tmp_path: Path, body: str, *args: str) -> None:
    seed(ws)
    env = {"QEM_EDITOR": make_editor(tmp_path, body), "QEM_TEST_RECORD": str(tmp_path / "record"), "TERM": "xterm"}
    term.start(qem_command("edit", *args), ws, env)


def apply_then_wait_for_the_reason_prompt(term: Terminal) -> None:
    term.wait_for(r"Apply these changes\?")
    term.type("y")
    term.keys("Enter")
    term.wait_for(r"Reason for this check-in")


def interrupted(term: Terminal, ws: Path) -> None:
    term.keys("C-c")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=130" in screen, screen
    assert "interrupted; your edit is kept" in screen and "qem edit --resume" in screen, screen
    assert head(ws) == SEED_HEAD
    assert any((ws / ".qem" / "checkouts").iterdir())


def test_ctrl_c_at_the_apply_prompt(ws: Path, term: Terminal, tmp_path: Path) -> None:
    start_edit(term, ws, tmp_path, A_CHANGE, "-m", "why")
    term.wait_for(r"Apply these changes\?")
    interrupted(term, ws)


def test_ctrl_c_at_the_reason_prompt(ws: Path, term: Terminal, tmp_path: Path) -> None:
    start_edit(term, ws, tmp_path, A_CHANGE)
    apply_then_wait_for_the_reason_prompt(term)
    interrupted(term, ws)


def test_ctrl_c_at_the_what_now_prompt(ws: Path, term: Terminal, tmp_path: Path) -> None:
    start_edit(term, ws, tmp_path, CONFLICTING_EDIT, "-m", "why")
    term.wait_for(r"\[e\]dit again / e\[x\]it")
    term.keys("C-c")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=130" in screen and "interrupted; your edit is kept" in screen, screen


def test_ctrl_d_at_the_reason_prompt_keeps_the_edit_and_does_not_loop(ws: Path, term: Terminal, tmp_path: Path) -> None:
    start_edit(term, ws, tmp_path, A_CHANGE)
    apply_then_wait_for_the_reason_prompt(term)
    term.keys("C-d")
    screen = term.wait_for(r"QEM-EXIT=\d+", timeout=10)
    assert "QEM-EXIT=0" in screen, screen
    assert screen.count("Reason for this check-in") == 1, screen
    assert "nothing written" in screen and "qem edit --resume" in screen
    assert head(ws) == SEED_HEAD


def test_a_store_that_moves_at_the_prompt_is_said_and_the_reason_kept(ws: Path, term: Terminal, tmp_path: Path) -> None:
    start_edit(term, ws, tmp_path, A_CHANGE)
    term.wait_for(r"Apply these changes\?")
    other = subprocess.run([sys.executable, "-m", "qem_edit", "flag-stale", str(ACTIVE_GOTCHA), "-m", "meanwhile",
                            "--actor", "other"], cwd=ws, capture_output=True, text=True)
    assert other.returncode == 0, other.stderr
    term.type("y")
    term.keys("Enter")
    term.wait_for(r"Reason for this check-in")
    term.type("the first reason")
    term.keys("Enter")
    screen = term.wait_for(r"the store moved on: 1 new event")
    term.wait_for(r"Apply these changes\?.*\n(?:.*\n)*.*Apply these changes\?")
    term.type("y")
    term.keys("Enter")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=0" in screen, screen
    assert screen.count("Reason for this check-in") == 1, screen
    names = aliases(ws)
    theirs, *mine = events(ws, after=SEED_HEAD)  # new events come last, in the order they were written
    assert (names[theirs.note], theirs.type, theirs.actor) == (ACTIVE_GOTCHA, "stale_flagged", "other")
    assert [(names[e.note], e.type, e.reason) for e in mine] == [(ACTIVE_TASK, "revoked", "the first reason")]

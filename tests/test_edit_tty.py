"""`qem edit` at a real terminal, driven through tmux as a person would drive it.

One test runs vim itself; the others run a scripted editor but answer qem's prompts at
the terminal (interactive conflict resolution).  Skipped where tmux or vim is missing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _edit_support import (
    ACTIVE_GOTCHA,
    ACTIVE_TASK,
    SEED_HEAD,
    TEXTS,
    aliases,
    events,
    make_editor,
    notes,
    seed,
    shorts,
)
from builders import store_path

from qem_edit.storage.store import Store

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None or shutil.which("vim") is None, reason="needs tmux and vim"
)


class Terminal:
    """A private tmux server (its own socket) running one command in a 200x50 pane."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="qemtty-"))  # short: socket paths are limited
        self.socket = str(self.dir / "s")

    def tmux(self, *args: str, env: dict | None = None) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, env=env, timeout=10)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, command: str, cwd: Path, env: dict) -> None:
        full = {k: v for k, v in os.environ.items() if k != "TMUX"}
        full.update(env)
        script = f"cd {shlex.quote(str(cwd))} && {command}; echo QEM-EXIT=$?; sleep 600"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", "-s", "qem", script, env=full)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "qem", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "qem", "-l", text)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "qem", "-S", "-300")

    def wait_for(self, pattern: str, timeout: float = 20.0, gone: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if bool(re.search(pattern, screen)) != gone:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout}s for {'no ' if gone else ''}{pattern!r}; the screen:\n{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def term():
    terminal = Terminal()
    yield terminal
    terminal.close()


def qem_command(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "qem_edit", *args))


def test_a_person_edits_in_vim(ws: Path, term: Terminal) -> None:
    seed(ws)
    env = {"EDITOR": "vim -u NONE -N -i NONE -n", "TERM": "xterm-256color", "QEM_ACTOR": "a-person"}
    term.start(qem_command("edit"), ws, env)
    term.wait_for(r"## Directives")  # vim shows the checkout
    # delete a note's line, found by search
    term.type("/Review the retry PR")
    term.keys("Enter")
    term.type("dd")
    # change one
    term.type(":%s/lock order is A then B/lock order is B then A/")
    term.keys("Enter")
    # add one, under Tasks
    term.type("/^## Tasks")
    term.keys("Enter")
    term.type("o- a new note")
    term.wait_for(r"-- INSERT --")
    term.keys("Escape")
    term.wait_for(r"-- INSERT --", gone=True)
    term.type(":wq")
    term.keys("Enter")
    screen = term.wait_for(r"Apply these changes\?")
    assert "1 create, 1 supersede, 1 revoke" in screen
    term.type("y")
    term.keys("Enter")
    term.wait_for(r"Reason for this check-in")
    term.type("cleanup at the keyboard")
    term.keys("Enter")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=0" in screen, screen

    after = notes(ws)
    assert after[ACTIVE_TASK].state == "revoked"
    assert after[ACTIVE_TASK].state_reason == "cleanup at the keyboard"
    successor = after[after[ACTIVE_GOTCHA].superseded_by]
    assert (successor.text, successor.provenance, successor.supersedes) == ("The lock order is B then A", "human",
                                                                            after[ACTIVE_GOTCHA].id)
    [created] = [n for n in after.values() if n.alias is None and n.supersedes is None]  # made since the seed
    assert (created.kind, created.priority, created.text, created.provenance) == ("task", "medium", "a new note", "human")
    mine = events(ws, after=SEED_HEAD)
    assert {e.actor for e in mine} == {"a-person"} and len({e.checkin for e in mine}) == 1


CONFLICTING_EDIT = (
    "rounds = os.path.join(os.path.dirname(os.environ['QEM_TEST_RECORD']), 'rounds')\n"
    "n = len(open(rounds).read()) if os.path.exists(rounds) else 0\n"
    "open(rounds, 'a').write('x')\n"
    "if n == 0:\n"
    "    qem('revoke', '2', '-m', 'wrong order', '--actor', 'other')\n"
    "    sub('The lock order is A then B', 'The lock order is B then A')\n"
    f"    drop({TEXTS[ACTIVE_TASK]!r})\n"
    "else:\n"
    "    record('second', text)\n"
    "    resolve('yours')\n"
)


def test_a_conflict_at_the_terminal_is_edited_again_and_resolved(ws: Path, term: Terminal, tmp_path: Path) -> None:
    seed(ws)
    env = {"QEM_EDITOR": make_editor(tmp_path, CONFLICTING_EDIT), "QEM_TEST_RECORD": str(tmp_path / "record"), "TERM": "xterm"}
    term.start(qem_command("edit"), ws, env)
    screen = term.wait_for(r"\[e\]dit again / e\[x\]it")
    gotcha = shorts(ws)[ACTIVE_GOTCHA]
    assert f"conflict on #{gotcha}:" in screen
    term.type("e")
    term.keys("Enter")
    term.wait_for(r"Apply these changes\?")
    term.type("y")
    term.keys("Enter")
    term.wait_for(r"Reason for this check-in")
    term.type("kept my order")
    term.keys("Enter")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=0" in screen, screen

    second = json.loads((tmp_path / "record.second").read_text())
    lines = second.split("\n")
    with Store.open(store_path(ws)) as store:
        assert lines[0].startswith(f"<!-- qem memory={store.memory_id()} ")
    assert lines[1].startswith("<!-- qem:errors") and f"conflict on #{gotcha}:" in second
    marks = [line[:7] for line in lines if line[:7] in ("<<<<<<<", "|||||||", "=======", ">>>>>>>")]
    assert marks == ["<<<<<<<", "|||||||", "=======", ">>>>>>>"]
    assert "<<<<<<< yours" in second and "||||||| base" in second and "======= the store now" in second
    assert TEXTS[ACTIVE_TASK] not in second  # your other change is kept in the rebased file

    after = notes(ws)
    assert after[ACTIVE_TASK].state == "revoked"
    # you kept your side: the note the other revoked comes back with your text
    assert after[ACTIVE_GOTCHA].state == "superseded"
    assert after[after[ACTIVE_GOTCHA].superseded_by].text == "The lock order is B then A"
    names = aliases(ws)
    types = [(names[e.note], e.type, e.actor) for e in events(ws, after=SEED_HEAD)]
    assert types[0] == (ACTIVE_GOTCHA, "revoked", "other")
    assert (ACTIVE_GOTCHA, "reinstated", "tester") in types
    assert not (ws / ".qem" / "checkouts").exists() or not any((ws / ".qem" / "checkouts").iterdir())


def test_a_conflict_at_the_terminal_can_be_left_for_later(ws: Path, term: Terminal, tmp_path: Path) -> None:
    seed(ws)
    env = {"QEM_EDITOR": make_editor(tmp_path, CONFLICTING_EDIT), "QEM_TEST_RECORD": str(tmp_path / "record"), "TERM": "xterm"}
    term.start(qem_command("edit", "-m", "later"), ws, env)
    term.wait_for(r"\[e\]dit again / e\[x\]it")
    term.type("x")
    term.keys("Enter")
    screen = term.wait_for(r"QEM-EXIT=\d+")
    assert "QEM-EXIT=3" in screen, screen
    assert "qem edit --resume" in screen
    names = aliases(ws)
    assert [(names[e.note], e.type, e.actor) for e in events(ws, after=SEED_HEAD)] == [(ACTIVE_GOTCHA, "revoked", "other")]
    [kept] = (ws / ".qem" / "checkouts").iterdir()
    assert "B then A" in (kept / "MEMORY.md").read_text()

"""What qem prints for a person, run as a person runs it: no raw control sequence from a
clone's log ever reaches a terminal (an escape in a text or a reason is shown, never
obeyed; an actor name holding one is set aside on read), also through git's textconv and
at a real pseudo-terminal.

The hostile files are written into `.qem/` by hand, named by the hash of their bytes, as
a clone would push them.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_qem

from qem_edit.base import ids
from qem_edit.storage.logtree import canonical

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # write the clipboard
HOSTILE = f"deploy {OSC52} from main \x1b[8mhidden\x1b[0m \x9b2J done"
ACTOR = "mallory"  # (an actor name with control characters is set aside on read: tests/test_hostile_clone.py)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every C0 and C1 control but newline and tab
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "PAGER": "cat", "GIT_PAGER": "cat"}


def run(args: list[str], cwd: Path, tty: bool = False) -> tuple[int, str]:
    """stdout and stderr as bytes decoded (no newline translation: a raw CR must show)."""
    env = {**os.environ, **GIT}
    if not tty:
        done = subprocess.run(args, cwd=cwd, capture_output=True, env=env, timeout=120)
        return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
    main, child = pty.openpty()
    proc = subprocess.Popen(args, cwd=cwd, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    out = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.wait(timeout=120), out.decode("utf-8", "replace")


def qem(*args: str) -> list[str]:
    return [sys.executable, "-m", "qem_edit", *args]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT})
    assert done.returncode == 0, done.stderr
    return done.stdout


def rewrite(memory: Path, name: str, **changes) -> tuple[str, dict]:
    """Replace the event file `name` by one with `changes`, named by its new bytes."""
    obj = json.loads((memory / "events" / name).read_bytes())
    obj.update(changes)
    data = canonical(obj)
    new = ids.content_id(data)
    (memory / "events" / name).unlink()
    (memory / "events" / new).write_bytes(data)
    return new, obj


def hostile_repository(root: Path) -> dict[str, str]:
    """A git repository whose last commit adds a note with an escape-laden text and actor,
    and a revocation whose reason and actor carry escapes; names of what it made."""
    git(root, "init", "-q")
    assert run_qem("add", "a good note", "--kind", "gotcha", cwd=root).returncode == 0
    good = run_qem("list", "--json", cwd=root)
    good_id = json.loads(good.stdout)[0]["id"]
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    memory = root / ".qem"
    before = set(os.listdir(memory / "events"))
    assert run_qem("add", "placeholder", "--kind", "directive", cwd=root).returncode == 0
    (created,) = set(os.listdir(memory / "events")) - before
    assert run_qem("revoke", good_id[:8], "-m", "placeholder", cwd=root).returncode == 0
    (revoked,) = set(os.listdir(memory / "events")) - before - {created}
    record = {"key": ids.nonce(), "text": HOSTILE}
    obj = json.loads((memory / "events" / created).read_bytes())
    new_id, _ = rewrite(memory, created, actor=ACTOR, data={**obj["data"], "text": ids.content_id(canonical(record))})
    (memory / "texts" / created).unlink()
    (memory / "texts" / new_id).write_bytes(canonical(record))
    revoke_id, _ = rewrite(memory, revoked, actor=ACTOR, reason=HOSTILE)
    (memory / "index.db").unlink()  # the index read the placeholders: build it from the log
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "hostile")
    return {"note": new_id, "good": good_id, "revoke": revoke_id}


@pytest.fixture
def hostile(ws: Path) -> dict[str, str]:
    return hostile_repository(ws)


READS = [
    ("list",), ("list", "--state", "active"), ("show", "{note}"), ("show", "{good}"), ("log",), ("log", "{good}"),
    ("query", "text~deploy"), ("query", "--events", "type=revoked"), ("status", "{good}"), ("context",),
    ("diff", "HEAD~1", "HEAD"), ("diff", "HEAD~1", "HEAD", "--format", "markdown"), ("diff", "HEAD~1", "HEAD", "--stat"),
    ("verify",), ("export", "--check"), ("checkout",), ("checkouts",),
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_no_command_prints_a_raw_control_character(ws: Path, hostile: dict[str, str], args: tuple[str, ...]) -> None:
    code, out = run(qem(*(a.format(**hostile) for a in args)), ws)
    assert code in (0, 1), out
    assert "Traceback" not in out
    assert not RAW.findall(out), out
    if args[0] in ("show", "log", "list", "query", "diff") and "--stat" not in args:
        assert r"\x1b" in out and "52;c;cm0g" in out or r"mal\x1b" in out  # shown, never obeyed


@pytest.mark.parametrize("args", [("list", "--json"), ("show", "{note}", "--json"), ("log", "--json"),
                                  ("diff", "HEAD~1", "HEAD", "--format", "json")], ids=" ".join)
def test_json_keeps_the_exact_strings_escaped(ws: Path, hostile: dict[str, str], args: tuple[str, ...]) -> None:
    code, out = run(qem(*(a.format(**hostile) for a in args)), ws)
    assert not RAW.findall(out), out
    done = subprocess.run(qem(*(a.format(**hostile) for a in args)), cwd=ws, capture_output=True)
    found = set(strings(json.loads(done.stdout)))
    assert HOSTILE in found or ACTOR in found  # the exact strings, once parsed


def strings(data: object):  # type: ignore[no-untyped-def]
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from strings(value)


def test_the_textconv_escapes_whatever_its_output_is(ws: Path, hostile: dict[str, str]) -> None:
    for name in (f"events/{hostile['revoke']}", f"texts/{hostile['note']}"):  # a reason, a text
        code, out = run(qem("log-textconv", str(ws / ".qem" / name)), ws)
        assert code == 0 and not RAW.findall(out), out
        assert r"\x1b" in out or r"\u001b" in out
    # git pipes the textconv's output to its pager: what reaches the terminal is escaped
    assert run_qem("hooks", "install", cwd=ws).returncode == 0
    code, out = run(["git", "log", "-p", "-1"], ws)
    assert code == 0 and "event " in out and "mal" in out, out
    assert not RAW.findall(out), out
    code, out = run(["git", "-c", "core.pager=cat", "log", "-p", "-1"], ws, tty=True)
    assert code == 0 and "mal" in out
    assert "\x1b]52" not in out and "\x1b[8m" not in out and "\x1b[2J" not in out, out


def test_at_a_real_terminal_too(ws: Path, hostile: dict[str, str]) -> None:
    run(qem("list"), ws)  # the index built first: its progress line is qem's own CRs
    for args in (("list",), ("show", hostile["note"]), ("log",), ("diff", "HEAD~1", "HEAD")):
        code, out = run(qem(*args), ws, tty=True)
        assert code in (0, 1) and "Traceback" not in out, out
        assert not RAW.findall(out.replace("\r\n", "\n")), out  # the terminal's own CR LF aside
        assert "\\x1b" in out


def test_an_error_naming_a_hostile_name_is_escaped_too(ws: Path) -> None:
    assert run_qem("add", "a note", "--kind", "gotcha", cwd=ws).returncode == 0
    code, out = run(qem("show", "\x1b[8mnope"), ws)
    assert code == 2 and not RAW.findall(out) and "\\x1b[8mnope" in out, out


# -- progress of long work: on stderr at a terminal, nothing through a pipe ----------------------


def test_long_work_shows_progress_at_a_terminal_and_nothing_through_a_pipe(tmp_path: Path) -> None:
    from conftest import FIXTURES

    corpus = tmp_path / "corpus-2500.jsonl"  # over 2,000 events: a load written and indexed streamed
    subprocess.run([sys.executable, str(FIXTURES / "generate.py"), "--notes", "2500", "-o", str(corpus)], check=True)
    at_tty, piped = tmp_path / "tty", tmp_path / "pipe"
    code, out = run(qem("load", str(corpus), "-w", str(at_tty)), tmp_path, tty=True)
    assert code == 0 and "\rqem: replaying the notes: " in out and "of 2,500)" in out, out
    assert "\rqem: converting the numbered log: " in out  # the generated corpus is an old numbered dump
    assert out.rstrip().endswith("2500 notes") and "\r" + " " * 20 in out  # the line cleared before the answer
    done = subprocess.run(qem("load", str(corpus), "-w", str(piped)), cwd=tmp_path, capture_output=True, timeout=120)
    assert done.returncode == 0 and b"\r" not in done.stderr and b"replaying" not in done.stderr
    for ws in (at_tty, piped):  # a fresh clone's first index build, and verify's replay
        (ws / ".qem" / "index.db").unlink()
    code, out = run(qem("list", "-w", str(at_tty), "--kind", "directive"), tmp_path, tty=True)
    assert code == 0 and "\rqem: reading the log: " in out and "\rqem: replaying the notes: " in out
    code, out = run(qem("verify", "-w", str(at_tty)), tmp_path, tty=True)
    assert code == 0 and "\rqem: replaying the notes: " in out and "ok: the log replays cleanly" in out
    for args in (("list", "-w", str(piped), "--kind", "directive"), ("verify", "-w", str(piped))):
        done = subprocess.run(qem(*args), cwd=tmp_path, capture_output=True, timeout=120)
        assert done.returncode == 0 and b"\r" not in done.stderr and b"qem: re" not in done.stderr, done.stderr

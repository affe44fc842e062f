"""A new session's start is answered from the reply the last one was given at the same moment
of the index (qem_edit.reads.starts), without SQLite or the store, the same bytes and the
same ledger; and never otherwise: a note written, changed or pulled since (even within one
tick of a coarse file clock), a note's end passed since, a request in force, the session's
own session notes, a window with a ledger already, a kept file planted, damaged or brought
from another clone, each is read in full and given as before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import run_qem
from test_hooks import project  # noqa: F401 (the fixture, used by name)
from test_hooks_quiet import frozen_clock
from test_secret_fields import _files_holding

from qem_edit.system import ledger
from qem_edit.system.workspace import STARTS_NAME

NOW = "2026-12-05T12:00:00Z"
FULL = ["_sqlite3", "qem_edit.reads.session", "qem_edit.storage.store"]  # what a full read loads


def start(top: Path, session: str, event: str = "SessionStart", env: dict | None = None,
          **payload: object) -> tuple[str, list[str]]:
    """A Claude Code start hook (a new session's, or `event` SubagentStart) run in a process
    of its own: its stdout, and which of SQLite, the store and the full read it loaded."""
    probe = (f"import sys; sys.argv = ['qem', 'hook', 'claude', {event!r}]\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in {FULL!r} if m in sys.modules), file=sys.stderr)")
    data = {"session_id": session, "hook_event_name": event, "cwd": str(top), **payload}
    if event == "SessionStart":
        data.setdefault("source", "startup")
    done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(data), capture_output=True, text=True,
                          cwd=top, timeout=60, env={**os.environ, "QEM_NOW": NOW, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))




def book(top: Path, key: str) -> bytes:
    """A context window's ledger as its file holds it."""
    found = ledger.peek(top / ".qem", key)
    assert found is not None, key
    return found.to_bytes()


def context(out: str) -> str:
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


def test_a_new_sessions_start_opens_no_index_and_gives_what_a_full_read_gives(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    first, opened = start(top, "s1")
    assert opened == FULL and f"[#{project['rule']}]" in context(first)
    assert (top / ".qem" / STARTS_NAME).is_file()
    second, opened = start(top, "s2")
    assert opened == [] and second == first
    assert book(top, "claude:s2") == book(top, "claude:s1")  # given, counted and seen alike
    (top / ".qem" / STARTS_NAME).unlink()  # read in full again: the same reply, the same ledger
    third, opened = start(top, "s3")
    assert opened == FULL and third == first and book(top, "claude:s3") == book(top, "claude:s2")
    again, opened = start(top, "s4")
    assert opened == [] and again == first


def test_the_next_hooks_of_a_session_started_from_it_go_on_as_after_a_full_read(project) -> None:  # type: ignore[no-untyped-def]
    """A session whose start was answered from the kept reply is given each note once, and
    its edits with nothing new are answered from the digest, as a session read in full."""
    top = project["top"]
    start(top, "s1")
    out, opened = start(top, "s2")
    assert opened == []
    resumed, opened = start(top, "s2", source="resume")  # its ledger is there: read in full, nothing again
    assert opened == FULL and resumed == ""
    from test_hooks_quiet import EDIT_README, loaded

    out, opened = loaded(top, EDIT_README, session="s2")
    assert out == "" and opened == []


def test_a_change_since_is_read_in_full(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    start(top, "s1")
    put_back = frozen_clock(top)  # the write lands within one tick of the log folders' clock
    assert run_qem("add", "Deploy only from a tag", "-k", "directive", cwd=top).returncode == 0
    put_back()
    out, opened = start(top, "s2")
    assert opened == FULL and "Deploy only from a tag" in context(out)
    revoked = run_qem("revoke", str(project["rule"]), "-m", "obsolete", cwd=top)
    assert revoked.returncode == 0, revoked.stderr
    out, opened = start(top, "s3")
    assert opened == FULL and f"[#{project['rule']}]" not in context(out)


def test_log_files_from_a_pull_are_read_in_full(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Another clone's note arrives as log files (what a pull brings): the log's
    fingerprint moved, so the kept reply is not used; the next start catches up and gives it."""
    top = project["top"]
    start(top, "s1")
    other = tmp_path / "other"
    shutil.copytree(top / ".qem", other / ".qem", ignore=shutil.ignore_patterns("index.db*", "sessions", "*.lock"))
    assert run_qem("add", "Tag every release", "-k", "directive", cwd=other).returncode == 0
    for folder in ("events", "texts"):
        for name in os.listdir(other / ".qem" / folder):
            if not (top / ".qem" / folder / name).exists():
                shutil.copy2(other / ".qem" / folder / name, top / ".qem" / folder / name)
    out, opened = start(top, "s2")
    assert opened == FULL and "Tag every release" in context(out)


def test_a_notes_end_passed_since_is_read_in_full(project) -> None:  # type: ignore[no-untyped-def]
    """A directive whose end is an hour after the first start: a start before it is
    answered from the kept reply; one after it is read in full and says the note past its
    end, as a full read says it."""
    top = project["top"]
    made = run_qem("add", "Freeze merges until the release", "-k", "directive", "--expires", "2026-12-05T13:00:00Z",
                   cwd=top, env={**os.environ, "QEM_NOW": NOW})
    assert made.returncode == 0, made.stderr
    first, _ = start(top, "s1")
    assert "Freeze merges" in context(first)
    before, opened = start(top, "s2", env={"QEM_NOW": "2026-12-05T12:59:59Z"})
    assert opened == [] and before == first
    after, opened = start(top, "s3", env={"QEM_NOW": "2026-12-05T13:00:00Z"})
    assert opened == FULL and after != first
    (top / ".qem" / STARTS_NAME).unlink()
    read, opened = start(top, "s4", env={"QEM_NOW": "2026-12-05T13:00:00Z"})
    assert opened == FULL and read == after  # what the full read says then
    earlier, opened = start(top, "s5")  # a clock before the time the kept reply was read at
    assert opened == FULL


def test_a_request_in_force_keeps_nothing(project) -> None:  # type: ignore[no-untyped-def]
    """What is owed and what is late move with the clock and with the seat asking: a start
    in a memory with a request in force is read in full every time."""
    top = project["top"]
    made = run_qem("add", "Review the schema change", "-k", "task", "--to", "alice", "--due", "2026-12-06",
                   cwd=top, env={**os.environ, "QEM_NOW": NOW})
    assert made.returncode == 0, made.stderr
    first, opened = start(top, "s1", env={"QEM_ACTOR": "alice"})  # owed by the seat asking
    assert opened == FULL and "Review the schema change" in context(first)
    assert not (top / ".qem" / STARTS_NAME).exists()
    other, opened = start(top, "s2", env={"QEM_ACTOR": "bob"})  # not bob's, not late: not given
    assert opened == FULL and "Review the schema change" not in context(other)
    assert not (top / ".qem" / STARTS_NAME).exists()
    late, opened = start(top, "s3", env={"QEM_ACTOR": "bob", "QEM_NOW": "2026-12-07T09:00:00Z"})  # late: everyone's
    assert opened == FULL and "Review the schema change" in context(late) and "LATE" in context(late)


def test_a_sessions_own_session_notes_are_read_in_full(project) -> None:  # type: ignore[no-untyped-def]
    """Session s9 (under way: its ledger is there) keeps a session note.  Another new
    session is answered from the kept reply, which hides it; s9's own subagent, whose
    hooks carry s9's id, is read in full and given it."""
    top = project["top"]
    start(top, "s9")
    made = run_qem("add", "Scratch: try the new parser", "-k", "directive", "--scope", "session", "--session", "s9",
                   cwd=top)
    assert made.returncode == 0, made.stderr
    first, opened = start(top, "s1")
    assert opened == FULL and "Scratch" not in context(first)  # another session's: hidden
    other, opened = start(top, "s2")  # (the store is opened to end the notes of sessions gone: no read)
    assert opened == ["_sqlite3", "qem_edit.storage.store"] and other == first
    helper, opened = start(top, "s1", "SubagentStart", agent_id="a0", agent_type="Explore")  # kept for subagents
    assert opened == FULL and "Scratch" not in context(helper)
    mine, opened = start(top, "s9", "SubagentStart", agent_id="a1", agent_type="Explore")
    assert opened == FULL and "Scratch: try the new parser" in context(mine)
    theirs, opened = start(top, "s2", "SubagentStart", agent_id="a2", agent_type="Explore")
    assert opened == [] and theirs == helper


def test_a_window_with_a_ledger_and_a_start_after_a_clear_are_read_in_full(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    first, _ = start(top, "s1")
    out, opened = start(top, "s1")  # the same session started again: its ledger says what it was given
    assert opened == FULL and out == ""
    cleared, opened = start(top, "s2", source="clear")
    assert opened == FULL and context(cleared)


def test_a_subagents_start_is_kept_apart_from_a_sessions(project) -> None:  # type: ignore[no-untyped-def]
    """A subagent's start (its own context window, its own event) is kept under its own key;
    a second subagent is answered from it, and its session's ledger names both, to end
    them with it."""
    top = project["top"]
    session, _ = start(top, "s1")
    one, opened = start(top, "s1", "SubagentStart", agent_id="a1", agent_type="Explore")
    assert opened == FULL and f"[#{project['rule']}]" in context(one)
    assert json.loads(one)["hookSpecificOutput"]["hookEventName"] == "SubagentStart"
    two, opened = start(top, "s1", "SubagentStart", agent_id="a2", agent_type="Explore")
    assert opened == [] and two == one
    assert book(top, "claude:agent:a2") == book(top, "claude:agent:a1")
    assert ledger.peek(top / ".qem", "claude:s1").agents == ["claude:agent:a1", "claude:agent:a2"]
    assert start(top, "s2")[1] == []  # the session's own kept reply is there beside the subagents'


def test_a_kept_file_planted_damaged_or_from_another_clone_is_not_trusted(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    first, _ = start(top, "s1")
    kept = top / ".qem" / STARTS_NAME
    header, _, body = kept.read_bytes().partition(b"\n")
    entries = json.loads(body)
    (key, entry), = entries.items()
    forged = {key: {**entry, "reply": entry["reply"].replace("Run the tests", "Delete the tests")}}
    kept.write_bytes(header + b"\n" + json.dumps(forged).encode())  # (as this checkout's own: used)
    assert "Delete the tests" in context(start(top, "s2")[0])
    clone = tmp_path / "clone"  # another checkout of the same memory (its folders other inodes)
    shutil.copytree(top, clone, symlinks=True)
    for name in (STARTS_NAME, "index.db-moments.json"):
        (clone / ".qem" / name).unlink(missing_ok=True)
    start(clone, "c1")
    header_there, _, body_there = (clone / ".qem" / STARTS_NAME).read_bytes().partition(b"\n")
    body_there = body_there.replace(str(clone).encode(), str(top).encode())  # (its key named as here)
    kept.write_bytes(header_there + b"\n" + body_there.replace(b"Run the tests", b"Delete the tests"))
    out, opened = start(top, "s3")
    assert opened == FULL and out == first
    for damaged in (b"[]", b'{"' + key.encode() + b'": {"reply": 7}}', b"{not json", b'{"a":' * 100_000):
        kept.write_bytes(kept.read_bytes().partition(b"\n")[0] + b"\n" + damaged)
        out, opened = start(top, f"d{len(damaged)}")
        assert opened == FULL and out == first, damaged[:40]
    kept.unlink()
    target = tmp_path / "target.json"
    target.write_bytes(b"{}")
    kept.symlink_to(target)
    out, opened = start(top, "s4")
    assert opened == FULL and out == first and target.read_bytes() == b"{}"


def test_a_forgotten_text_is_in_no_kept_reply(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    token = "ghp_" + "k7Qx2Lm9Vb4Np8Rt6Yw3Zc5Hs1Jd0Fg7Ea2"
    made = run_qem("add", f"Publish with {token}", "-k", "directive", "--allow-secret", cwd=top)
    assert made.returncode == 0, made.stderr
    assert token in context(start(top, "s1")[0])
    assert f".qem/{STARTS_NAME}" in _files_holding(top, token)
    left = top / ".qem" / f".{STARTS_NAME}.0123456789ab.tmp"  # what a hook killed while writing it leaves
    left.write_bytes((top / ".qem" / STARTS_NAME).read_bytes())
    forgot = run_qem("forget", made.stdout.strip(), "-m", "held a token", "--yes", cwd=top)
    assert forgot.returncode == 0, forgot.stderr
    assert _files_holding(top, token) == []
    out, opened = start(top, "s2")
    assert token not in out


def test_a_hook_beside_a_start_keeps_nothing_of_its_window(project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A start read in full while a hook of the same session writes its ledger (Claude Code
    may run a tool's hook beside the start's): what that hook gave is the session's own, so
    the start's reply is not kept with it; the next new session is given the lock note at
    its read of the file, as any session is."""
    from qem_edit.base.harness import HARNESSES
    from qem_edit.reads import session
    from qem_edit.shells.hookrun import run

    top = project["top"]
    real = session._read
    read_lock = {"session_id": "s1", "hook_event_name": "PreToolUse", "cwd": str(top), "tool_name": "Read",
                 "tool_input": {"file_path": str(top / "src/lock.py")}}

    def beside(state, moments, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(state, moments, *args, **kwargs)
        if moments[0].event == "start":  # the start has read: the session's Read hook runs now
            done = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "PreToolUse"],
                                  input=json.dumps(read_lock), capture_output=True, text=True, cwd=top, timeout=60)
            assert "Release the lock before the restart" in done.stdout, done.stdout + done.stderr
        return out
    monkeypatch.setattr(session, "_read", beside)
    monkeypatch.setenv("QEM_NOW", NOW)
    data = json.dumps({"session_id": "s1", "hook_event_name": "SessionStart", "cwd": str(top), "source": "startup"})
    first = run(HARNESSES["claude"], "SessionStart", data.encode())[0]
    assert f"[#{project['rule']}]" in context(first)
    monkeypatch.setattr(session, "_read", real)
    out, opened = start(top, "s2")
    assert opened == FULL and out == first + "\n"  # nothing kept by s1: read in full (and printed with a newline)
    done = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "PreToolUse"],
                          input=json.dumps({**read_lock, "session_id": "s2"}), capture_output=True, text=True, cwd=top,
                          timeout=60, env={**os.environ, "QEM_NOW": NOW})
    assert "Release the lock before the restart" in done.stdout, done.stdout + done.stderr


def test_each_harness_and_guest_is_answered_in_its_own_form(project) -> None:  # type: ignore[no-untyped-def]
    """Kept replies are keyed by harness, event and guest: Cursor (running Claude Code's
    hooks, its context in a field of its own) is never given Claude Code's reply, nor Claude
    Code Cursor's; Codex's are kept apart, and write its own ledgers."""
    from test_hooks import hook

    top = project["top"]
    claude_first, _ = start(top, "s1")
    cursor = {"generation_id": "gen-456", "workspace_roots": [str(top)], "hook_event_name": "sessionStart",
              "cursor_version": "2.0.77", "model": "gpt-5", "is_background_agent": False, "composer_mode": "agent"}
    replies = []
    for conversation in ("conv-1", "conv-2"):
        done = hook(top, "claude", "SessionStart", {}, raw=json.dumps({**cursor, "conversation_id": conversation}).encode())
        replies.append(done.stdout)
        assert json.loads(done.stdout)["additional_context"] == context(done.stdout.decode())
    assert replies[0] == replies[1] and replies[0].decode() != claude_first
    codex = [hook(top, "codex", "SessionStart", {"session_id": f"x{i}", "source": "startup", "model": "gpt-5"}).stdout
             for i in (1, 2)]
    assert codex[0] == codex[1] and codex[0] != replies[0]  # (Codex reads the same form as Claude Code)
    assert ledger.peek(top / ".qem", "codex:x2") is not None  # its ledger its own harness's
    assert start(top, "s2") == (claude_first, [])
    entries = json.loads((top / ".qem" / STARTS_NAME).read_bytes().partition(b"\n")[2])
    assert len(entries) == 3


def test_a_session_start_naming_an_agent_writes_the_ledgers_a_full_read_writes(project) -> None:  # type: ignore[no-untyped-def]
    """A SessionStart whose input carries an agent id: the kept reply writes that window's
    ledger and no other, as the full read does."""
    top = project["top"]
    start(top, "s0")
    (top / ".qem" / STARTS_NAME).unlink()
    full, opened = start(top, "s1", agent_id="a1")
    assert opened == FULL
    kept, opened = start(top, "s2", agent_id="a2")
    assert opened == [] and kept == full
    assert book(top, "claude:agent:a2") == book(top, "claude:agent:a1")
    assert (ledger.peek(top / ".qem", "claude:s1"), ledger.peek(top / ".qem", "claude:s2")) == (None, None)


def test_a_subagent_whose_session_ledger_is_held_is_not_marked_given_what_it_was_not(project) -> None:  # type: ignore[no-untyped-def]
    """Another hook of the session holds its ledger past a hook's wait: the subagent's start,
    answered from the kept reply, fails before it writes the subagent's own ledger, and the
    full read it falls back to fails the same way: nothing given, nothing recorded as given."""
    import fcntl
    import threading
    import time

    top = project["top"]
    first, _ = start(top, "s1", "SubagentStart", agent_id="a1", agent_type="Explore")
    assert f"[#{project['rule']}]" in context(first)
    lock = ledger.lock_of(ledger._file(ledger.prepared(top / ".qem"), "claude:s2"))
    ready = threading.Event()

    def hold() -> None:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        ready.set()
        time.sleep(ledger.LOCK_SECONDS + 0.6)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    holder = threading.Thread(target=hold)
    holder.start()
    assert ready.wait(10)
    out, _ = start(top, "s2", "SubagentStart", agent_id="a2", agent_type="Explore")
    holder.join()
    window = ledger.peek(top / ".qem", "claude:agent:a2")
    assert f"[#{project['rule']}]" in context(out) or window is None or not window.given, (out, window.given)


def test_one_reading_of_the_clock_bounds_what_the_kept_reply_says(project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The clock ticks during a start's full read, across the end of a note: the reply and
    the time it is kept as holding from are of the same reading, so a start at that time
    read in full gives the same reply."""
    import qem_edit.base.times as times
    from qem_edit.base.harness import HARNESSES
    from qem_edit.shells.hookrun import run

    top = project["top"]
    t0, t1 = "2026-12-05T12:00:00Z", "2026-12-05T12:00:01Z"
    made = run_qem("add", "Freeze merges now", "-k", "directive", "--expires", t1, cwd=top,
                   env={**os.environ, "QEM_NOW": "2026-12-05T11:00:00Z"})
    assert made.returncode == 0, made.stderr
    readings = iter([t0])
    monkeypatch.setattr(times, "utc_now", lambda: next(readings, t1))  # t0, then t1 ever after
    data = json.dumps({"session_id": "s1", "hook_event_name": "SessionStart", "cwd": str(top), "source": "startup"})
    first = run(HARNESSES["claude"], "SessionStart", data.encode())[0]
    monkeypatch.undo()
    entry, = json.loads((top / ".qem" / STARTS_NAME).read_bytes().partition(b"\n")[2]).values()
    (top / ".qem" / STARTS_NAME).unlink()
    full, opened = start(top, "s2", env={"QEM_NOW": entry["from"]})
    assert opened == FULL and full == first + "\n"


def test_a_kept_file_not_of_this_log_goes_at_the_next_hook(project) -> None:  # type: ignore[no-untyped-def]
    """A kept reply the log has moved past (a pull, or a write by a qem that does not know
    the file) is removed by the next start that finds it, whatever that start gives."""
    top = project["top"]
    start(top, "s1")
    kept = top / ".qem" / STARTS_NAME
    head, _, body = kept.read_bytes().partition(b"\n")
    kept.write_bytes(head.replace(b'"stamp":"[[', b'"stamp":"[[0,') + b"\n" + body)  # another log's fingerprint
    made = run_qem("add", "Review the schema change", "-k", "task", "--due", "2026-12-06", cwd=top,
                   env={**os.environ, "QEM_NOW": NOW})  # a request: no start is kept any more
    assert made.returncode == 0 and not kept.exists()  # (this qem's write removed it)
    kept.write_bytes(head.replace(b'"stamp":"[[', b'"stamp":"[[0,') + b"\n" + body)
    out, opened = start(top, "s2")
    assert opened == FULL and not kept.exists()

"""A tool call that fires nothing new is answered from the digest beside the index
(qem_edit.reads.quiet), without SQLite or the store; and never otherwise: a note written,
changed or pulled since (even within one tick of a coarse file clock), a digest planted or
damaged, a session with no ledger yet, each is read in full and given as before."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_qem
from test_hooks import claude, hook, project  # noqa: F401 (the fixture, used by name)

from qem_edit.storage.stamp import FOLDERS
from qem_edit.system.workspace import MOMENTS_NAME

EDIT_README = {"tool_name": "Edit", "tool_input": {"file_path": "README.md", "old_string": "#", "new_string": "##"}}


def edit(top: Path, path: str, session: str = "s1") -> tuple[str, str]:
    """A Claude Code PreToolUse of an Edit of `path`: ("", "") for nothing, else the
    reply's channel (context, deny) and its text."""
    done = hook(top, "claude", "PreToolUse", {"session_id": session, "tool_name": "Edit",
                                                "tool_input": {"file_path": str(top / path)}})
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return "", ""
    out = json.loads(done.stdout)["hookSpecificOutput"]
    return ("deny", out["permissionDecisionReason"]) if "permissionDecision" in out else ("context",
                                                                                           out["additionalContext"])


def loaded(top: Path, payload: dict, session: str = "s1") -> tuple[str, list[str]]:
    """A PreToolUse run in a process of its own: its stdout, and which of SQLite and the
    store it loaded."""
    probe = ("import sys; sys.argv = ['qem', 'hook', 'claude', 'PreToolUse']\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('_sqlite3', 'qem_edit.storage.store') if m in sys.modules), file=sys.stderr)")
    data = json.dumps({"session_id": session, "hook_event_name": "PreToolUse", "cwd": str(top), **payload})
    done = subprocess.run([sys.executable, "-c", probe], input=data, capture_output=True, text=True, cwd=top, timeout=60)
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def frozen_clock(top: Path):  # type: ignore[no-untyped-def]
    """The log folders' times as they are, to be put back: a change made between the two
    then leaves the log's fingerprint as it was, as a file system whose clock ticks once a
    second does for two writes within that second."""
    memory = top / ".qem"
    times = {f: os.stat(memory / f).st_mtime_ns for f in FOLDERS if (memory / f).exists()}

    def put_back() -> None:
        for folder, ns in times.items():
            os.utime(memory / folder, ns=(ns, ns))
    return put_back


def test_an_edit_with_nothing_due_opens_no_index(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    out, opened = loaded(top, EDIT_README)  # a session's first hook: no ledger, read in full
    assert out == "" and opened == ["_sqlite3", "qem_edit.storage.store"]
    assert claude(top, "SessionStart", source="startup")
    assert (top / ".qem" / MOMENTS_NAME).is_file()
    out, opened = loaded(top, EDIT_README)
    assert out == "" and opened == []
    out, opened = loaded(top, {"tool_name": "Edit", "tool_input": {"file_path": str(top / "src/lock.py")}})
    assert "Release the lock before the restart" in out and opened == ["_sqlite3", "qem_edit.storage.store"]
    out, opened = loaded(top, {"tool_name": "Edit", "tool_input": {"file_path": str(top / "src/lock.py")}})
    assert out == "" and opened == []  # given whole (the call held, then made again): nothing new


def test_a_windows_first_call_firing_nothing_begins_its_ledger_from_the_digest(project) -> None:  # type: ignore[no-untyped-def]
    """A context window with no ledger yet (a session whose harness fired no start, a
    subagent's) whose first tool call fires nothing is answered from the digest: its
    ledger begun as the full read begins it (the notes the memory holds, the digest's
    moment), so its later calls are answered from the digest too, a call firing a note
    still gives it, and the Stop hook still tells a note written since from none."""
    from qem_edit.system import ledger

    top = project["top"]
    lock = {"tool_name": "Edit", "tool_input": {"file_path": str(top / "src/lock.py")}}
    assert claude(top, "SessionStart", source="startup")  # (another session's read writes the digest)
    assert (top / ".qem" / MOMENTS_NAME).is_file()
    out, opened = loaded(top, lock, session="held")  # a first call firing a note: read in full, given
    assert "Release the lock before the restart" in out and opened == ["_sqlite3", "qem_edit.storage.store"]
    out, opened = loaded(top, EDIT_README, session="new")
    assert out == "" and opened == []
    book = ledger.peek(top / ".qem", "claude:new")
    assert book is not None and book.notes_then == 8 and book.seen and book.given == {}
    out, opened = loaded(top, EDIT_README, session="new")
    assert out == "" and opened == []
    out, opened = loaded(top, lock, session="new")
    assert "Release the lock before the restart" in out and opened == ["_sqlite3", "qem_edit.storage.store"]
    stop = hook(top, "claude", "Stop", {"session_id": "new", "stop_hook_active": False})
    assert "record it now" in json.loads(stop.stdout)["reason"]  # no note written since the window began
    loaded(top, EDIT_README, session="other")
    assert run_qem("add", "The cache is warm after boot", "-k", "finding", cwd=top).returncode == 0
    assert hook(top, "claude", "Stop", {"session_id": "other", "stop_hook_active": False}).stdout == b""
    out, opened = loaded(top, lock, session="third")  # (the write removed the digest: read in full, written again)
    assert "Release the lock before the restart" in out
    out, opened = loaded(top, EDIT_README, session="fourth")
    assert out == "" and opened == [] and ledger.peek(top / ".qem", "claude:fourth").notes_then == 9


@pytest.mark.parametrize("harness, event", [("claude", "PreToolUse"), ("codex", "PreToolUse"), ("gemini", "BeforeTool")])
def test_a_first_call_from_the_digest_begins_the_ledger_the_full_read_begins(project, harness: str, event: str) -> None:  # type: ignore[no-untyped-def]
    """A window's first call firing nothing gives what the full read gives and leaves the
    ledger the full read leaves (the same call in another new window, read in full with the
    digest taken away first): for a call replied to, and for Gemini CLI's BeforeTool, a
    hold where no context goes, whose full read leaves the ledger's moment unset."""
    from qem_edit.system import ledger

    top = project["top"]
    assert claude(top, "SessionStart", source="startup")  # (writes the digest)
    tool = {"tool_name": "write_file" if harness == "gemini" else ("apply_patch" if harness == "codex" else "Edit"),
            "tool_input": {"file_path": str(top / "README.md")} if harness != "codex" else
            {"command": "*** Begin Patch\n*** Update File: README.md\n@@\n-#\n+##\n*** End Patch\n"}}
    replies, books = [], []
    for session, full in (("quiet", False), ("full", True)):
        if full:
            (top / ".qem" / MOMENTS_NAME).unlink()
        payload = {"session_id": session, "hook_event_name": event, "cwd": str(top), **tool}
        if harness == "codex":
            payload |= {"turn_id": "t1", "tool_use_id": "u1", "transcript_path": None, "model": "m",
                        "permission_mode": "default"}
        probe = (f"import sys; sys.argv = ['qem', 'hook', {harness!r}, {event!r}]\n"
                 "from qem_edit.__main__ import main\n"
                 "try:\n    main()\nexcept SystemExit:\n    pass\n"
                 "print('_sqlite3' in sys.modules, file=sys.stderr)")
        done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(payload), capture_output=True, text=True,
                              cwd=top, timeout=60)
        assert "qem hook" not in done.stderr and done.stderr.split()[-1] == str(full), (session, done.stderr)
        replies.append(done.stdout)
        book = ledger.peek(top / ".qem", f"{harness}:{session}")
        assert book is not None
        books.append(json.loads(book.to_bytes()))
    assert replies[0] == replies[1]
    assert books[0] == books[1] and books[0]["notes_then"] == 8, books


def test_a_full_read_takes_no_write_lock_of_the_index(project) -> None:  # type: ignore[no-untyped-def]
    """A hook reading in full opens the index without a write transaction (its tables are
    there): another process holding the index's write lock, as a long write does, does not
    make it wait."""
    import sqlite3
    import time

    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    writer = sqlite3.connect(top / ".qem" / "index.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the write lock, held
    try:
        began = time.monotonic()
        channel, text = edit(top, "src/lock.py", "reader")
        assert channel == "deny" and "Release the lock before the restart" in text
        assert time.monotonic() - began < 4, "the hook waited on the writer"
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_note_written_since_is_given_within_one_clock_tick(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    assert edit(top, "README.md") == ("", "")
    put_back = frozen_clock(top)
    added = run_qem("add", "The README is generated: edit docs/readme.in", "-k", "gotcha", "--anchor", "README.md",
                    cwd=top)
    assert added.returncode == 0, added.stderr
    put_back()
    channel, text = edit(top, "README.md")
    assert channel == "deny" and "The README is generated" in text


def test_a_note_changed_since_given_is_said_within_one_clock_tick(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert f"[#{project['rule']}]" in claude(top, "SessionStart", source="startup")
    assert edit(top, "README.md") == ("", "")
    put_back = frozen_clock(top)
    moved = run_qem("supersede", str(project["rule"]), "Run the tests inside .venv with -n 2", cwd=top)
    assert moved.returncode == 0, moved.stderr
    put_back()
    channel, text = edit(top, "README.md")
    assert channel == "context" and "Changed since given earlier" in text and "with -n 2" in text


@pytest.mark.parametrize("tick", [False, True], ids=["a-fine-clock", "one-clock-tick"])
def test_a_change_another_session_read_first_is_still_said_here(project, tick: bool) -> None:  # type: ignore[no-untyped-def]
    """Session a reads the memory in full after a note both were given changed (so the
    digest beside the index is of the changed log); session b, whose last full read was
    before the change, still hears of it at its next call: also where the change came
    within one tick of the folders' clock (the digest's fingerprint is then the one b saw)."""
    top = project["top"]
    for session in ("a", "b"):
        assert f"[#{project['rule']}]" in claude(top, "SessionStart", session=session, source="startup")
        assert edit(top, "README.md", session) == ("", "")
    put_back = frozen_clock(top)
    assert run_qem("supersede", str(project["rule"]), "Run the tests inside .venv with -n 2", cwd=top).returncode == 0
    if tick:
        put_back()
    assert "with -n 2" in edit(top, "README.md", "a")[1]
    assert edit(top, "README.md", "a") == ("", "")  # (a's own call again: from the digest, nothing new)
    channel, text = edit(top, "README.md", "b")
    assert channel == "context" and "Changed since given earlier" in text and "with -n 2" in text


def test_a_note_pulled_from_another_clone_is_given(project) -> None:  # type: ignore[no-untyped-def]
    """The log's files arrive by `git pull`, not through qem: the log's fingerprint moves,
    so the digest written before is not used."""
    top = project["top"]
    subprocess.run(["git", "add", "-A"], cwd=top, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "memory"], cwd=top, check=True, capture_output=True)
    other = top.parent / "other"
    subprocess.run(["git", "clone", "-q", str(top), str(other)], check=True, capture_output=True)
    assert claude(top, "SessionStart", source="startup")
    assert edit(top, "README.md") == ("", "")
    assert run_qem("add", "The README is generated: edit docs/readme.in", "-k", "gotcha", "--anchor", "README.md",
                   cwd=other).returncode == 0
    subprocess.run(["git", "add", "-A"], cwd=other, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "a note"], cwd=other, check=True, capture_output=True)
    subprocess.run(["git", "pull", "-q", "--no-rebase", str(other), "main"], cwd=top, check=True, capture_output=True)
    channel, text = edit(top, "README.md")
    assert channel == "deny" and "The README is generated" in text


def test_a_digest_planted_or_damaged_is_not_trusted(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    assert edit(top, "README.md") == ("", "")
    digest = top / ".qem" / MOMENTS_NAME
    header, _, _ = digest.read_bytes().partition(b"\n")
    empty = b'{"on":{"edit":[],"read":[],"shell":[]},"anchors":[],"paths":[],"runs":[]}'
    planted = [
        json.dumps({**json.loads(header), "stamp": "[]"}).encode() + b"\n" + empty,  # another checkout's fingerprint
        header + b"\n" + b"not json",
        b"\x00\xff" * 10,
        json.dumps({**json.loads(header), "v": 99}).encode() + b"\n" + empty,  # another form
    ]
    for i, raw in enumerate(planted):  # each in a session under way, which only the digest's checks stop
        assert claude(top, "SessionStart", session=f"planted{i}", source="startup")
        digest.unlink(missing_ok=True)
        digest.write_bytes(raw)
        channel, text = edit(top, "src/lock.py", session=f"planted{i}")
        assert "Release the lock before the restart" in text, (i, channel)
    assert claude(top, "SessionStart", session="linked", source="startup")
    digest.unlink()
    elsewhere = top.parent / "digest.json"
    elsewhere.write_bytes(header + b"\n" + empty)
    digest.symlink_to(elsewhere)
    assert "Release the lock" in edit(top, "src/lock.py", session="linked")[1]
    assert not digest.is_symlink() and elsewhere.read_bytes() == header + b"\n" + empty  # the link went, not its target


def test_what_a_call_gives_is_the_same_with_the_digest_or_without(project) -> None:  # type: ignore[no-untyped-def]
    """Two sessions make the same calls (edits, reads, commands; a held call made again at
    once, as the model does; notes added and changed between them, by other processes);
    before each call of the second the digest is removed, so it is always read in full.
    Every reply is the same, and the calls give, hold and say changes."""
    top = project["top"]

    def on(tool: str, target: str) -> dict:
        return ({"tool_name": "Bash", "tool_input": {"command": target}} if tool == "Bash"
                else {"tool_name": tool, "tool_input": {"file_path": str(top / target)}})
    steps: list = [on("Edit", "README.md"), on("Edit", "src/lock.py"), on("Edit", "src/lock.py"),
                   on("Read", "src/index/build.py"), on("Edit", "src/index/build.py"),
                   on("Bash", "make test && alembic history"), on("Bash", "alembic upgrade head"),
                   on("Bash", "cat src/lock.py"), on("Edit", "docs/x.md"),
                   ("add", "Writes under docs go through the docs build", "-k", "gotcha", "--when-path", "docs/**"),
                   on("Edit", "docs/x.md"), on("Write", "docs/y.md"), on("Edit", "README.md"),
                   ("supersede", str(project["lock"]), "Release the lock, then restart"),
                   on("Edit", "README.md"), on("Edit", "src/lock.py")]
    rng = random.Random(7)
    paths = ["README.md", "src/lock.py", "src/index/build.py", "db/migrate.py", "src/index/new.py", "docs/x.md"]
    steps += [on(rng.choice(["Edit", "Read", "Write"]), rng.choice(paths)) for _ in range(12)]
    digest = top / ".qem" / MOMENTS_NAME
    replies: dict[str, list[str]] = {"a": [], "b": []}
    for session in ("a", "b"):
        assert claude(top, "SessionStart", session=session, source="startup")
    for step in steps:
        if isinstance(step, tuple):
            assert run_qem(*step, cwd=top).returncode == 0
            continue
        for session in ("a", "b"):
            if session == "b":
                digest.unlink(missing_ok=True)
            done = hook(top, "claude", "PreToolUse", {"session_id": session, **step})
            assert done.returncode == 0, done.stderr
            replies[session].append(done.stdout.decode())
            if "permissionDecision" in replies[session][-1]:  # held: made again
                replies[session].append(hook(top, "claude", "PreToolUse", {"session_id": session, **step}).stdout.decode())
    assert replies["a"] == replies["b"]
    said = "".join(replies["a"])
    assert said.count("permissionDecision") >= 4 and "Changed since given earlier" in said


def test_changes_left_unsaid_are_said_at_the_next_call(project) -> None:  # type: ignore[no-untyped-def]
    """A reply too small for every change of the notes given (a budget of 400 here) says
    what fits; the next call is read in full and says the rest, never answered from the
    digest as if nothing had changed."""
    from qem_edit.base.harness import HARNESSES
    from qem_edit.shells.hookrun import run

    top = project["top"]
    said = claude(top, "SessionStart", source="startup")
    given = [project[k] for k in ("rule", "rule2", "task")]
    assert all(f"[#{n}]" in said for n in given)
    for n in given:
        assert run_qem("supersede", str(n), f"{'A much longer text than before, ' * 3}({n})", cwd=top).returncode == 0
    call = json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse", "cwd": str(top), **EDIT_README}).encode()
    small, _ = run(HARNESSES["claude"]._replace(budget=400), "PreToolUse", call)
    first = [n for n in given if f"({n})" in small]
    assert 0 < len(first) < len(given), small
    channel, text = edit(top, "README.md")
    assert channel == "context" and all(f"({n})" in text for n in given if n not in first), text


def test_a_hook_beside_a_write_leaves_no_change_unsaid(project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two PreToolUse hooks of one session side by side (Claude Code runs a reply's tool
    calls' hooks so), a note changed between their reads: Q (a Read of src/lock.py) reads
    before the change and gives the lock note as it was; P (an Edit of README.md) reads
    after it, with the ledger as it stood before Q gave the note, so it cannot see that
    note's change.  The session's next call says it."""
    import threading

    from qem_edit.base.harness import HARNESSES
    from qem_edit.reads import session
    from qem_edit.shells.hookrun import run

    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    real = session._read
    q_read, p_read, q_done = threading.Event(), threading.Event(), threading.Event()

    def paused(state, moments, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(state, moments, *args, **kwargs)
        if moments[0].event == "read":  # Q: waits, its read made, until P has read
            q_read.set()
            assert p_read.wait(60)
        else:  # P: waits until Q has recorded what it gave
            p_read.set()
            assert q_done.wait(60)
        return out
    monkeypatch.setattr(session, "_read", paused)

    def call(tool: str, path: str) -> str:
        data = json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse", "cwd": str(top), "tool_name": tool,
                           "tool_input": {"file_path": str(top / path)}}).encode()
        return run(HARNESSES["claude"], "PreToolUse", data)[0]
    out: dict[str, str] = {}

    def q() -> None:
        out["q"] = call("Read", "src/lock.py")
        q_done.set()
    first = threading.Thread(target=q)
    first.start()
    assert q_read.wait(60)
    assert run_qem("supersede", str(project["lock"]), "Release the lock, then restart", cwd=top).returncode == 0
    second = threading.Thread(target=lambda: out.update(p=call("Edit", "README.md")))
    second.start()
    first.join(60)
    second.join(60)
    assert "Release the lock before the restart" in out["q"]  # given as it was before the change
    channel, text = edit(top, "README.md")
    assert channel == "context" and "Changed since given earlier" in text and "Release the lock, then restart" in text


def test_a_digest_linked_to_a_device_costs_nothing(project) -> None:  # type: ignore[no-untyped-def]
    """A commit forcing the digest in as a link to /dev/zero (endless) or to a FIFO (which
    blocks a reader): every hook answers as before, quickly, within 1 GiB, and the link
    is replaced by the digest, never written through."""
    import resource

    top = project["top"]
    digest = top / ".qem" / MOMENTS_NAME
    fifo = top.parent / "fifo"
    os.mkfifo(fifo)

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    for i, target in enumerate(["/dev/zero", str(fifo)]):
        digest.unlink(missing_ok=True)
        digest.symlink_to(target)
        for event, extra in (("SessionStart", {"source": "startup"}), ("PreToolUse", EDIT_README)):
            data = json.dumps({"session_id": f"linked{i}", "hook_event_name": event, "cwd": str(top), **extra})
            done = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", event], input=data.encode(),
                                  capture_output=True, cwd=top, timeout=30, preexec_fn=capped)
            assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-500:]
            if event == "SessionStart":
                assert b"Run the tests inside .venv" in done.stdout
        assert not digest.is_symlink() and digest.is_file()


def test_a_digest_too_large_to_read_fast_is_not_kept(project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Above MAX_BYTES (1 MiB, some 15,000 anchors; 200 bytes here) a digest is kept as its
    header alone, which no call is answered from and no full read writes again until the
    index moves: every call is read in full, as before."""
    from qem_edit.base.harness import HARNESSES
    from qem_edit.reads import quiet
    from qem_edit.shells.hookrun import run

    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    digest = top / ".qem" / MOMENTS_NAME
    assert digest.is_file() and digest.stat().st_size > 200
    assert run_qem("add", "The README is generated: edit docs/readme.in", "-k", "gotcha", "--anchor", "README.md",
                   cwd=top).returncode == 0  # (the index moved: the next full read writes the digest again)
    monkeypatch.setattr(quiet, "MAX_BYTES", 200)

    def call(path: str) -> str:
        data = json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse", "cwd": str(top), "tool_name": "Edit",
                           "tool_input": {"file_path": str(top / path)}}).encode()
        return run(HARNESSES["claude"], "PreToolUse", data)[0]
    assert "The README is generated" in call("README.md")
    assert digest.read_bytes().endswith(b"\n" + quiet.TOO_LARGE)
    kept = digest.stat()
    assert call("README.md") == "" and "Release the lock" in call("src/lock.py")
    assert (digest.stat().st_ino, digest.stat().st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)  # not written again


def prompted(top: Path, session: str, prompt: str, env: dict | None = None) -> tuple[str, list[str]]:
    """A UserPromptSubmit run in a process of its own: its stdout, and which of SQLite and
    the store it loaded."""
    probe = ("import sys; sys.argv = ['qem', 'hook', 'claude', 'UserPromptSubmit']\n"
             "from qem_edit.__main__ import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('_sqlite3', 'qem_edit.storage.store') if m in sys.modules), file=sys.stderr)")
    data = json.dumps({"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": str(top), "prompt": prompt})
    done = subprocess.run([sys.executable, "-c", probe], input=data, capture_output=True, text=True, cwd=top,
                          timeout=60, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_a_prompt_gives_the_same_with_the_digest_or_without(project) -> None:  # type: ignore[no-untyped-def]
    """Two sessions are sent the same prompts (naming nothing, a backticked term, an
    anchored file, a path a pattern takes; a note declaring the prompt moment added between
    them, a request, a compaction); before each prompt of the second the digest is removed,
    so it is always read in full.  Every reply is the same and so is each ledger (every
    prompt heard); a prompt naming nothing new in the first opens no index."""
    from qem_edit.system import ledger

    top = project["top"]
    steps: list = ["please go on", "Why does Store.write hang?", "look at src/lock.py", "and src/index/x.py too",
                   "please go on", ("add", "Say which tests ran", "-k", "finding", "--on", "prompt"), "ok",
                   "ok", ("supersede", str(project["lock"]), "Release the lock, then restart"), "ok",
                   "look at src/lock.py", "fine", ("compact",), "next step", "next step",
                   ("add", "Review the parser", "-k", "task", "--due", "2026-12-06"), "go on",
                   ("late",), "go on"]
    digest = top / ".qem" / MOMENTS_NAME
    replies: dict[str, list[str]] = {"a": [], "b": []}
    quiet: list[str] = []
    env: dict = {}
    for session in ("a", "b"):
        assert claude(top, "SessionStart", session=session, source="startup")
    for step in steps:
        if step == ("compact",):
            for session in ("a", "b"):
                assert claude(top, "PreCompact", session=session, trigger="auto", custom_instructions="") == ""
            continue
        if step == ("late",):
            env = {"QEM_NOW": "2026-12-08T00:00:00Z"}
            continue
        if isinstance(step, tuple):
            assert run_qem(*step, cwd=top, env={**os.environ, "QEM_NOW": "2026-12-05T12:00:00Z"}).returncode == 0
            continue
        for session in ("a", "b"):
            if session == "b":
                digest.unlink(missing_ok=True)
            out, opened = prompted(top, session, step, env)
            replies[session].append(out)
            if session == "a" and opened == []:
                quiet.append(step)
    assert replies["a"] == replies["b"]
    said = "".join(replies["a"])
    for shown in ("term", "lock", "index"):
        assert f"[#{project[shown]}]" in said
    assert "Say which tests ran" in said and "Release the lock, then restart" in said and "LATE" in said
    assert said.count("Run the tests inside .venv") == 1  # the directives again, after the compaction only
    assert quiet == ["please go on", "please go on", "ok", "fine", "next step"], quiet
    books = [ledger.peek(top / ".qem", f"claude:{s}") for s in ("a", "b")]
    assert books[0].prompts == books[1].prompts == [s for s in steps if isinstance(s, str)]
    assert books[0].to_bytes() == books[1].to_bytes()


def test_a_prompt_after_a_compaction_gives_the_compactions_notes(project) -> None:  # type: ignore[no-untyped-def]
    """A harness with no start after a compaction: its next prompt gives the directives
    again, never from the digest."""
    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    assert prompted(top, "s1", "hello") == ("", [])
    assert claude(top, "PreCompact", trigger="auto", custom_instructions="") == ""
    out, opened = prompted(top, "s1", "go on")
    assert opened == ["_sqlite3", "qem_edit.storage.store"] and f"[#{project['rule']}]" in out


def test_a_prompt_gives_the_notes_declaring_the_prompt_moment(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert run_qem("add", "Say which tests ran", "-k", "finding", "--on", "prompt", cwd=top).returncode == 0
    assert claude(top, "SessionStart", source="startup")
    out, opened = prompted(top, "s1", "hello")
    assert "Say which tests ran" in out
    assert prompted(top, "s1", "hello again") == ("", [])


def test_a_change_another_session_read_first_is_said_at_the_next_prompt(project) -> None:  # type: ignore[no-untyped-def]
    """Session a was given the lock note; it changes; session c reads in full first (so the
    digest is of the changed index): a's next prompt, naming nothing, says the change."""
    top = project["top"]
    for session in ("a", "c"):
        assert claude(top, "SessionStart", session=session, source="startup")
    assert f"[#{project['lock']}]" in prompted(top, "a", "look at src/lock.py")[0]
    assert run_qem("supersede", str(project["lock"]), "Release the lock, then restart", cwd=top).returncode == 0
    assert prompted(top, "c", "hello")[1] == ["_sqlite3", "qem_edit.storage.store"]
    assert prompted(top, "c", "hello")[1] == []  # (the digest is of the changed index)
    out, _ = prompted(top, "a", "hello")
    assert "Changed since given earlier" in out and "Release the lock, then restart" in out

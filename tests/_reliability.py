"""Helpers shared by the reliability tests (test_crash, test_stress, test_hostile,
test_security): killing children, reading memories, and recording the figures that
docs/RELIABILITY.md quotes.

A memory is a log of files under `<workspace>/.qem` with a local SQLite index beside it
(qem_edit.storage.store).  `verify` is what `qem verify` checks (the log, the index against a fresh
replay of the log, the supersession graph), disputes included: in one clone, writers take
turns, so any fork or concurrent change is a defect here.  `rendering_prefix` finds which
state of the log a mirror renders: MEMORY.md no longer names a base, so a mirror is "never
torn" when it is, byte for byte, the rendering of some prefix of the log in clock order.

Figures: when QEM_RELIABILITY_REPORT names a file, each test appends one JSON line to it
(`{"test": ..., "figure": ..., "value": ...}`).  The variable is read at import, because
the autouse fixture in conftest.py clears every QEM_* variable before a test runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

REPORT = os.environ.get("QEM_RELIABILITY_REPORT")
SOAK = int(os.environ.get("QEM_SOAK") or 0)
AT = "2026-07-27T10:00:00Z"


def record(test: str, figure: str, value: object) -> None:
    """Append a figure for docs/RELIABILITY.md (only when QEM_RELIABILITY_REPORT is set)."""
    if not REPORT:
        return
    with open(REPORT, "a", encoding="utf-8") as out:
        out.write(json.dumps({"test": test, "figure": figure, "value": value}) + "\n")


def fork_run(fn: Callable[[], None], *, after_n: int | None = None, kill_after: float | None = None,
             env: dict[str, str] | None = None) -> str:
    """Run `fn` in a forked child; return "killed", "done" or "failed".

    `after_n`: the child arms QEM_FAULT_AFTER_N (qem kills itself at that checkpoint).
    `kill_after`: the parent SIGKILLs the child after this many seconds.
    The parent must hold no open SQLite connection when it calls this (SQLite's own rule
    for fork: a connection is never shared with a child).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            from qem_edit.base import faults

            for name, value in (env or {}).items():
                os.environ[name] = value
            if after_n is not None:
                os.environ["QEM_FAULT_AFTER_N"] = str(after_n)
            faults.reset()
            fn()
            code = 0
        except BaseException:  # noqa: BLE001 - report anything, in the child
            traceback.print_exc()
            code = 3
        finally:
            try:
                sys.stderr.flush()
            finally:
                os._exit(code)
    if kill_after is not None:
        time.sleep(kill_after)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return "done"
    return "failed"


def python_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child `python`: this one, with the repository importable."""
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def verify(store, place=None) -> list[str]:  # type: ignore[no-untyped-def]
    """What `qem verify` reports for `store` (and the mirror of `place`, when given):
    its problems and its open disputes."""
    from qem_edit.mirror.verify import verify_report

    report = verify_report(store, place)
    return report.problems + report.disputes


def log_names(root: Path) -> set[str]:
    """Every file of the log under a memory directory (`events/`, `texts/`, `packs/`)."""
    from qem_edit.storage.logtree import LogTree

    return LogTree(root).names()


def prefix_notes(events: list, texts: dict[str, str], count: int) -> dict:  # type: ignore[type-arg]
    """The notes after the first `count` events (in clock order), with the short ids the
    index gives a memory holding exactly those notes."""
    
    from qem_edit.base import ids
    from qem_edit.base.replay import replay

    notes = replay(events[:count], texts)
    shorts = ids.short_ids({n: note.short_len for n, note in notes.items()})
    return {n: note._replace(short=shorts[n]) for n, note in notes.items()}


def rendering_prefix(store, data: bytes, *, editing: bool = False, upto: int | None = None,  # type: ignore[no-untyped-def]
                     since: int = 0) -> int | None:
    """How many events (in clock order) the log held when `data` was rendered: the
    largest count in `since..upto` whose rendering is `data` byte for byte (`editing`:
    a checkout, with its help comment); None when no prefix renders it (a torn file)."""
    from qem_edit.renderer import for_editing, render

    events = store.events()
    texts = store.texts()
    memory = store.memory_id()
    upto = len(events) if upto is None else min(upto, len(events))
    for count in range(upto, since - 1, -1):
        text = render(prefix_notes(events, texts, count).values(), memory)
        if (for_editing(text) if editing else text).encode("utf-8") == data:
            return count
    return None


def no_traceback(*outputs: str) -> None:
    for output in outputs:
        assert "Traceback" not in output, output


# -- the scripted editor of the stress tests ----------------------------------------------------


def random_edit(text: str, seed: int, token: str) -> tuple[str, dict[str, list]]:
    """A person's edit of a rendered file: 1-2 notes changed, maybe one added.

    Returns the edited text and what it asks for, note by note:
    {"12": ["supersede", NEW_TEXT], "7": ["revoke"], "9": ["stale"], "new": [TEXT, ...]}.
    Only live single-line notes are touched, so every edit is valid and the only way to
    refuse it is a conflict.
    """
    import random

    from qem_edit.reconciler.parse import parse
    from qem_edit.renderer.format import ITEM_RE

    rng = random.Random(seed)
    lines = text.split("\n")
    items = [i for i in parse(text).items
             if i.note_id is not None and i.state in ("active", "stale") and len(i.raw) == 1]
    wanted: dict[str, list] = {}
    for item in rng.sample(items, k=min(len(items), rng.choice((1, 1, 2)))):
        index = item.line - 1
        line = lines[index]
        move = rng.choice(("text", "delete", "stale") if item.state == "active" else ("text", "delete"))
        if move == "text":
            lines[index] = f"{line} ({token})"
            wanted[str(item.note_id)] = ["supersede", f"{item.text} ({token})"]
        elif move == "delete":
            lines[index] = None  # type: ignore[call-overload]
            wanted[str(item.note_id)] = ["revoke"]
        else:
            at = ITEM_RE.match(line).start("rest")  # type: ignore[union-attr]
            lines[index] = f"{line[:at]}STALE ({token}) · {line[at:]}"
            wanted[str(item.note_id)] = ["stale"]
    if rng.random() < 0.5:
        lines.insert(lines.index("## Findings") + 1, f"- new note {token}")
        wanted["new"] = [f"new note {token}"]
    return "\n".join(line for line in lines if line is not None), wanted


EDITOR_SCRIPT = r'''
import json, os, sys
sys.path[:0] = [os.environ["QEM_TEST_TESTS"], os.environ["QEM_TEST_REPO"]]
from _reliability import random_edit
path = sys.argv[-1]
with open(path, encoding="utf-8", newline="") as handle:
    text = handle.read()
edited, wanted = random_edit(text, int(os.environ["QEM_TEST_SEED"]), os.environ["QEM_TEST_TOKEN"])
with open(path, "w", encoding="utf-8", newline="") as handle:
    handle.write(edited)
with open(os.environ["QEM_TEST_RECORD"], "w") as out:
    json.dump({"text": text, "edited": edited, "wanted": wanted}, out)
'''


def fast_dir(fallback: Path) -> Path:
    """A scratch directory on tmpfs when there is one (a fuzzer makes hundreds of stores,
    and each commit's fsync on a real disk costs ~50 ms); else `fallback`."""
    import tempfile

    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="qem-fuzz-", dir=shm))
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback

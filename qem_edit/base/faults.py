"""Crash points, for the crash-consistency tests (tests/test_crash.py).

qem calls `checkpoint(name)` at the moments that matter for crash safety: inside the write
transaction (after BEGIN, after each appended event, before and after COMMIT), while a file
is replaced atomically, and around a check-in.  Normally it does nothing.  Two variables
turn a checkpoint into a SIGKILL of the whole process, the harshest crash there is:

- `QEM_FAULT=NAME` kills at the first checkpoint called NAME;
- `QEM_FAULT_AFTER_N=N` kills at the N-th checkpoint of the process, whatever its name,
  so a test can walk a command through every crash point in turn.
"""

from __future__ import annotations

import os

_passed = 0
# Read once: a checkpoint sits in hot loops (one per appended event).
_point: str | None = None
_after: int | None = None


def _arm() -> None:
    global _point, _after
    _point = os.environ.get("QEM_FAULT") or None
    after = os.environ.get("QEM_FAULT_AFTER_N")
    _after = int(after) if after else None


def checkpoint(name: str) -> None:
    if _point is None and _after is None:
        return
    if _point == name:
        _die()
    if _after is not None:
        global _passed
        _passed += 1
        if _passed >= _after:
            _die()


def passed() -> int:
    """Checkpoints passed so far while QEM_FAULT_AFTER_N was set (tests count them)."""
    return _passed


def reset() -> None:
    """Start counting again, with the variables as they are now."""
    global _passed
    _passed = 0
    _arm()


_arm()


def _die() -> None:
    import signal

    os.kill(os.getpid(), signal.SIGKILL)

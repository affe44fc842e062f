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
import signal

_passed = 0


def checkpoint(name: str) -> None:
    environ = os.environ
    if environ.get("QEM_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    after = environ.get("QEM_FAULT_AFTER_N")
    if after:
        global _passed
        _passed += 1
        if _passed >= int(after):
            os.kill(os.getpid(), signal.SIGKILL)


def passed() -> int:
    """Checkpoints passed so far while QEM_FAULT_AFTER_N was set (tests count them)."""
    return _passed


def reset() -> None:
    global _passed
    _passed = 0

"""What qem prints for a person, with memory's control characters made visible.

A text, a reason, an actor name or a file name comes from the log, and the log comes from
other clones: printed raw, an escape sequence in it would tell the reader's terminal to
hide a line, rewrite the screen or set the clipboard (OSC 52).  Every line qem prints for
a person passes through `visible`: each C0 control but newline and tab, DEL, and each C1
control is shown as a Python-style escape (ESC as `\\x1b`, CR as `\\x0d`, CSI as `\\x9b`).
A backslash is left as it is, so `\\x1b` typed into a text reads the same: what is shown
can look like an escape, never act as one.  JSON keeps its own escapes (`answers.as_json`).
"""

from __future__ import annotations

import re
import sys

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with its control characters (newline and tab aside) written out."""
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match[0]):02x}"


def say(message: str) -> None:
    """A message to the person, on stderr: `qem: ...`."""
    print(f"qem: {visible(message)}", file=sys.stderr, flush=True)


def show(text: str, file=None) -> None:  # type: ignore[no-untyped-def]
    """An answer for the person (stdout unless told), control characters visible."""
    print(visible(text), file=file or sys.stdout)

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

import sys

from .patterns import Lazy

TYPE_CHECKING = False  # typing's flag, without importing typing
if TYPE_CHECKING:
    import re

_CONTROL = Lazy("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with its control characters (newline and tab aside) written out.  A text
    with none (every character printable but newlines and tabs: each control is not) is
    returned as it is, no pattern compiled: the `re` module and the enum it loads are a
    tenth of a commit hook's start-up."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match[0]):02x}"


def say(message: str) -> None:
    """A message to the person, on stderr: `qem: ...` (on a line of its own, a progress
    line cleared first)."""
    _clear()
    print(f"qem: {visible(message)}", file=sys.stderr, flush=True)


def show(text: str, file=None) -> None:  # type: ignore[no-untyped-def]
    """An answer for the person (stdout unless told), control characters visible."""
    print(visible(text), file=file or sys.stdout)


def tolerant_streams() -> None:
    """stdout and stderr made to escape what their encoding cannot hold (`\\xe9` where
    PYTHONIOENCODING=ascii or a locale's code page has no é), never to end a command in a
    traceback; a stream that holds all of Unicode prints as it did."""
    for stream in (sys.stdout, sys.stderr):
        if not holds_unicode(stream):
            try:
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
            except (AttributeError, ValueError):  # not a text stream of io's (a test's capture)
                pass


def holds_unicode(stream) -> bool:  # type: ignore[no-untyped-def]
    """Whether `stream`'s encoding can write every character (UTF-8, UTF-16, GB18030)."""
    try:
        "\U0010fffd\u00e9".encode(getattr(stream, "encoding", None) or "utf-8")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


# -- progress of long work -------------------------------------------------------------------------

_live: list[int] = []  # the width of the progress line on the terminal now, if one is


class Progress:
    """How far a long piece of work is (a fresh clone's first index, a verify's replay, a
    big load): one stderr line rewritten in place, at most ten times a second, and cleared
    at the end.  Only at a terminal: a script, a hook or a pipe sees nothing new."""

    def __init__(self, what: str, total) -> None:  # type: ignore[no-untyped-def]
        self.what, self.total, self.done, self.shown_at = what, total, 0, 0.0

    def __call__(self) -> None:
        import time

        self.done += 1
        now = time.monotonic()
        if now - self.shown_at >= 0.1:
            self.shown_at = now
            if callable(self.total):  # counted only when there is someone to show it to
                self.total = self.total()
            share = f"{min(100, self.done * 100 // max(1, self.total))}% " if self.total else ""
            _write(f"qem: {self.what}: {share}({self.done:,} of {self.total:,})")

    def end(self) -> None:
        _clear()


class _Quiet:
    def __call__(self) -> None:
        pass

    def end(self) -> None:
        pass


def progress(what: str, total) -> "Progress | _Quiet":  # type: ignore[no-untyped-def]
    """A step counter for `what` over `total` steps (a number, or a function that counts
    them, called only at a terminal); call it at each step and `.end()` after the last."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return Progress(what, total) if tty else _Quiet()


def _write(line: str) -> None:
    width = max(len(line), _live[0] if _live else 0)
    sys.stderr.write("\r" + line.ljust(width))
    sys.stderr.flush()
    _live[:] = [width]


def _clear() -> None:
    if _live:
        sys.stderr.write("\r" + " " * _live[0] + "\r")
        sys.stderr.flush()
        _live.clear()

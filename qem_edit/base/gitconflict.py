"""A MEMORY.md that git left with conflict markers: whose lines are in it.

Git writes conflict markers into MEMORY.md when both sides changed neighbouring lines.
Two kinds of conflict look alike and must not be treated alike:

- a merge (rebase, cherry-pick) of two branches that each rendered their own notes: both
  sides are renderings, nobody's edit is in the file, and rendering it again from the
  merged log resolves it;
- a hand-edited MEMORY.md meeting new renderings (`git stash pop` or `git pull --autostash`
  after a pull brought events): one side holds a person's edits, which a fresh rendering
  would silently throw away.

A line is a rendering's when some rendering the caller knows of holds it (the log's now,
the last export, the file as HEAD and the other side of the merge in progress commit it).
A side that holds a line no rendering holds is a person's.  Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OURS, BASE, THEIRS, END = "<<<<<<<", "|||||||", "=======", ">>>>>>>"
# the same markers, found in a whole file's bytes at once (a pre-commit hook reads 10 MB)
MARKER_LINE = re.compile(rb"^(?:(?:<<<<<<<|\|{7}|>>>>>>>)(?: [^\n]*)?|=======)\r?$", re.M)


@dataclass(frozen=True)
class Hunk:
    line: int  # the line number of its `<<<<<<<` marker (1-based)
    ours: tuple[str, ...]
    theirs: tuple[str, ...]


class Unbalanced(ValueError):
    """Conflict markers that do not pair up (the file was edited around them)."""


# where a marker may start a line: one pass over the file, each hit then matched (a pass
# per marker, by `find`, took four times as long over a 116 MB file)
_MARKER_START = re.compile(rb"\n[<|=>]{7}")


def has_markers(data: str | bytes) -> bool:
    """Whether git left conflict markers at column 0 (no rendered line can start with
    them: a note's further lines are indented)."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    if MARKER_LINE.match(raw):
        return True
    return any(MARKER_LINE.match(raw, hit.start() + 1) for hit in _MARKER_START.finditer(raw))


def _marker(line: str) -> str | None:
    """Which conflict marker `line` is (None: a line of the file)."""
    line = line.rstrip("\r")
    if line == THEIRS:
        return THEIRS
    head = line[:7]
    if head in (OURS, BASE, END) and (len(line) == 7 or line[7] == " "):
        return head
    return None


def split(text: str) -> tuple[list[str | Hunk], list[Hunk]]:
    """The file as plain lines and hunks, in order, and the hunks alone.  Unbalanced
    markers raise, naming the line."""
    parts: list[str | Hunk] = []
    hunks: list[Hunk] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if _marker(lines[i]) is None:
            parts.append(lines[i])
            i += 1
            continue
        hunk, i = _hunk(lines, i)
        parts.append(hunk)
        hunks.append(hunk)
    return parts, hunks


def _hunk(lines: list[str], start: int) -> tuple[Hunk, int]:
    if _marker(lines[start]) != OURS:
        raise Unbalanced(f"line {start + 1}: a conflict marker outside a conflict")
    sides: dict[str, list[str]] = {"ours": [], "base": [], "theirs": []}
    side = "ours"
    for i in range(start + 1, len(lines)):
        mark = _marker(lines[i])
        if mark is None:
            sides[side].append(lines[i])
        elif mark == BASE and side == "ours":
            side = "base"
        elif mark == THEIRS and side in ("ours", "base"):
            side = "theirs"
        elif mark == END and side == "theirs":
            return Hunk(start + 1, tuple(sides["ours"]), tuple(sides["theirs"])), i + 1
        else:
            raise Unbalanced(f"line {i + 1}: a conflict marker out of place")
    raise Unbalanced(f"line {start + 1}: a conflict that never ends")


def _personal(side: tuple[str, ...], known: frozenset[str]) -> bool:
    return any(line.strip() and line.rstrip("\r") not in known for line in side)


def personal_hunks(text: str, known: frozenset[str]) -> list[int]:
    """The line numbers of the conflicts where a side holds a line no known rendering
    holds (a person's edit).  Raises Unbalanced where the markers do not pair up."""
    _, hunks = split(text)
    return [h.line for h in hunks if _personal(h.ours, known) or _personal(h.theirs, known)]


class BothSides(ValueError):
    """A conflict whose two sides both hold lines no rendering holds."""

    def __init__(self, lines: list[int]) -> None:
        super().__init__(", ".join(str(n) for n in lines))
        self.lines = lines


def resolved(text: str, known: frozenset[str]) -> str:
    """The file as the person meant it: in each conflict, the side holding their edits
    (lines no rendering holds); where neither side does, the first (ours, the checked-out
    rendering).  Raises BothSides where both sides hold such lines, Unbalanced where the
    markers do not pair up."""
    parts, _ = split(text)
    out: list[str] = []
    clashing: list[int] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        ours, theirs = _personal(part.ours, known), _personal(part.theirs, known)
        if ours and theirs:
            clashing.append(part.line)
        out.extend(part.theirs if theirs and not ours else part.ours)
    if clashing:
        raise BothSides(clashing)
    return "\n".join(out)

"""A rendering brought up to date by its changed items, without rendering it whole.

After a write, only the items of the notes it touched (and of the notes whose short ids
moved with them) differ between the mirror as it was rendered and the rendering now.  So
the mirror is patched: each old item is cut out where it stands, each new one is put in
its place in id order (short ids sort as their ids do: none is a prefix of another), and
the result is byte-identical to rendering the whole file, for a cost that follows the
write, not the memory.  The layout is `_layout`'s (render.py); anything in the base that
does not fit it returns None, and the caller renders the whole file.  Pure.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence

from ..base.records import Record
from ..base.vocabulary import KINDS
from .format import SECTION_TITLES, Selection
from .render import header_line

ITEM_START = b"- [#"


class ItemChange(Record):
    """One note's item before and after a write (None: it had none, or has none now)."""

    old_kind: str | None
    old: bytes | None
    new_kind: str | None
    new: bytes | None


def patched(base: bytes, memory: str, selection: Selection, changes: Sequence[ItemChange]) -> bytes | None:
    """`base` (the whole rendering before the changes) with `changes` applied; None when
    `base` is not laid out as a rendering of `memory` or an old item is not in it."""
    sections = _sections(base, memory, selection)
    if sections is None:
        return None
    for change in changes:
        if change.old is not None:
            cut = _cut(sections.get(change.old_kind or ""), change.old)
            if cut is None:
                return None
            sections[change.old_kind or ""] = cut
    for change in changes:
        if change.new is not None and change.new_kind in sections:
            sections[change.new_kind] = _insert(sections[change.new_kind], change.new)
    return _joined(memory, selection, sections)


def _kinds(selection: Selection) -> list[str]:
    return [kind for kind in KINDS if selection.holds_kind(kind)]


def _sections(base: bytes, memory: str, selection: Selection) -> dict[str, bytes] | None:
    """Each section's items, as one run of bytes; None if `base` is laid out otherwise."""
    head = (header_line(memory, selection) + "\n\n").encode("utf-8")
    if not base.startswith(head):
        return None
    kinds = _kinds(selection)
    headings = [f"## {SECTION_TITLES[kind]}\n".encode("utf-8") for kind in kinds]
    out: dict[str, bytes] = {}
    at = len(head)
    for i, kind in enumerate(kinds):
        if not base.startswith(headings[i], at):
            return None
        start = at + len(headings[i])
        last = i == len(kinds) - 1
        end = len(base) if last else base.find(b"\n" + headings[i + 1], start - 1)
        if end < 0:
            return None
        end = end if last else end + 1  # the next heading starts after the newline
        body = base[start:end]
        items = _items_of(body, last)
        if items is None:
            return None
        out[kind] = items
        at = end
    return out if at == len(base) else None


def _items_of(body: bytes, last: bool) -> bytes | None:
    """A section's body is `\\n` + items + (`\\n` unless last), or, with no items, `\\n` (or
    nothing, last)."""
    if body == (b"" if last else b"\n"):
        return b""
    if not body.startswith(b"\n" + ITEM_START):
        return None
    items = body[1:] if last else body[1:-1]
    if not last and not body.endswith(b"\n\n"):
        return None
    return items


def _joined(memory: str, selection: Selection, sections: dict[str, bytes]) -> bytes:
    kinds = _kinds(selection)
    out = [(header_line(memory, selection) + "\n\n").encode("utf-8")]
    for i, kind in enumerate(kinds):
        out.append(f"## {SECTION_TITLES[kind]}\n".encode("utf-8"))
        if sections[kind]:
            out += [b"\n", sections[kind]]
        if i < len(kinds) - 1:
            out.append(b"\n")
    return b"".join(out)


def _cut(items: bytes | None, old: bytes) -> bytes | None:
    """`items` without the item `old` (found at an item's start; None: not there)."""
    if items is None:
        return None
    at = items.find(old)
    while at >= 0 and not _at_item(items, at, old):
        at = items.find(old, at + 1)
    if at < 0:
        return None
    return items[:at] + items[at + len(old):]


def _at_item(items: bytes, at: int, old: bytes) -> bool:
    starts = at == 0 or items[at - 1:at] == b"\n"
    end = at + len(old)
    return starts and (end == len(items) or items.startswith(ITEM_START, end))


def _insert(items: bytes, new: bytes) -> bytes:
    """`items` with `new` put before the first item whose short id sorts after its own."""
    key = _short(new, 0)
    lo, hi = 0, len(items)
    while lo < hi:  # every item starting before lo sorts before `new`; none from hi on does
        mid = (lo + hi) // 2
        at = _next_item(items, mid)
        if at >= hi:
            hi = mid
        elif _short(items, at) < key:
            lo = at + 1
        else:
            hi = mid
    at = _next_item(items, lo)
    return items[:at] + new + items[at:]


def _next_item(items: bytes, pos: int) -> int:
    """Where the first item starting at or after `pos` starts (the end: none does)."""
    if pos == 0 and items.startswith(ITEM_START):
        return 0
    found = items.find(b"\n" + ITEM_START, max(pos - 1, 0))
    return len(items) if found < 0 else found + 1


def _short(items: bytes, at: int) -> bytes:
    return items[at + len(ITEM_START):items.index(b"]", at)]


# -- the same, over a rendering read in place ----------------------------------------------------
#
# A rendering of 100 MB need not be read to be patched: its sections are where its headings
# start ("\n## ", known to whoever wrote it), a section's items are in id order, and short
# ids sort as their ids do, so an item is found by bisection, reading a few small windows.
# The patched rendering is then a list of pieces: stretches of the base (copied as they
# are) and new items.

Reader = Callable[[int, int], bytes]  # (offset, size) → the bytes there (fewer at the end)
Piece = tuple[int, int] | bytes  # a stretch of the base [start, end), or new bytes
WINDOW = 1 << 12


def next_item(read: Reader, at: int, end: int) -> int | None:
    """Where the first "\\n- [#" at or after `at` starts (before `end`): the newline
    before an item."""
    while at < end:
        window = read(at, min(WINDOW, end - at) + 4)
        found = window.find(b"\n" + ITEM_START)
        if 0 <= found and at + found < end:
            return at + found
        if len(window) <= 4:
            return None
        at += len(window) - 4
    return None


def short_at(read: Reader, at: int) -> bytes:
    """The short id of the item whose newline is at `at`."""
    line = read(at + 1 + len(ITEM_START), 64)
    close = line.find(b"]")
    return line[:close] if close > 0 else line


def item_of(read: Reader, lo: int, hi: int, note_id: bytes) -> int | None:
    """Where (its newline) the item of `note_id` is between `lo` and `hi`, under whatever
    short id it shows; None: not there."""
    while lo < hi:  # every item starting before lo sorts before the note; none from hi on is it
        mid = (lo + hi) // 2
        at = next_item(read, mid, hi)
        if at is None:
            hi = mid
            continue
        short = short_at(read, at)
        if short == note_id[:len(short)]:
            return at
        if short < note_id[:len(short)]:
            lo = at + 1
        else:
            hi = mid
    return None


_BISECTION_READS = 16  # about the windows one bisection reads in a large section
Located = list[tuple[int, int, bytes, int]]  # (where, 0 insert / 1 cut, key or b"", cut end)


def _events(read: Reader, lo: int, hi: int, change: SectionChange) -> Located:
    """Where each item of `change` goes or comes, each found by bisection in the base."""
    events: Located = []
    for note_id in change.gone:
        at = item_of(read, lo, hi, note_id.encode("ascii", "replace"))
        if at is not None:
            after = next_item(read, at + 1, hi)
            events.append((at + 1, 1, b"", after + 1 if after is not None else hi))
    for item in change.new:
        key = _short(item, 0)
        events.append((_place_of(read, lo, hi, key), 0, key, 0))
    return events


def _held_events(read: Reader, lo: int, hi: int, change: SectionChange) -> Located:
    """`_events`, the section read once and its items' short ids listed (the same answers:
    short ids sort as their ids do, so each is found by bisection of the list)."""
    held = read(lo, hi - lo)
    starts, shorts = [], []
    at = held.find(b"\n" + ITEM_START)
    while at >= 0:
        starts.append(lo + at)
        shorts.append(held[at + 1 + len(ITEM_START):held.index(b"]", at)])
        at = held.find(b"\n" + ITEM_START, at + 1)
    events: Located = []
    for note_id in change.gone:
        whole, a, b = note_id.encode("ascii", "replace"), 0, len(shorts)
        while a < b:  # the item showing a prefix of the id, as item_of finds it
            mid = (a + b) // 2
            if shorts[mid] == whole[:len(shorts[mid])]:
                events.append((starts[mid] + 1, 1, b"", starts[mid + 1] + 1 if mid + 1 < len(starts) else hi))
                break
            a, b = (mid + 1, b) if shorts[mid] < whole[:len(shorts[mid])] else (a, mid)
    for item in change.new:
        key = _short(item, 0)
        place = bisect.bisect_left(shorts, key)
        events.append((starts[place] + 1 if place < len(starts) else hi, 0, key, 0))
    return events


def _place_of(read: Reader, lo: int, hi: int, key: bytes) -> int:
    """Where the first item whose short id does not sort before `key` starts, between
    `lo` (the newline before the first item) and `hi` (the end of the items: none does)."""
    a, b = lo, hi
    while a < b:  # no item whose newline is before a is the one; none from b on is the first
        mid = (a + b) // 2
        at = next_item(read, mid, b)
        if at is None:
            b = mid
        elif short_at(read, at) < key:
            a = at + 1
        else:
            b = mid
    found = next_item(read, a, hi)
    return found + 1 if found is not None else hi


class Headings:
    """Where the section headings ("\\n## ") of a rendering start, found as its bytes pass
    (`feed` each chunk in order; a heading may straddle two chunks)."""

    def __init__(self) -> None:
        self.at: list[int] = []
        self._offset, self._tail = 0, b""

    def feed(self, chunk: bytes) -> bytes:
        straddling = self._tail + chunk[:3]  # a heading begun in the chunk before
        found = straddling.find(b"\n## ")
        if 0 <= found < len(self._tail):
            self.at.append(self._offset - len(self._tail) + found)
        found = chunk.find(b"\n## ")
        while found >= 0:
            self.at.append(self._offset + found)
            found = chunk.find(b"\n## ", found + 4)
        return self.passed(chunk)

    def passed(self, chunk: bytes) -> bytes:
        """A chunk whose headings are known elsewhere (`heads_after`), passed unsearched."""
        self._tail = (self._tail + chunk)[-3:] if len(chunk) < 3 else chunk[-3:]
        self._offset += len(chunk)
        return chunk


def heads_after(pieces: Sequence[Piece], heads: Sequence[int]) -> list[int]:
    """Where the section headings start in the rendering `pieces` make (`patch_plan`'s,
    over a base whose headings start at `heads`): each heading is a piece of its own,
    copied from the base, so nothing needs to search the result for them."""
    starts, found, at = {h + 1 for h in heads}, [], 0
    for piece in pieces:
        if not isinstance(piece, bytes) and piece[0] in starts:
            found.append(at - 1)
        at += len(piece) if isinstance(piece, bytes) else piece[1] - piece[0]
    return found


def headings_in(chunks: Iterable[bytes]) -> list[int]:
    """Where each section heading of the rendering `chunks` make starts."""
    found = Headings()
    for chunk in chunks:
        found.feed(chunk)
    return found.at


class SectionChange(Record):
    """What changes in one section: the notes whose items go (full ids), the items that
    come (each ending in a newline)."""

    gone: Sequence[str]
    new: Sequence[bytes]


def patch_plan(read: Reader, end: int, heads: Sequence[int], memory: str, selection: Selection,
               changes: dict[str, SectionChange]) -> list[Piece] | None:
    """The pieces of the rendering `read` holds up to `end` (with its section headings at
    `heads`) once `changes` (by kind) are made, byte-identical to rendering it whole; None
    when the base is not laid out as a rendering of `memory` within `selection`."""
    kinds = _kinds(selection)
    head = (header_line(memory, selection) + "\n\n").encode("utf-8")
    if len(heads) != len(kinds) or not heads or heads[0] + 1 != len(head) or read(0, len(head)) != head:
        return None
    pieces: list[Piece] = [(0, len(head))]
    for i, kind in enumerate(kinds):
        heading = f"## {SECTION_TITLES[kind]}\n".encode("utf-8")
        if read(heads[i] + 1, len(heading)) != heading:
            return None
        last = i == len(kinds) - 1
        start, stop = heads[i] + 1 + len(heading), end if last else heads[i + 1] + 1
        body = _section_pieces(read, start, stop, last, changes.get(kind, SectionChange((), ())))
        if body is None:
            return None
        pieces.append((heads[i] + 1, start))
        pieces += body
    return pieces


def _section_pieces(read: Reader, start: int, stop: int, last: bool, change: SectionChange) -> list[Piece] | None:
    """A section's body, `\\n` + items + (`\\n` unless last), or with no items `\\n` (or
    nothing, last), as pieces once `change` is made."""
    empty = b"" if last else b"\n"
    if stop - start <= len(empty):
        if read(start, stop - start) != empty:
            return None
        items: list[Piece] = [b"".join(sorted(change.new, key=lambda item: _short(item, 0)))] if change.new else []
    else:
        if read(start, len(ITEM_START) + 1) != b"\n" + ITEM_START or read(stop - 2, 2)[-1:] != b"\n" or (
                not last and read(stop - 2, 2) != b"\n\n"):
            return None
        items = _items_pieces(read, start, stop if last else stop - 1, change)
    if not any(p if isinstance(p, bytes) else p[1] > p[0] for p in items):
        return [empty] if empty else []
    return [b"\n", *items, *([b"\n"] if not last else [])]


def _items_pieces(read: Reader, lo: int, hi: int, change: SectionChange) -> list[Piece]:
    """The items between `lo` (the newline before the first) and `hi` (the newline after
    the last, or the end) once `change` is made, as pieces (without the first newline)."""
    if (len(change.gone) + len(change.new)) * _BISECTION_READS * WINDOW >= hi - lo:
        events = _held_events(read, lo, hi, change)  # bisections would read more than the section holds
    else:
        events = _events(read, lo, hi, change)
    new_by_key = {_short(item, 0): item for item in change.new}
    pieces: list[Piece] = []
    cursor = lo + 1
    for where, kind, key, cut_end in sorted(events):
        if where > cursor:
            pieces.append((cursor, where))
            cursor = where
        if kind == 0:
            pieces.append(new_by_key[key])
        else:
            cursor = max(cursor, cut_end)
    if hi > cursor:
        pieces.append((cursor, hi))
    return pieces

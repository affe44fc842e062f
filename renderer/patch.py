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

from typing import NamedTuple, Sequence

from ..model import KINDS

from .format import SECTION_TITLES, Selection
from .render import header_line

ITEM_START = b"- [#"


class ItemChange(NamedTuple):
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

"""Find what an edit changed by comparing blocks, so a check-in parses only that.

A block is a column-0 line with the indented lines under it: one note's item, a section
heading, or a stray line.  Every block of the edited file that also stands, in the same
section, in the base rendering is unchanged and need not be parsed; the parser sees only
the changed blocks (under their headings, with their real line numbers), and the base
blocks that are gone name the notes that were deleted.  Splitting, hashing and comparing
run in C over the raw UTF-8 bytes; Python decodes and parses only the changed blocks.
The result is the plan a full parse gives (tests hold the two to that), at a cost and a
memory that follow the edit, not the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..renderer.format import ERRORS_OPEN, HEADER_RE

from .parse import Item, LineError, ParsedFile, clean_lines, parse

_ITEM_ID = re.compile(rb"\[#([0-9a-z]+)\]")
_ERRORS_OPEN = ERRORS_OPEN.encode()


@dataclass
class EditDiff:
    """The changed part of an edit, parsed, and the notes whose items are gone."""

    parsed: ParsedFile  # items and errors of the changed blocks only, real line numbers
    removed: set[str]  # notes (as the base shows them) whose base item is no longer in the file as it was


def _clean(data: bytes) -> bytes | None:
    """`data` without editor noise (None if it is not UTF-8); the common, clean case
    costs a few scans in C and no decoding."""
    noisy = (
        data.startswith(b"\xef\xbb\xbf") or b"\r" in data or b" \n" in data
        or b"\t\n" in data or data.endswith((b" ", b"\t"))
    )
    if not noisy:
        return data
    try:
        return ("\n".join(clean_lines(data.decode("utf-8"))) + "\n").encode("utf-8")
    except UnicodeDecodeError:
        return None


def _body(data: bytes) -> tuple[list[bytes], int] | None:
    """The header lines (with qem's error comment) and the offset where the body starts;
    None when the header is not where it must be (the full parser then says why)."""
    head: list[bytes] = []
    pos = 0
    in_comment = False
    while pos <= len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[pos:end]
        if not head:
            if not HEADER_RE.match(line.decode("utf-8", "replace")):
                return None
        elif in_comment:
            in_comment = line != b"-->"
        elif line.startswith(_ERRORS_OPEN):
            in_comment = True
        elif line:
            return head, pos
        head.append(line)
        pos = end + 1
    return (head, len(data)) if head and not in_comment else None


Section = tuple[list[bytes], set[bytes]]


def _sections(body: bytes) -> dict[bytes, Section] | None:
    """Heading → the blocks under it, as a list and a set (key b"" for what comes before
    any heading); None when a heading or a block repeats (the full parse names it).

    Splitting on "\\n## " and "\\n- " finds every heading and note item, because no text
    line starts at column 0.  A stray column-0 line stays inside its neighbour's block,
    which then differs from the base and is parsed (and refused) with it.  Blocks are
    kept without their leading "- ", the same on both sides.
    """
    out: dict[bytes, Section] = {}
    for number, chunk in enumerate((b"\n" + body).split(b"\n## ")):
        pieces = chunk.split(b"\n- ")
        if number == 0:
            if pieces == [b""]:
                continue  # the body starts with a heading, as rendered
            heading, pieces[0] = b"", pieces[0][1:]  # what comes before any heading
        else:
            heading = pieces.pop(0)
        blocks = set(pieces)
        if heading in out or len(blocks) != len(pieces):
            return None
        out[heading] = (pieces, blocks)
    return out


def diff_edit(base_data: bytes, edited_data: bytes) -> EditDiff | None:
    """The changed blocks of `edited_data` against `base_data` (both UTF-8), parsed;
    None when the shortcut does not apply and a full parse must decide."""
    # The base is qem's own rendering: clean by construction (and were it not, its blocks
    # would only differ more, and be parsed: slower, never wrong).
    edited_data = _clean(edited_data)  # type: ignore[assignment]
    if edited_data is None:
        return None
    edited_split, base_split = _body(edited_data), _body(base_data)
    if edited_split is None or base_split is None:
        return None
    header, offset = edited_split
    if not all(line.isascii() or _utf8(line) for line in header):
        return None  # the full parse names the line that is not UTF-8
    edited = _sections(edited_data[offset:])
    base = _sections(base_data[base_split[1]:])
    if edited is None or base is None or _titles(base) - _titles(edited):
        return None  # a section heading is gone: the full parse says which, and where
    parsed = _parse_blocks(edited_data, offset, header, _changed_blocks(edited, base))
    return EditDiff(parsed, _removed_notes(base, edited))


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _titles(sections: dict[bytes, Section]) -> set[bytes]:
    """The section headings' titles (a heading's key also holds the blank lines after it)."""
    return {heading.split(b"\n", 1)[0].strip().lower() for heading in sections}


def _changed_blocks(edited: dict[bytes, Section], base: dict[bytes, Section]) -> list[bytes]:
    """The edited file's blocks that do not stand in the base's same section, each under
    its heading, in file order."""
    shown: list[bytes] = []
    for heading, (blocks, _) in edited.items():
        before = base[heading][1] if heading in base else set()
        changed = [b for b in blocks if b not in before]
        if heading:
            shown += [b"## " + heading] if changed or heading not in base else []
            shown += [b"- " + b for b in changed]
        else:  # before any heading: stray lines first (as they are), then items
            shown += [blocks[0]] if blocks[0] else []
            shown += [b"- " + b for b in blocks[1:]]
    return shown


def _removed_notes(base: dict[bytes, Section], edited: dict[bytes, Section]) -> set[str]:
    """The notes whose base item no longer stands, as it was, in its section."""
    removed: set[str] = set()
    for heading, (blocks, _) in base.items():
        after = edited[heading][1] if heading in edited else set()
        for block in blocks:
            if block not in after:
                match = _ITEM_ID.match(block)
                if match:
                    removed.add(match.group(1).decode("ascii"))
    return removed


def _parse_blocks(data: bytes, offset: int, header: list[bytes], shown: list[bytes]) -> ParsedFile:
    """Parse the header and the `shown` blocks alone, with the line numbers they have in
    `data` (a block that is not UTF-8 is an error naming its line, and left out)."""
    mini = [line.decode("utf-8") for line in header]
    numbers = list(range(1, len(header) + 1))
    errors: list[LineError] = []
    cursor = [0, 1]  # `shown` is in file order: each search starts where the last one ended
    for block in shown:
        first = _line_of(data, offset, block, cursor)
        try:
            lines = block.decode("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            errors.append(LineError(first + block[: exc.start].count(b"\n"), "not UTF-8 text; save the file as UTF-8"))
            continue
        mini.extend(lines)
        numbers.extend(range(first, first + len(lines)))
    parsed = parse("\n".join(mini), whole=False)
    for item in parsed.items:
        item.line = numbers[item.line - 1]
    parsed.errors = errors + [
        LineError(numbers[e.line - 1] if e.line else 0, e.message) for e in parsed.errors
    ]
    return parsed


def _line_of(data: bytes, offset: int, block: bytes, cursor: list[int]) -> int:
    """The 1-based line where `block` (a whole heading or block of the body) starts: an
    occurrence of it that ends where a block ends (the split's separators, or the end).

    `cursor` ([position, its line number]) is where the previous block was found; blocks
    are looked up in file order, so the file is searched and its lines counted once in
    all, not once per block (which made a large edit quadratic: minutes for a few MB).
    """
    needle = b"\n" + block
    start = data.find(needle, max(offset - 1, cursor[0]))
    while start >= 0:
        after = start + len(needle)
        if after == len(data) or data.startswith((b"\n- ", b"\n## "), after):
            cursor[1] += data.count(b"\n", cursor[0], start + 1)
            cursor[0] = start + 1
            return cursor[1]
        start = data.find(needle, start + 1)
    return 0


def base_items(base_data: bytes, shorts: set[str] | None) -> dict[str, Item]:
    """The base rendering's items of these notes (every note: `shorts` None), by the short
    id it shows them with, parsed alone, each under its section: what the check-in
    compares an edit with."""
    split = _body(base_data)
    sections = _sections(base_data[split[1]:]) if split is not None else None
    if split is None or sections is None or shorts is None:
        parsed = parse(base_data.decode("utf-8", "replace"))
        return {i.note_id: i for i in parsed.items if i.note_id is not None and (shorts is None or i.note_id in shorts)}
    mini: list[bytes] = list(split[0])
    for heading, (blocks, _) in sections.items():
        wanted = [b for b in blocks if (m := _ITEM_ID.match(b)) and m.group(1).decode("ascii") in shorts]
        if wanted:
            mini += [b"## " + heading.split(b"\n", 1)[0]] + [b"- " + b for b in wanted]
    parsed = parse(b"\n".join(mini).decode("utf-8", "replace"), whole=False)
    return {i.note_id: i for i in parsed.items if i.note_id is not None}

"""Find what an edit changed by comparing blocks, so a check-in parses only that.

A block is a column-0 line with the indented lines under it: one note's item, a section
heading, or a stray line.  Every block of the edited file that also stands, in the same
section, in the base rendering is unchanged and need not be parsed; the parser sees only
the changed blocks (under their headings, with their real line numbers), and the base
blocks that are gone name the notes that were deleted.  Splitting, hashing and comparing
run in C over the raw UTF-8 bytes; Python decodes and parses only the changed blocks.
The result is the plan a full parse gives (tests hold the two to that), at a cost and a
memory that follow the edit, not the file.

The base need not be held at all: it is read a chunk at a time, cut into pieces of whole
blocks, each compared with the edit's bytes at the same place (one comparison in C while
they agree); only the pieces that differ are split into blocks, matched by section against
the blocks of the other side not matched yet (a block moved in its section, or the shift an
insertion makes, is found there), so the blocks kept are those the edit changed.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..renderer.format import ERRORS_OPEN, HEADER_RE
from ..renderer.patch import WINDOW, Reader, item_of, short_at
from .parse import Item, LineError, ParsedFile, clean_lines, parse

_ITEM_ID = re.compile(rb"\[#([0-9a-z]+)\]")
_ERRORS_OPEN = ERRORS_OPEN.encode()
_SEPARATORS = (b"\n- ", b"\n## ")
CHUNK = 1 << 20  # bytes of the base read at a time
PIECE = 1 << 16  # bytes of a piece that differs compared again: one that still differs is split into blocks
Chunks = Callable[[], Iterable[bytes]]  # the base's bytes, a chunk at a time, afresh on each call
Key = tuple[bytes, bytes]  # a block as matched: its section's heading, and its bytes (without "- ")


@dataclass
class EditDiff:
    """The changed part of an edit, parsed, and the notes whose items are gone."""

    parsed: ParsedFile  # items and errors of the changed blocks only, real line numbers
    removed: set[str]  # notes (as the base shows them) whose base item is no longer in the file as it was
    base_blocks: dict[str, Key] = field(default_factory=dict)  # the base's unmatched items, by short id


def _clean(data: bytes) -> bytes | None:
    """`data` without editor noise (None if it is not UTF-8); the common, clean case
    costs a few scans in C and no decoding."""
    if not _noisy(data):
        return data
    try:
        return ("\n".join(clean_lines(data.decode("utf-8"))) + "\n").encode("utf-8")
    except UnicodeDecodeError:
        return None


def _noisy(data: bytes) -> bool:
    """Whether `data` holds editor noise (a BOM, CR, whitespace at a line's end)."""
    return (
        data.startswith(b"\xef\xbb\xbf") or b"\r" in data or b" \n" in data
        or b"\t\n" in data or data.endswith((b" ", b"\t"))
    )


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


def diff_edit(base_data: bytes | Chunks, edited_data: bytes, *, chunk: int = CHUNK,
              heads: list[int] | None = None) -> EditDiff | None:
    """The changed blocks of `edited_data` against the base (both UTF-8), parsed; None
    when the shortcut does not apply and a full parse must decide.  The base is bytes, or
    a function that yields its bytes a chunk at a time (a file, never held whole).
    `heads`: where the base's section headings start (each "\\n## ", in order), when
    known (a checkout records them): the stretches both sides hold alike are then not
    searched for headings."""
    source = _source(base_data, chunk)
    edited_split, base_head = _body(edited_data), _head(source())
    if base_head is None:
        return None
    if edited_split is None:  # the full parse says why, unless noise hides the header
        return _diff_whole(source, edited_data) if _noisy(edited_data) else None
    header, offset = edited_split
    if _noisy(edited_data[:offset]) or not base_head[2] or offset >= len(edited_data):
        return _diff_whole(source, edited_data)  # noise in the header, or a side without a body: small
    if not all(line.isascii() or _utf8(line) for line in header):
        return None  # the full parse names the line that is not UTF-8
    walk = _Walk(edited_data, offset - 1, base_head[1] - 1, heads)
    try:
        walk.run(_spans(source(), base_head[1] - 1), min(PIECE, chunk))
        if not walk.settled(source, base_head[1] - 1):
            return None
    except _Noisy:
        return _diff_whole(source, edited_data)  # editor noise where the edit differs: cleaned whole
    except _Declined:
        return None
    return EditDiff(_parse_blocks(header, walk.shown()), walk.removed(), walk.unmatched_base())


class _Noisy(Exception):
    """The edit holds editor noise where it differs from the base."""


class _Declined(Exception):
    """A block or a heading repeats: the full parse names it."""


def _source(base: bytes | Chunks, chunk: int) -> Chunks:
    if callable(base):
        return base
    return lambda: (base[i:i + chunk] for i in range(0, len(base), chunk))


def _head(chunks: Iterable[bytes]) -> tuple[list[bytes], int, bool] | None:
    """The header lines, the offset where the body starts and whether it holds anything,
    read from the first chunks (None: no header where it must be)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        split = _body(buffer)
        if split is not None and split[1] < len(buffer):
            return split[0], split[1], True
        if split is None and b"\n" in buffer and not _in_header_comment(buffer):
            return None
    split = _body(buffer)
    return None if split is None else (split[0], split[1], False)


def _in_header_comment(buffer: bytes) -> bool:
    """Whether a header that does not parse yet may still: its error comment is open."""
    first = buffer.split(b"\n", 1)[0]
    return bool(HEADER_RE.match(first.decode("utf-8", "replace"))) and _ERRORS_OPEN in buffer


Span = tuple[bytes, int, int]  # a piece of the stream: bytes[start:end], not copied out


def _spans(chunks: Iterable[bytes], start: int) -> Iterator[Span]:
    """The stream from `start` on, in pieces of whole blocks, about a chunk each: each
    ends where a "\n- " or "\n## " separator starts (or at the end); a piece inside one
    chunk is not copied out of it."""
    buffer, skip = b"", start
    for chunk in chunks:
        if skip:
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            chunk, skip = chunk[skip:], 0
        cut = _last_cut(chunk, 0)
        first = _next_boundary(chunk, 1, cut) if cut > 0 else -1
        if cut > 0 and buffer:  # the block straddling the chunks' ends, then the rest in place
            yield buffer + chunk[:first], 0, len(buffer) + first
            if first < cut:
                yield chunk, first, cut
            buffer = chunk[cut:]
        elif cut > 0:
            yield chunk, 0, cut
            buffer = chunk[cut:]
        else:  # a chunk without a whole separator: one straddles its ends, or none is in it
            buffer += chunk
            cut = _last_cut(buffer, 1)
            if cut > 0:
                yield buffer, 0, cut
                buffer = buffer[cut:]
    if buffer:
        yield buffer, 0, len(buffer)


def _pieces(chunks: Iterable[bytes], start: int) -> Iterator[bytes]:
    """`_spans`, each copied out as bytes."""
    for data, begin, end in _spans(chunks, start):
        yield data[begin:end] if begin or end < len(data) else data


def _last_cut(data: bytes, start: int) -> int:
    """Where the last separator in data[start:] starts (-1: none)."""
    dash = data.rfind(b"\n- ", start)
    return max(dash, data.rfind(b"\n## ", max(dash, start)))


def _subpieces(piece: bytes, size: int) -> Iterator[bytes]:
    """`piece` (whole blocks) in pieces of whole blocks of about `size` bytes."""
    begin = 0
    while True:
        cut = _last_separator(piece, begin + 1, begin + size)
        if cut < 0:
            break
        yield piece[begin:cut]
        begin = cut
    yield piece[begin:]


def _last_separator(data: bytes, start: int, end: int) -> int:
    """Where the last separator that starts in data[start:end] starts, or where the first
    after `end` starts; -1 when none is complete."""
    dash = data.rfind(b"\n- ", start, end + 2)
    cut = max(dash, data.rfind(b"\n## ", max(dash, start), end + 3))
    if cut >= 0:
        return cut
    after = _next_boundary(data, end)
    return after if after < len(data) else -1


def _boundary(data: bytes, at: int) -> bool:
    return at == len(data) or data.startswith(_SEPARATORS, at)


def _next_boundary(data: bytes, at: int, end: int | None = None) -> int:
    """The first separator at or after `at` (before `end`), else `end`."""
    end = len(data) if end is None else end
    dash = data.find(b"\n- ", at, end)
    heading = data.find(b"\n## ", at, dash if dash >= 0 else end)
    return heading if heading >= 0 else dash if dash >= 0 else end


def _heading_at(data: bytes, at: int) -> bytes:
    """The section key of the heading whose "\n## " starts at `at`: up to the next separator."""
    return data[at + 4:_next_boundary(data, at + 4)]


def _headings(region: bytes) -> list[tuple[bytes, int]]:
    """The headings in `region`: section key, and where its `## ` line starts."""
    out, at = [], region.find(b"\n## ")
    while at >= 0:
        out.append((_heading_at(region, at), at + 1))
        at = region.find(b"\n## ", at + 4)
    return out


Entry = tuple[bytes, bytes, int, bytes]  # section key, block, where it starts, the line's prefix


def _split(region: bytes, key: bytes | None, first: bool) -> tuple[list[Entry], list[tuple[bytes, int]], bytes | None]:
    """The blocks of `region` (which starts at a separator, or is the start of the body:
    `first`) under their section keys, the headings it holds (key, where its line starts;
    -1 for what comes before any heading), and the section it ends in."""
    entries: list[Entry] = []
    heads: list[tuple[bytes, int]] = []
    start = 0
    for number, part in enumerate(region.split(b"\n## ")):
        pieces = part.split(b"\n- ")
        if number:
            start += 4
            key = pieces[0]
            heads.append((key, start - 3))
        elif first and part:  # what comes before any heading: stray lines, then items
            key = b""
            heads.append((b"", -1))
            entries.append((b"", pieces[0][1:], start + 1, b""))
        at = start + len(pieces[0])
        for block in pieces[1:]:
            at += 3
            entries.append((key or b"", block, at, b"- "))
            at += len(block)
        start += len(part)
    return entries, heads, key


class _Walk:
    """The edit and the base, side by side: the edit whole in `data`, the base a piece at a
    time; what is left unmatched on each side is what the edit changed."""

    def __init__(self, data: bytes, start: int, base_start: int = 0, heads: list[int] | None = None) -> None:
        self.data, self.at = data, start  # the edit, and where in it the next base piece goes
        self.base_at = base_start  # where in the base file the next piece starts
        self.heads = heads  # where the base's headings start (None: found by searching)
        self.edit_key: bytes | None = None  # the section each side is in
        self.base_key: bytes | None = None
        self.edit_heads: list[tuple[bytes, int]] = []  # section key, where its heading's line starts
        self.base_heads: list[bytes] = []
        self.edit_left: dict[Key, int] = {}  # unmatched edit blocks → where they start
        self.base_left: dict[Key, None] = {}  # unmatched base blocks, in order
        self.before: list[tuple[int, bytes]] = []  # the edit's lines before any heading: always parsed
        self.before_seen: set[bytes] = set()

    def run(self, spans: Iterable[Span], size: int) -> None:
        first = True
        for data, begin, end in spans:
            if first or not self._alike(data, begin, end):
                for piece in _subpieces(data[begin:end], size):  # the same bytes in smaller pieces
                    if first or not self._alike(piece, 0, len(piece)):
                        stop = self._resync(piece)
                        self._base(piece, first)
                        self._edit(stop, first)
                        first = False
                        self.base_at += len(piece)
        if first or self.at < len(self.data):
            self._edit(len(self.data), first)

    def _alike(self, piece: bytes, begin: int, end: int) -> bool:
        """Whether the edit holds piece[begin:end] where the walk is, in the same section
        (then only the piece's headings are noted)."""
        data, at = self.data, self.at
        if not (self.edit_key and self.edit_key == self.base_key and _boundary(data, at + end - begin)
                and data.startswith(memoryview(piece)[begin:end], at)):
            return False
        if self.heads is not None:
            self._same(self._known_headings(piece, begin, end))
        elif piece.find(b"\n##", begin, end) >= 0:  # "##" before " ": a search that skips
            self._same(_headings(piece[begin:end]))
        self.at += end - begin
        self.base_at += end - begin
        return True

    def _known_headings(self, piece: bytes, begin: int, end: int) -> list[tuple[bytes, int]]:
        """`_headings(piece[begin:end])` from the headings the base was recorded with."""
        heads, start = self.heads, self.base_at
        out = []
        for head in heads[bisect_left(heads, start):bisect_left(heads, start + end - begin)]:  # type: ignore[index]
            at = begin + head - start
            if not piece.startswith(b"\n## ", at):
                raise _Declined  # not the file the headings were found in: the full parse decides
            out.append((piece[at + 4:_next_boundary(piece, at + 4, end)], at - begin + 1))
        return out

    def _same(self, heads: list[tuple[bytes, int]]) -> None:
        """The headings of a piece both sides hold alike, at the walk's place."""
        if heads:
            self.edit_heads += [(key, self.at + at) for key, at in heads]
            self.base_heads += [key for key, _ in heads]
            self.edit_key = self.base_key = heads[-1][0]

    def _resync(self, piece: bytes) -> int:
        """Where the edit's counterpart of a differing base piece ends: after the piece's
        last block, where the edit holds it nearby, else at the same length."""
        data, at = self.data, self.at
        last = max(piece.rfind(b"\n- "), piece.rfind(b"\n## "))
        if last > 0:
            tail, limit = piece[last:], at + 2 * len(piece) + (1 << 16)
            found = data.find(tail, at, limit)
            while found >= 0:
                if _boundary(data, found + len(tail)):
                    return found + len(tail)
                found = data.find(tail, found + 1, limit)
        return _next_boundary(data, min(at + len(piece), len(data)))

    def _base(self, piece: bytes, first: bool) -> None:
        entries, heads, self.base_key = _split(piece, self.base_key, first)
        self.base_heads += [key for key, _ in heads]
        for section, block, _, _ in entries:
            key = (section, block)
            if key in self.edit_left:
                del self.edit_left[key]
            elif key in self.base_left:
                raise _Declined
            else:
                self.base_left[key] = None

    def _edit(self, stop: int, first: bool) -> None:
        region = self.data[self.at:stop]
        if _noisy(region):
            raise _Noisy
        entries, heads, self.edit_key = _split(region, self.edit_key, first)
        self.edit_heads += [(key, self.at + at if at >= 0 else -1) for key, at in heads]
        for section, block, at, prefix in entries:
            key = (section, block)
            if not section:  # before any heading: every block is parsed (and refused there)
                if block in self.before_seen:
                    raise _Declined
                self.before_seen.add(block)
                if prefix or block:
                    self.before.append((self.at + at - len(prefix), prefix + block))
            if key in self.base_left:
                del self.base_left[key]
            elif key in self.edit_left:
                raise _Declined
            else:
                self.edit_left[key] = self.at + at
        self.at = stop

    def settled(self, source: Chunks, start: int) -> bool:
        """Whether the shortcut holds: no heading repeats, none of the base's is gone, and
        no block stands twice in a section (an unmatched item whose base item, alike, was
        matched by another copy)."""
        edit_keys = [key for key, _ in self.edit_heads]
        if len(set(edit_keys)) != len(edit_keys) or len(set(self.base_heads)) != len(self.base_heads):
            return False
        if _titles(self.base_heads) - _titles(edit_keys):
            return False  # a section heading is gone: the full parse says which, and where
        left = self.unmatched_base()
        suspects = {}
        for section, block in self.edit_left:
            match = _ITEM_ID.match(block) if section else None
            if match and match.group(1).decode("ascii") not in left:
                suspects[match.group(1).decode("ascii")] = (section, block)
        if not suspects:
            return True
        found = _find_blocks(_pieces(source(), start), set(suspects))
        return not any(found.get(short) == key for short, key in suspects.items())

    def shown(self) -> list[tuple[int, bytes]]:
        """The lines to parse (headings, changed blocks), by their line numbers in the edit."""
        changed: dict[bytes, list[tuple[int, bytes]]] = {}
        for (section, block), at in self.edit_left.items():
            if section:
                changed.setdefault(section, []).append((at - 2, b"- " + block))
        base = set(self.base_heads)
        out: list[tuple[int, bytes]] = []
        for section, at in self.edit_heads:
            if not section:
                out += self.before
                continue
            blocks = sorted(changed.get(section, []))
            if blocks or section not in base:
                out.append((at, b"## " + section))
            out += blocks
        line, last, numbered = 1, 0, []
        for at, text in out:
            line += self.data.count(b"\n", last, at)
            last = at
            numbered.append((line, text))
        return numbered

    def removed(self) -> set[str]:
        return set(self.unmatched_base())

    def unmatched_base(self) -> dict[str, Key]:
        out = {}
        for section, block in self.base_left:
            match = _ITEM_ID.match(block)
            if match:
                out[match.group(1).decode("ascii")] = (section, block)
        return out


def _find_blocks(pieces: Iterable[bytes], shorts: set[str]) -> dict[str, Key]:
    """The blocks of these notes' items in the stream (its body's pieces), with their
    section keys, by short id (the last, where one repeats)."""
    wanted = re.compile(rb"\n- \[#(" + b"|".join(re.escape(s.encode("ascii", "replace")) for s in sorted(shorts))
                        + rb")\]")
    found: dict[str, Key] = {}
    section = b""
    for piece in pieces:
        for match in wanted.finditer(piece):
            heading = piece.rfind(b"\n## ", 0, match.start())
            key = _heading_at(piece, heading) if heading >= 0 else section
            block = piece[match.start() + 3:_next_boundary(piece, match.end())]
            found[match.group(1).decode("ascii")] = (key, block)
        heading = piece.rfind(b"\n## ")
        if heading >= 0:
            section = _heading_at(piece, heading)
    return found



def blocks_by_id(read: Reader, size: int, heads: list[int], wanted: dict[str, str | None]) -> dict[str, Key]:
    """The blocks of notes in the base, found without reading it through: `wanted` maps a
    note's full id to its section's title (None: any section, for a note no longer in the
    memory, whose kind is not known); `heads`, where each section heading starts
    ("\n## ").  A section's items are in id order and short ids sort as their ids do (no
    short id is a prefix of another), so each note is looked for by bisection in its
    section, reading a few small windows.  By the short id the base shows (a note the base
    does not hold is left out), with its section key as `_find_blocks` gives it."""
    sections: dict[bytes, tuple[int, int, bytes]] = {}
    for i, at in enumerate(heads):
        head = read(at, WINDOW)
        key = _heading_at(head, 0)
        end = heads[i + 1] if i + 1 < len(heads) else size
        sections[key.split(b"\n", 1)[0]] = (at, end, key)
    found: dict[str, Key] = {}
    for note_id, title in wanted.items():
        where = list(sections.values()) if title is None else [sections.get(title.encode("utf-8"))]
        for section in where:
            if section is None:
                continue
            at = item_of(read, section[0], section[1], note_id.encode("ascii", "replace"))
            if at is not None:
                short, block = _block_at(read, at, section[1])
                found[short] = (section[2], block)
                break
    return found


def _block_at(read: Reader, at: int, end: int) -> tuple[str, bytes]:
    """The short id and the block (as `_find_blocks` cuts it) of the item starting at `at`."""
    data, size = b"", WINDOW
    while True:
        data = read(at, size)
        boundary = _next_boundary(data, 4)
        if boundary < len(data) or at + len(data) >= end or len(data) < size:
            short = short_at(read, at).decode("ascii", "replace")
            return short, data[3:boundary]
        size *= 4


def _diff_whole(source: Chunks, edited_data: bytes) -> EditDiff | None:
    """The comparison of the whole files, for an edit with editor noise (cleaned first)."""
    base_data = b"".join(source())
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
    cursor = [0, 1]
    shown = [(_line_of(edited_data, offset, block, cursor), block) for block in _changed_blocks(edited, base)]
    return EditDiff(_parse_blocks(header, shown), _removed_notes(base, edited))


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _titles(sections: Iterable[bytes]) -> set[bytes]:
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


def _parse_blocks(header: list[bytes], shown: list[tuple[int, bytes]]) -> ParsedFile:
    """Parse the header and the `shown` blocks alone (each with the line it starts at in
    the file), with their real line numbers (a block that is not UTF-8 is an error naming
    its line, and left out)."""
    mini = [line.decode("utf-8") for line in header]
    numbers = list(range(1, len(header) + 1))
    errors: list[LineError] = []
    for first, block in shown:
        try:
            lines = block.decode("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            errors.append(LineError(first + block[: exc.start].count(b"\n"), "not UTF-8 text; save the file as UTF-8"))
            continue
        mini.extend(lines)
        numbers.extend(range(first, first + len(lines)))
    parsed = parse("\n".join(mini), whole=False, numbers=numbers)
    for item in parsed.items:
        item.line = numbers[item.line - 1]
        item.anchors = {path: (numbers[n - 1], shown) for path, (n, shown) in item.anchors.items()}
        item.triggers = {key: numbers[n - 1] for key, n in item.triggers.items()}
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


def base_items(base_data: bytes | Chunks, shorts: set[str] | None, known: dict[str, Key] | None = None,
               *, chunk: int = CHUNK) -> dict[str, Item]:
    """The base rendering's items of these notes (every note: `shorts` None), by the short
    id it shows them with, parsed alone, each under its section: what the check-in
    compares an edit with.  The base is bytes or read a chunk at a time (see diff_edit);
    `known`: blocks already at hand (a diff's unmatched base items, `blocks_by_id`'s),
    not looked for."""
    source = _source(base_data, chunk)
    head = _head(source()) if shorts is not None else None
    if head is None:
        parsed = parse(b"".join(source()).decode("utf-8", "replace"))
        return {i.note_id: i for i in parsed.items if i.note_id is not None and (shorts is None or i.note_id in shorts)}
    assert shorts is not None
    found = {s: known[s] for s in shorts if known and s in known}
    rest = shorts - set(found)
    if rest and head[2]:
        found.update(_find_blocks(_pieces(source(), head[1] - 1), rest))
    sections: dict[bytes, list[bytes]] = {}
    for section, block in found.values():
        sections.setdefault(section, []).append(b"- " + block)
    mini: list[bytes] = list(head[0])
    for section, blocks in sections.items():
        mini += [b"## " + section.split(b"\n", 1)[0]] + blocks
    parsed = parse(b"\n".join(mini).decode("utf-8", "replace"), whole=False)
    return {i.note_id: i for i in parsed.items if i.note_id is not None}

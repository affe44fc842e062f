"""Render notes to MEMORY.md text.

Output depends only on the notes and the memory id given: no clock, locale, time zone or
hash order.  Sorting happens here (kind rank, then note id), so the total order does not
rest on whatever order the caller's query returned.  Notes are shown by their short ids
(`shorts`: note id → short id, the store's); links to other notes likewise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..base.owing import answered_by as answered_by_of
from ..base.replay import Note
from ..base.resolver import Graph, disputed_with
from ..base.vocabulary import KINDS
from .format import (
    CHECKOUT_HELP,
    HELP_OPEN,
    INDENT,
    SECTION_TITLES,
    SEP,
    WORD_BY_STATE,
    Selection,
    anchor_line,
    due_shown,
    encode_query,
    escape_first_line,
    escape_reason,
    escape_text_line,
    trigger_line,
)

ALL = Selection()


def header_line(memory: str, selection: Selection = ALL) -> str:
    parts = [f"<!-- qem memory={memory}"]
    if selection.kinds is not None:
        parts.append(f" kinds={','.join(selection.kinds)}")
    if selection.active_only:
        parts.append(" active")
    if selection.query:
        parts.append(f" query={encode_query(selection.query)}")
    parts.append(
        SEP + "generated from qem's log; change notes with `qem edit`,"
        " or edit this file and run `qem checkin` -->"
    )
    return "".join(parts)


def render(notes: Iterable[Note], memory: str, selection: Selection = ALL) -> str:
    """The whole file.  `notes` may come in any order; those outside `selection` are left out."""
    notes = list(notes)
    graph = _disagreements(notes)
    shorts = {n.id: n.shown for n in notes}
    answered = answered_by_of(notes)
    by_kind: dict[str, list[Note]] = {kind: [] for kind in KINDS}
    for note in notes:
        if selection.holds(note.id, note.kind, note.live):
            by_kind[note.kind].append(note)
    sections: dict[str, list[str]] = {}
    for kind, section in by_kind.items():
        section.sort(key=_by_id)
        sections[kind] = [item_text(note, graph, shorts, answered.get(note.id, ())) for note in section
                          if not note.text_missing]
    return assemble(memory, selection, sections)


def for_editing(rendering: str, base: str | None = None) -> str:
    """A rendering (or an edit of `base`) as a checkout: with how to edit it, in a comment
    at the end whose first line names the rendering it was made from (`base=`: see
    `rendering_id`), so that even a copy of the file can be checked in against its base."""
    named = rendering_id((rendering if base is None else base).encode("utf-8"))
    return rendering + "\n" + CHECKOUT_HELP.replace(HELP_OPEN, f"{HELP_OPEN} base={named}", 1)


def rendering_id(rendering: bytes) -> str:
    """A rendering's name in a checkout's help line: the start of its SHA-256."""
    import hashlib

    return hashlib.sha256(rendering).hexdigest()[:16]


def base_named(data: bytes) -> str | None:
    """The base a checkout's help line names (None: no help line, or one naming none)."""
    import re

    opening = HELP_OPEN.encode() + b" base="
    at = data.find(opening)
    while at >= 0:  # (found by `find`, then matched: a 100 MB file is not walked by the regex)
        if at == 0 or data[at - 1:at] == b"\n":
            found = re.match(rb"([0-9a-f]{16})\b", data[at + len(opening):at + len(opening) + 17])
            if found:
                return found[1].decode("ascii")
        at = data.find(opening, at + 1)
    return None


def item_text(note: Note, graph: Graph | None = None, shorts: Mapping[str, str] | None = None,
              answered_by: Sequence[str] = ()) -> str:
    """One item as text, ending in a newline: the unit the store caches and export joins
    ("" for a note whose text is missing: it has no item until its text arrives)."""
    lines = render_item(note, graph, shorts, answered_by)
    return "\n".join(lines) + "\n" if lines else ""


def assemble(memory: str, selection: Selection, sections: Mapping[str, Sequence[str]]) -> str:
    """The file from its items: `sections` maps a kind to its item texts, in id order."""
    return "".join(_layout(memory, selection, sections, str))


def assemble_bytes(memory: str, selection: Selection, sections: Mapping[str, Sequence[bytes]]) -> bytes:
    """`assemble` over UTF-8 items: the export path never decodes what it only compares."""
    return b"".join(_layout(memory, selection, sections, str.encode))


def assemble_chunks(memory: str, selection: Selection, sections: Mapping[str, Iterable[bytes]],
                    size: int = 1 << 20) -> Iterator[bytes]:
    """`assemble_bytes` as a stream of chunks of about `size` bytes: each kind's items
    (any iterable, say rows read from the index as the stream reaches them) are taken only
    as they are written, so the rendering is never held whole."""
    held: list[bytes] = []
    count = 0
    for piece in _layout(memory, selection, sections, str.encode):
        held.append(piece)
        count += len(piece)
        if count >= size:
            yield b"".join(held)
            held, count = [], 0
    if held:
        yield b"".join(held)


def _layout(memory, selection, sections, literal):  # type: ignore[no-untyped-def]
    kinds = [kind for kind in KINDS if selection.holds_kind(kind)]
    yield literal(header_line(memory, selection) + "\n\n")
    for position, kind in enumerate(kinds, start=1):
        yield literal(f"## {SECTION_TITLES[kind]}\n")
        first = True
        for item in sections.get(kind, ()):
            if first:
                yield literal("\n")
                first = False
            yield item
        if position < len(kinds):
            yield literal("\n")  # a blank line before the next heading


def _by_id(note: Note) -> str:
    return note.id


def _disagreements(notes: list[Note]) -> Graph | None:
    """The graph, only when some note is disputed or forked (rare; skip the work otherwise)."""
    parents: set[str] = set()
    needed = False
    for note in notes:
        if note.disputes or note.rivals:
            needed = True
            break
        if note.supersedes is not None:
            if note.supersedes in parents:
                needed = True
                break
            parents.add(note.supersedes)
    return Graph.of({n.id: n for n in notes}) if needed else None


def render_item(note: Note, graph: Graph | None = None, shorts: Mapping[str, str] | None = None,
                answered_by: Sequence[str] = ()) -> list[str]:
    """The lines of one note's list item: none for a note whose text the log lacks (an
    incomplete commit: not forgotten, so no tombstone; shown when its text arrives).
    `answered_by`: the answers that speak for it (`owing.answering`), shown on a request."""
    shown = (shorts or {}).get
    me = shown(note.id, note.shown)
    if note.text_missing:
        return []
    if note.state == "forgotten" or note.text is None:
        return [f"- [#{me}] FORGOTTEN {_date(note.state_at or note.created_at)}"]
    fields = [f"- [#{me}] {note.created_at[:10]}", note.priority, note.provenance]
    marker = state_marker(note, shorts)
    if marker:
        fields.append(marker)
    if note.supersedes is not None:
        fields.append(f"supersedes #{shown(note.supersedes, note.supersedes)}")
    if note.expires is not None:
        fields.append(f"expires {_date(note.expires)}")
    if note.to is not None:
        fields.append(f"to {note.to}")
    if note.due is not None:
        fields.append(f"due {due_shown(note.due)}")
    if note.answers is not None:
        fields.append(f"answers #{shown(note.answers, note.answers)}")
    if note.rests_on:
        fields.append("rests on " + ", ".join(f"#{shown(b, b)}" for b in note.rests_on))
    if answered_by and (note.to is not None or note.due is not None):
        fields.append("answered by " + ", ".join(f"#{shown(a, a)}" for a in answered_by))
    if graph is not None:
        for label, others in disputed_with(note, graph):
            fields.append(f"DISPUTED with {', '.join(f'#{shown(o, o)}' for o in others)} ({label})")
    if note.rivals:
        fields.append(rivals_marker(note, shorts))
    first, *more = note.text.split("\n")
    fields.append(escape_first_line(first))
    lines = [SEP.join(fields)]
    lines.extend(INDENT + escape_text_line(line) if line else "" for line in more)
    lines.extend(anchor_line(path, oid) for path, oid in note.anchors)
    lines.extend(trigger_line(name, value) for name, value in note.triggers)
    return lines


def rivals_marker(note: Note, shorts: Mapping[str, str] | None = None) -> str:
    """Concurrent changes of the note's state that disagree, each with the first
    characters of the event `qem rule NOTE --keep EVENT` takes."""
    shown = (shorts or {}).get
    sides = []
    for rival in note.rivals:
        what = WORD_BY_STATE.get(rival.state, rival.state).lower() if rival.state != "active" else "reinstated"
        if rival.superseded_by:
            what += f" by #{shown(rival.superseded_by, rival.superseded_by)}"
        sides.append(f"{what} {rival.tip[:RULE_SHOWN]}")
    return f"DISPUTED (concurrent: {' | '.join(sides)})"


RULE_SHOWN = 6  # characters of a side's last event shown in the marker


def state_marker(note: Note, shorts: Mapping[str, str] | None = None) -> str | None:
    if note.state == "active":
        return None
    word = WORD_BY_STATE[note.state]
    parts = [word]
    if note.state == "superseded":
        by = note.superseded_by or ""
        parts.append(f"by #{(shorts or {}).get(by, by)}")
    if note.state_at:
        parts.append(_date(note.state_at))
    if note.state_reason and note.state_reason.strip():
        parts.append(f"({escape_reason(note.state_reason)})")
    return " ".join(parts)


def _date(timestamp: str) -> str:
    return timestamp[:10]

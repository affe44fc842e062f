"""Render notes to MEMORY.md text.

Output depends only on the notes and the base seq given: no clock, locale, time zone or
hash order.  Sorting happens here (kind rank, then note id), so the total order does not
rest on whatever order the caller's query returned.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..model import KINDS, Note
from ..resolver import Graph, disputed_with

from .format import (
    CHECKOUT_HELP,
    INDENT,
    SECTION_TITLES,
    SEP,
    WORD_BY_STATE,
    Selection,
    escape_first_line,
    escape_reason,
)

ALL = Selection()


def header_line(base: int, selection: Selection = ALL) -> str:
    parts = [f"<!-- qem base={base}"]
    if selection.kinds is not None:
        parts.append(f" kinds={','.join(selection.kinds)}")
    if selection.active_only:
        parts.append(" active")
    parts.append(
        SEP + "generated from the qem note store; change notes with `qem edit`,"
        " or edit this file and run `qem checkin` -->"
    )
    return "".join(parts)


def render(notes: Iterable[Note], base: int, selection: Selection = ALL) -> str:
    """The whole file.  `notes` may come in any order; those outside `selection` are left out."""
    notes = list(notes)
    graph = _disagreements(notes)
    by_kind: dict[str, list[Note]] = {kind: [] for kind in KINDS}
    for note in notes:
        if selection.holds_kind(note.kind) and not (selection.active_only and not note.live):
            by_kind[note.kind].append(note)
    sections: dict[str, list[str]] = {}
    for kind, section in by_kind.items():
        section.sort(key=_by_id)
        sections[kind] = [item_text(note, graph) for note in section]
    return assemble(base, selection, sections)


def for_editing(rendering: str) -> str:
    """A rendering as a checkout: with how to edit it, in a comment at the end."""
    return rendering + "\n" + CHECKOUT_HELP


def item_text(note: Note, graph: Graph | None = None) -> str:
    """One item as text, ending in a newline: the unit the store caches and export joins."""
    return "\n".join(render_item(note, graph)) + "\n"


def assemble(base: int, selection: Selection, sections: Mapping[str, Sequence[str]]) -> str:
    """The file from its items: `sections` maps a kind to its item texts, in id order."""
    return "".join(_layout(base, selection, sections, str))


def assemble_bytes(base: int, selection: Selection, sections: Mapping[str, Sequence[bytes]]) -> bytes:
    """`assemble` over UTF-8 items: the export path never decodes what it only compares."""
    return b"".join(_layout(base, selection, sections, str.encode))


def _layout(base, selection, sections, literal):  # type: ignore[no-untyped-def]
    kinds = [kind for kind in KINDS if selection.holds_kind(kind)]
    out = [literal(header_line(base, selection) + "\n\n")]
    for position, kind in enumerate(kinds, start=1):
        out.append(literal(f"## {SECTION_TITLES[kind]}\n"))
        items = sections.get(kind, ())
        if items:
            out.append(literal("\n"))
            out.extend(items)
        if position < len(kinds):
            out.append(literal("\n"))  # a blank line before the next heading
    return out


def _by_id(note: Note) -> int:
    return note.id


def _disagreements(notes: list[Note]) -> Graph | None:
    """The graph, only when some note is disputed or forked (rare; skip the work otherwise)."""
    parents: set[int] = set()
    needed = False
    for note in notes:
        if note.disputes:
            needed = True
            break
        if note.supersedes is not None:
            if note.supersedes in parents:
                needed = True
                break
            parents.add(note.supersedes)
    return Graph.of({n.id: n for n in notes}) if needed else None


def render_item(note: Note, graph: Graph | None = None) -> list[str]:
    """The lines of one note's list item."""
    if note.state == "forgotten" or note.text is None:
        return [f"- [#{note.id}] FORGOTTEN {_date(note.state_at or note.created_at)}"]
    fields = [f"- [#{note.id}] {note.created_at[:10]}", note.priority, note.provenance]
    marker = state_marker(note)
    if marker:
        fields.append(marker)
    if note.supersedes is not None:
        fields.append(f"supersedes #{note.supersedes}")
    if graph is not None:
        for label, others in disputed_with(note, graph):
            fields.append(f"DISPUTED with {', '.join(f'#{o}' for o in others)} ({label})")
    first, *more = note.text.split("\n")
    fields.append(escape_first_line(first))
    lines = [SEP.join(fields)]
    lines.extend(INDENT + line if line else "" for line in more)
    return lines


def state_marker(note: Note) -> str | None:
    if note.state == "active":
        return None
    word = WORD_BY_STATE[note.state]
    parts = [word]
    if note.state == "superseded":
        parts.append(f"by #{note.superseded_by}")
    if note.state_at:
        parts.append(_date(note.state_at))
    if note.state_reason and note.state_reason.strip():
        parts.append(f"({escape_reason(note.state_reason)})")
    return " ".join(parts)


def _date(timestamp: str) -> str:
    return timestamp[:10]

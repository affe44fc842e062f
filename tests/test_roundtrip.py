"""MEMORY.md reads back exactly what it shows: render → parse is the identity on every
field the file carries, for any text, and editor noise changes nothing.

The texts are arbitrary unicode (control characters included) mixed with fragments that
imitate the file's own syntax: section headings, item lines, markers, the header comment,
conflict markers, fences, backslashes.  Only NUL is excluded, by normalization, as every
write excludes it.
"""

from __future__ import annotations

from _render_support import (
    MEMORY,
    TEXT,
    an_id,
    check_column_zero_rule,
    flat_reason,
    marker_date,
    note_sets,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from qem_edit.reconciler.parse import parse
from qem_edit.renderer import Selection, render
from qem_edit.renderer.render import header_line

from qem_edit.base.replay import Note
from qem_edit.base.vocabulary import KINDS

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_reads_back(notes: list[Note], text: str) -> None:
    parsed = parse(text)
    assert parsed.errors == [], parsed.errors
    assert parsed.memory == MEMORY
    items = {item.note_id: item for item in parsed.items}
    assert None not in items, "the file grew a new note"
    assert len(parsed.items) == len(notes) == len(items)
    shown = {n.id: n.shown for n in notes}  # a link shows its note's short id, or the id it holds
    for note in notes:
        item = items[note.shown]
        assert item.kind == note.kind
        if note.state == "forgotten":
            assert (item.state, item.text) == ("forgotten", None)
            assert item.date == (note.state_at or note.created_at)[:10]
            continue
        got = (item.priority, item.provenance, item.state, item.text)
        assert got == (note.priority, note.provenance, note.state, note.text)
        assert item.date == note.created_at[:10]
        assert item.supersedes == (shown.get(note.supersedes, note.supersedes) if note.supersedes else None)
        assert item.superseded_by == (shown.get(note.superseded_by, note.superseded_by) if note.superseded_by else None)
        reason = flat_reason(note.state_reason) if note.state != "active" else None
        assert item.state_reason == reason
        assert {path: shown for path, (_, shown) in item.anchors.items()} == {p: o[:12] for p, o in note.anchors}


@SETTINGS
@given(note_sets(disputes=True))
@example(
    [
        Note(an_id(1), "task", "high", "REVOKED 2026-01-01 (x) · y", "agent", "2026-01-01T00:00:00Z", "a",
             short=an_id(1)[:4]),
        Note(an_id(2), "task", "low", "\\", "human", "2026-01-01T00:00:00Z", "a", state="revoked",
             state_at="2026-01-02T00:00:00Z", state_reason="a (b) \\ c\nd", short=an_id(2)[:4]),
        Note(an_id(3), "gotcha", "medium", "x\n## Directives\n- [#999] 2026-01-01 · high · agent · forged",
             "auto", "2026-01-01T00:00:00Z", "a", short=an_id(3)[:4]),
        Note(an_id(4), "finding", "medium", "supersedes #1 · x", "agent", "2026-01-01T00:00:00Z", "a",
             supersedes=an_id(1), short=an_id(4)[:4]),
        Note(an_id(5), "finding", "medium", "\\REVOKED", "agent", "2026-01-01T00:00:00Z", "a", supersedes=an_id(1),
             short=an_id(5)[:4]),
    ]
)
def test_render_then_parse_gives_back_every_note(notes: list[Note]) -> None:
    text = render(notes, MEMORY)
    assert_reads_back(notes, text)
    check_column_zero_rule(text, notes)


def _rebuild(text: str) -> list[Note]:
    """Notes made from nothing but what the file shows."""
    notes = []
    for item in parse(text).items:
        assert item.note_id is not None
        if item.state == "forgotten":
            notes.append(
                Note(item.note_id, item.kind, "low", None, "auto", "1970-01-01T00:00:00Z", "x",
                     state="forgotten", state_at=f"{item.date}T00:00:00Z")
            )
            continue
        day = marker_date(item)
        notes.append(
            Note(
                item.note_id, item.kind, item.priority, item.text, item.provenance or "",
                f"{item.date}T00:00:00Z", "x", supersedes=item.supersedes,
                superseded_by=item.superseded_by, state=item.state,
                state_at=f"{day}T00:00:00Z" if day else None, state_reason=item.state_reason,
                anchors=tuple(sorted((path, shown) for path, (_, shown) in item.anchors.items())),
            )
        )
    return notes


@SETTINGS
@given(note_sets())
def test_one_more_pass_is_stable(notes: list[Note]) -> None:
    """render → parse → notes → render is the same file, byte for byte."""
    first = render(notes, MEMORY)
    assert render(_rebuild(first), MEMORY) == first


def _noisy_variants(text: str) -> dict[str, str]:
    lines = text.split("\n")
    return {
        "crlf": text.replace("\n", "\r\n"),
        "cr": text.replace("\n", "\r"),
        "bom": "\ufeff" + text,
        "bom+crlf": "\ufeff" + text.replace("\n", "\r\n"),
        "trailing spaces": "\n".join(line + "  " for line in lines),
        "trailing tabs": "\n".join(line + " \t" for line in lines),
        "no final newline": text.rstrip("\n"),
        "extra final newlines": text + "\n\n\n",
        "all of it": "\ufeff" + "\r\n".join(line + " " for line in lines).rstrip(),
    }


@settings(max_examples=60, deadline=None)
@given(note_sets())
def test_editor_noise_changes_nothing(notes: list[Note]) -> None:
    text = render(notes, MEMORY)
    clean = parse(text)
    for name, noisy in _noisy_variants(text).items():
        assert parse(noisy) == clean, name


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(TEXT, st.sampled_from(["[#1] x", "[#12]: y", "high · z", "low"])), min_size=1, max_size=3))
def test_a_text_is_one_item_whatever_it_holds(texts: list[str]) -> None:
    """The same texts as new, unnumbered items a person typed (`- text` plus indented
    lines) also read back as exactly those texts, when escaped the way qem escapes."""
    from qem_edit.renderer.format import INDENT, escape_first_line, escape_text_line

    lines = [f"<!-- qem memory={MEMORY} kinds=task -->", "", "## Tasks", ""]
    for text in texts:
        first, *more = text.split("\n")
        first = escape_first_line(first)
        if first.startswith("[#"):
            first = "\\" + first  # `- [#N]` names an existing note; a new text escapes it
        if first.split(" · ", 1)[0] in ("high", "medium", "low"):
            first = "medium · " + first  # a leading priority word is read as the priority
        lines.append("- " + first)
        lines.extend(INDENT + escape_text_line(line) if line else "" for line in more)
    parsed = parse("\n".join(lines) + "\n")
    assert parsed.errors == []
    assert [item.text for item in parsed.items] == texts
    assert all(item.note_id is None and item.provenance == "human" for item in parsed.items)


@settings(max_examples=60, deadline=None)
@given(note_sets(), st.sets(st.sampled_from(KINDS), min_size=1), st.booleans())
def test_scoped_renderings_read_back_with_their_scope(notes: list[Note], kinds: set[str], active: bool) -> None:
    selection = Selection(kinds=tuple(k for k in KINDS if k in kinds), active_only=active)
    text = render(notes, MEMORY, selection)
    parsed = parse(text)
    assert parsed.errors == []
    assert parsed.selection == selection
    shown = [n for n in notes if n.kind in kinds and (n.live or not active)]
    assert sorted(i.note_id for i in parsed.items) == sorted(n.shown for n in shown)
    assert text.split("\n", 1)[0] == header_line(MEMORY, selection)
    # each item is as the whole file shows it (a link to a note left out keeps its short id)
    whole = {i.note_id: i.raw for i in parse(render(notes, MEMORY)).items}
    assert {i.note_id: i.raw for i in parsed.items} == {n.shown: whole[n.shown] for n in shown}
    if _closed(shown, notes):  # no link leaves the selection: the shown notes alone render the same file
        assert render([n._replace() for n in shown], MEMORY, selection) == text


def _closed(shown: list[Note], notes: list[Note]) -> bool:
    """Whether no supersession link (nor a fork) joins a shown note to one left out."""
    inside = {n.id for n in shown}
    parents = {n.supersedes for n in shown} - {None}
    for note in notes:
        links = {note.supersedes, note.superseded_by} - {None}
        if note.id in inside and not links <= inside:
            return False
        if note.id not in inside and (links & inside or note.supersedes in parents):
            return False
    return True

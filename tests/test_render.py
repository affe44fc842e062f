"""The renderer: a total order of its own, fixed sections, the item grammar, and a file
that CommonMark reads as seven headings with one list item per note.

The order tests feed notes in shuffled orders with real ties (notes created in the same
second, in the same section), since a sort that is only stable on already-sorted input
passes every test that renders a list it got from an ordered query.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from _render_support import (
    CORPUS,
    CORPUS_MD,
    GOLDEN,
    MEMORY,
    an_id,
    check_column_zero_rule,
    expected_outline,
    markdown_outline,
    note_sets,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qem_edit.renderer import Selection, render
from qem_edit.renderer.format import SECTION_TITLES, escape_first_line, escape_reason, unescape_reason
from qem_edit.renderer.render import header_line, render_item

from qem_edit.base import ids
from qem_edit.base.replay import Note, replay, sort_key
from qem_edit.base.vocabulary import KINDS
from qem_edit.transfer.dump import read_dump

T = "2026-06-01T12:00:00Z"  # one second, shared by every note of the tie tests


def n(number: int) -> str:
    """A readable note id that sorts as its number does: n(7) is "n07"."""
    return f"n{number:02d}"


def note(note_id: int, kind: str = "finding", text: str = "x", **kw) -> Note:
    """A note with id n(note_id) (shown by it); `supersedes` and `superseded_by` are
    numbers too."""
    fields = dict(priority="medium", provenance="agent", created_at=T, actor="a")
    fields.update(kw)
    for link in ("supersedes", "superseded_by"):
        if fields.get(link) is not None:
            fields[link] = n(fields[link])
    return Note(n(note_id), kind, fields.pop("priority"), text, fields.pop("provenance"), fields.pop("created_at"), fields.pop("actor"), **fields)


def logged_notes(log: Path) -> tuple[str, list[Note]]:
    """The memory id and the notes of a log, replayed without a store, each with the short
    id the set of them gives (as the store gives it)."""
    events, texts, memory = read_dump(log.read_bytes(), str(log))
    notes = replay(events, {t.note: t.text for t in texts})
    shorts = ids.short_ids({i: note.short_len for i, note in notes.items()})
    return memory or MEMORY, [note._replace(short=shorts[i]) for i, note in notes.items()]


def corpus_notes() -> tuple[str, list[Note]]:
    if not CORPUS.exists():
        pytest.skip("fixtures/corpus-749.jsonl is not there")
    return logged_notes(CORPUS)


# -- order -----------------------------------------------------------------------------------


def test_ties_in_one_section_come_out_by_id_whatever_the_input_order() -> None:
    notes = [note(i, text=f"note {i}") for i in (5, 3, 9, 1, 7)]
    expected = [n(i) for i in (1, 3, 5, 7, 9)]
    for seed in range(20):
        random.Random(seed).shuffle(notes)
        text = render(notes, MEMORY)
        shown = [line.split("]")[0][4:] for line in text.split("\n") if line.startswith("- [#")]
        assert shown == expected, f"input order {[x.id for x in notes]}"


def test_kind_rank_comes_before_id() -> None:
    notes = [note(1, "operational"), note(2, "directive"), note(3, "gotcha"), note(4, "directive")]
    lines = [line[:8] for line in render(notes, MEMORY).split("\n") if line.startswith(("## ", "- [#"))]
    assert lines == [
        "## Direc", "- [#n02]", "- [#n04]", "## Tasks", "## Gotch", "- [#n03]", "## Findi", "## Refer",
        "## Decis", "## Opera", "- [#n01]",
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(note_sets(max_notes=12), st.randoms(use_true_random=False))
def test_input_order_is_irrelevant(notes: list[Note], rnd: random.Random) -> None:
    """The renderer sorts for itself: a query that returned rows in any order (no ORDER BY,
    a VACUUM, another SQLite) renders the same bytes."""
    expected = render(sorted(notes, key=sort_key), MEMORY)
    shuffled = list(notes)
    rnd.shuffle(shuffled)
    assert render(shuffled, MEMORY) == expected
    assert render(reversed(shuffled), MEMORY) == expected  # any iterable, even a one-shot one


def test_corpus_in_shuffled_orders_renders_the_committed_file() -> None:
    memory, notes = corpus_notes()
    if not CORPUS_MD.exists():
        pytest.skip("fixtures/MEMORY-749.md is not generated yet (QEM_UPDATE_GOLDEN=1)")
    expected = CORPUS_MD.read_text("utf-8")
    ties = len(notes) - len({x.created_at for x in notes})
    assert ties > 0, "the corpus must hold same-second notes for this test to mean anything"
    for seed in range(5):
        random.Random(seed).shuffle(notes)
        assert render(notes, memory) == expected
    # the same notes ordered by time (ties in reverse id order) still render by id
    by_time = sorted(sorted(notes, key=lambda x: x.id, reverse=True), key=lambda x: x.created_at)
    assert render(by_time, memory) == expected


# -- sections and header ---------------------------------------------------------------------


def test_an_empty_store_has_the_header_and_all_seven_sections() -> None:
    text = render([], MEMORY)
    assert text == header_line(MEMORY) + "\n\n" + "\n\n".join(f"## {t}" for t in SECTION_TITLES.values()) + "\n"
    assert list(SECTION_TITLES) == list(KINDS)
    assert [t for t in SECTION_TITLES.values()] == [
        "Directives", "Tasks", "Gotchas", "Findings", "References", "Decisions", "Operational",
    ]


def test_header_line() -> None:
    assert header_line("7wq2m5xk0c3d") == (
        "<!-- qem memory=7wq2m5xk0c3d · generated from qem's log; change notes with `qem edit`,"
        " or edit this file and run `qem checkin` -->"
    )
    scoped = header_line("7wq2m5xk0c3d", Selection(kinds=("task", "gotcha"), active_only=True))
    assert scoped.startswith("<!-- qem memory=7wq2m5xk0c3d kinds=task,gotcha active · ")


def test_file_layout_blank_lines_and_final_newline() -> None:
    text = render([note(1, "task", "a\n\nb"), note(2, "task")], MEMORY)
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert "\r" not in text
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert "## Tasks\n\n- [#n01] 2026-06-01 · medium · agent · a\n\n  b\n- [#n02] 2026-06-01 · medium · agent · x\n\n## Gotchas\n" in text


# -- items -----------------------------------------------------------------------------------

D = "2026-07-01T08:30:00Z"


@pytest.mark.parametrize(
    "item, line",
    [
        (note(1), "- [#n01] 2026-06-01 · medium · agent · x"),
        (note(2, priority="high", provenance="user-stated"), "- [#n02] 2026-06-01 · high · user-stated · x"),
        (note(3, state="stale", state_at=D, state_reason="why"), "- [#n03] 2026-06-01 · medium · agent · STALE 2026-07-01 (why) · x"),
        (note(4, state="revoked", state_at=D, state_reason="a (b) \\c"), "- [#n04] 2026-06-01 · medium · agent · REVOKED 2026-07-01 (a \\(b\\) \\\\c) · x"),
        (note(5, state="expired", state_at=D), "- [#n05] 2026-06-01 · medium · agent · EXPIRED 2026-07-01 · x"),
        (note(6, state="expired", state_at=D, state_reason=" \n\t "), "- [#n06] 2026-06-01 · medium · agent · EXPIRED 2026-07-01 · x"),
        (note(7, state="superseded", superseded_by=8, state_at=D, state_reason="line\nbreak"), "- [#n07] 2026-06-01 · medium · agent · SUPERSEDED by #n08 2026-07-01 (line break) · x"),
        (note(8, supersedes=7), "- [#n08] 2026-06-01 · medium · agent · supersedes #n07 · x"),
        (note(9, state="revoked", state_at=D, supersedes=2), "- [#n09] 2026-06-01 · medium · agent · REVOKED 2026-07-01 · supersedes #n02 · x"),
        (note(10, text=None, state="forgotten", state_at=D), "- [#n10] FORGOTTEN 2026-07-01"),
        (note(11, state="active", state_at=D, state_reason="reinstated"), "- [#n11] 2026-06-01 · medium · agent · x"),
        (note(12, text="REVOKED is a word"), "- [#n12] 2026-06-01 · medium · agent · \\REVOKED is a word"),
        (note(13, text="\\n is not a newline"), "- [#n13] 2026-06-01 · medium · agent · \\\\n is not a newline"),
        (note(14, text="supersedes #1"), "- [#n14] 2026-06-01 · medium · agent · \\supersedes #1"),
        (note(15, text="REVOKEDLY not a marker word"), "- [#n15] 2026-06-01 · medium · agent · REVOKEDLY not a marker word"),
        (note(16, text="two\n  lines\n\n\tand a tab"), "- [#n16] 2026-06-01 · medium · agent · two\n    lines\n\n  \tand a tab"),
        (note(17, provenance="human", created_at="2026-12-31T23:59:59Z"), "- [#n17] 2026-12-31 · medium · human · x"),
    ],
)
def test_item_lines(item: Note, line: str) -> None:
    assert "\n".join(render_item(item)) == line


def test_items_show_short_ids_and_link_by_them() -> None:
    """A note is shown by its short id, and so are the notes it links to; a link to a
    note the rendering was not given shows the whole id it holds."""
    old, new, gone = an_id("old"), an_id("new"), an_id("not given")
    notes = [
        Note(old, "decision", "medium", "before", "agent", T, "a", superseded_by=new, state="superseded", state_at=T,
             short=old[:4]),
        Note(new, "decision", "medium", "after", "agent", T, "a", supersedes=old, short=new[:5]),
        Note(an_id("third"), "decision", "low", "orphan", "agent", T, "a", supersedes=gone, short="zz9q"),
    ]
    items = [line for line in render(notes, MEMORY).split("\n") if line.startswith("- [#")]
    assert sorted(items) == sorted([
        f"- [#{old[:4]}] 2026-06-01 · medium · agent · SUPERSEDED by #{new[:5]} 2026-06-01 · before",
        f"- [#{new[:5]}] 2026-06-01 · medium · agent · supersedes #{old[:4]} · after",
        f"- [#zz9q] 2026-06-01 · low · agent · supersedes #{gone} · orphan",
    ])


@pytest.mark.parametrize(
    "first, escaped",
    [
        ("plain", "plain"),
        ("\\", "\\\\"),
        ("\\REVOKED", "\\\\REVOKED"),
        *[(w, "\\" + w) for w in ("REVOKED", "STALE", "EXPIRED", "SUPERSEDED", "FORGOTTEN", "DISPUTED", "supersedes")],
        ("STALE: the cache", "\\STALE: the cache"),
        ("Stale cache", "Stale cache"),
        (" REVOKED", " REVOKED"),
        ("revoked", "revoked"),
        ("EXPIRED_AT is a column", "EXPIRED_AT is a column"),
    ],
)
def test_first_line_escape(first: str, escaped: str) -> None:
    assert escape_first_line(first) == escaped


@pytest.mark.parametrize(
    "reason, shown",
    [
        ("plain", "plain"),
        ("(a)", "\\(a\\)"),
        ("C:\\dir\\", "C:\\\\dir\\\\"),
        ("\\(", "\\\\\\("),
        ("two\nlines\r\n  and\ttabs ", "two lines and tabs"),
        ("a · b", "a · b"),
    ],
)
def test_reason_escape(reason: str, shown: str) -> None:
    assert escape_reason(reason) == shown
    assert unescape_reason(shown) == " ".join(reason.split())


# -- what CommonMark makes of it -------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(note_sets(max_notes=10, disputes=True))
def test_commonmark_sees_seven_headings_and_one_item_per_note(notes: list[Note]) -> None:
    """The markdown-level proof that a text cannot forge a note: whatever a text holds
    (headings, list items, fences, HTML, conflict markers), a CommonMark parser sees the
    seven sections in order and exactly the notes' items, each under its kind."""
    text = render(notes, MEMORY)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN.glob("*.jsonl")))
def test_commonmark_outline_of_goldens(case: str) -> None:
    memory, notes = logged_notes(GOLDEN / f"{case}.jsonl")
    text = render(notes, memory)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


def test_commonmark_outline_of_the_corpus() -> None:
    memory, notes = corpus_notes()
    text = render(notes, memory)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


def test_render_does_not_touch_its_input() -> None:
    notes = [note(2), note(1, "directive")]
    before = [x._replace() for x in notes]
    render(notes, MEMORY)
    assert notes == before

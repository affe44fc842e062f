"""The renderer: a total order of its own, fixed sections, the item grammar, and a file
that CommonMark reads as seven headings with one list item per note.

The order tests feed notes in shuffled orders with real ties (notes created in the same
second, in the same section), since a sort that is only stable on already-sorted input
passes every test that renders a list it got from an ordered query.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qem_edit.dump import read_dump
from qem_edit.model import KINDS, Note, replay, sort_key

from _render_support import (
    CORPUS,
    CORPUS_MD,
    GOLDEN,
    check_column_zero_rule,
    expected_outline,
    markdown_outline,
    note_sets,
)
from qem_edit.renderer import Selection, render
from qem_edit.renderer.format import SECTION_TITLES, escape_first_line, escape_reason, unescape_reason
from qem_edit.renderer.render import header_line, render_item

T = "2026-06-01T12:00:00Z"  # one second, shared by every note of the tie tests


def note(note_id: int, kind: str = "finding", text: str = "x", **kw) -> Note:
    fields = dict(priority="medium", provenance="agent", created_at=T, actor="a")
    fields.update(kw)
    return Note(note_id, kind, fields.pop("priority"), text, fields.pop("provenance"), fields.pop("created_at"), fields.pop("actor"), **fields)


def corpus_notes() -> tuple[int, list[Note]]:
    if not CORPUS.exists():
        pytest.skip("fixtures/corpus-749.jsonl is not there")
    events = read_dump(CORPUS.read_bytes(), str(CORPUS))
    return events[-1].seq, list(replay(events).values())


# -- order -----------------------------------------------------------------------------------


def test_ties_in_one_section_come_out_by_id_whatever_the_input_order() -> None:
    notes = [note(i, text=f"note {i}") for i in (5, 3, 9, 1, 7)]
    expected = [1, 3, 5, 7, 9]
    for seed in range(20):
        random.Random(seed).shuffle(notes)
        text = render(notes, 1)
        ids = [int(line.split("]")[0][4:]) for line in text.split("\n") if line.startswith("- [#")]
        assert ids == expected, f"input order {[n.id for n in notes]}"


def test_kind_rank_comes_before_id() -> None:
    notes = [note(1, "operational"), note(2, "directive"), note(3, "gotcha"), note(4, "directive")]
    lines = [line[:6] for line in render(notes, 1).split("\n") if line.startswith(("## ", "- [#"))]
    assert lines == [
        "## Dir", "- [#2]", "- [#4]", "## Tas", "## Got", "- [#3]", "## Fin", "## Ref", "## Dec",
        "## Ope", "- [#1]",
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(note_sets(max_notes=12), st.randoms(use_true_random=False))
def test_input_order_is_irrelevant(notes: list[Note], rnd: random.Random) -> None:
    """The renderer sorts for itself: a query that returned rows in any order (no ORDER BY,
    a VACUUM, another SQLite) renders the same bytes."""
    expected = render(sorted(notes, key=sort_key), 3)
    shuffled = list(notes)
    rnd.shuffle(shuffled)
    assert render(shuffled, 3) == expected
    assert render(reversed(shuffled), 3) == expected  # any iterable, even a one-shot one


def test_corpus_in_shuffled_orders_renders_the_committed_file() -> None:
    head, notes = corpus_notes()
    if not CORPUS_MD.exists():
        pytest.skip("fixtures/MEMORY-749.md is not generated yet (QEM_UPDATE_GOLDEN=1)")
    expected = CORPUS_MD.read_text("utf-8")
    ties = len(notes) - len({n.created_at for n in notes})
    assert ties > 0, "the corpus must hold same-second notes for this test to mean anything"
    for seed in range(5):
        random.Random(seed).shuffle(notes)
        assert render(notes, head) == expected
    # the same notes ordered by time (ties in reverse id order) still render by id
    assert render(sorted(notes, key=lambda n: (n.created_at, -n.id)), head) == expected


# -- sections and header ---------------------------------------------------------------------


def test_an_empty_store_has_the_header_and_all_seven_sections() -> None:
    text = render([], 0)
    assert text == header_line(0) + "\n\n" + "\n\n".join(f"## {t}" for t in SECTION_TITLES.values()) + "\n"
    assert list(SECTION_TITLES) == list(KINDS)
    assert [t for t in SECTION_TITLES.values()] == [
        "Directives", "Tasks", "Gotchas", "Findings", "References", "Decisions", "Operational",
    ]


def test_header_line() -> None:
    assert header_line(42) == (
        "<!-- qem base=42 · generated from the qem note store; change notes with `qem edit`,"
        " or edit this file and run `qem checkin` -->"
    )
    scoped = header_line(42, Selection(kinds=("task", "gotcha"), active_only=True))
    assert scoped.startswith("<!-- qem base=42 kinds=task,gotcha active · ")


def test_file_layout_blank_lines_and_final_newline() -> None:
    text = render([note(1, "task", "a\n\nb"), note(2, "task")], 9)
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert "\r" not in text
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert "## Tasks\n\n- [#1] 2026-06-01 · medium · agent · a\n\n  b\n- [#2] 2026-06-01 · medium · agent · x\n\n## Gotchas\n" in text


# -- items -----------------------------------------------------------------------------------

D = "2026-07-01T08:30:00Z"


@pytest.mark.parametrize(
    "n, line",
    [
        (note(1), "- [#1] 2026-06-01 · medium · agent · x"),
        (note(2, priority="high", provenance="user-stated"), "- [#2] 2026-06-01 · high · user-stated · x"),
        (note(3, state="stale", state_at=D, state_reason="why"), "- [#3] 2026-06-01 · medium · agent · STALE 2026-07-01 (why) · x"),
        (note(4, state="revoked", state_at=D, state_reason="a (b) \\c"), "- [#4] 2026-06-01 · medium · agent · REVOKED 2026-07-01 (a \\(b\\) \\\\c) · x"),
        (note(5, state="expired", state_at=D), "- [#5] 2026-06-01 · medium · agent · EXPIRED 2026-07-01 · x"),
        (note(6, state="expired", state_at=D, state_reason=" \n\t "), "- [#6] 2026-06-01 · medium · agent · EXPIRED 2026-07-01 · x"),
        (note(7, state="superseded", superseded_by=8, state_at=D, state_reason="line\nbreak"), "- [#7] 2026-06-01 · medium · agent · SUPERSEDED by #8 2026-07-01 (line break) · x"),
        (note(8, supersedes=7), "- [#8] 2026-06-01 · medium · agent · supersedes #7 · x"),
        (note(9, state="revoked", state_at=D, supersedes=2), "- [#9] 2026-06-01 · medium · agent · REVOKED 2026-07-01 · supersedes #2 · x"),
        (note(10, text=None, state="forgotten", state_at=D), "- [#10] FORGOTTEN 2026-07-01"),
        (note(11, state="active", state_at=D, state_reason="reinstated"), "- [#11] 2026-06-01 · medium · agent · x"),
        (note(12, text="REVOKED is a word"), "- [#12] 2026-06-01 · medium · agent · \\REVOKED is a word"),
        (note(13, text="\\n is not a newline"), "- [#13] 2026-06-01 · medium · agent · \\\\n is not a newline"),
        (note(14, text="supersedes #1"), "- [#14] 2026-06-01 · medium · agent · \\supersedes #1"),
        (note(15, text="REVOKEDLY not a marker word"), "- [#15] 2026-06-01 · medium · agent · REVOKEDLY not a marker word"),
        (note(16, text="two\n  lines\n\n\tand a tab"), "- [#16] 2026-06-01 · medium · agent · two\n    lines\n\n  \tand a tab"),
        (note(17, provenance="human", created_at="2026-12-31T23:59:59Z"), "- [#17] 2026-12-31 · medium · human · x"),
    ],
)
def test_item_lines(n: Note, line: str) -> None:
    assert "\n".join(render_item(n)) == line


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
    text = render(notes, 5)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN.glob("*.jsonl")))
def test_commonmark_outline_of_goldens(case: str) -> None:
    events = read_dump((GOLDEN / f"{case}.jsonl").read_bytes(), case)
    notes = list(replay(events).values())
    text = render(notes, events[-1].seq if events else 0)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


def test_commonmark_outline_of_the_corpus() -> None:
    head, notes = corpus_notes()
    text = render(notes, head)
    assert markdown_outline(text) == expected_outline(notes)
    check_column_zero_rule(text, notes)


def test_render_does_not_touch_its_input() -> None:
    notes = [note(2), note(1, "directive")]
    before = [replace(n) for n in notes]
    render(notes, 1)
    assert notes == before

"""The block-level shortcut of a check-in gives the plan a full parse gives.

`reconciler.blocks.diff_edit` parses only the blocks an edit changed; `proposal.propose`
uses it whenever the base rendering is at hand.  These tests hold it to the full parse on
random stores and random edits, including the awkward ones (moved items, duplicated
items, stray lines, blank lines, editor noise, invalid UTF-8).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qem_edit.reconciler.blocks import _diff_whole, diff_edit
from qem_edit.reconciler.parse import parse
from qem_edit.reconciler.plan import make_plan
from qem_edit.renderer import render

from qem_edit.base import ids
from qem_edit.base.replay import Note
from qem_edit.base.vocabulary import KINDS, PRIORITIES

TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    min_size=1,
    max_size=40,
).map(lambda t: "\n".join(line.rstrip() for line in t.split("\n")).strip("\n") or "x")


MEMORY = "m7"  # the memory id the renderings name


def _store(seed: int, size: int) -> dict[str, Note]:
    """`size` notes by full id (ids drawn from `seed`), each with the short id a store
    would show it by."""
    rng = random.Random(seed)
    notes: dict[str, Note] = {}
    for number in range(1, size + 1):
        note_id = ids.encode(rng.randbytes(17))
        state = rng.choice(["active"] * 6 + ["stale", "revoked", "expired", "forgotten"])
        text = None if state == "forgotten" else rng.choice(
            ["alpha", "beta\n  gamma", "## Directives", "- [#99] forged", "- [#k3f9] forged", "a\n\nb",
             "REVOKED x", "é 日本"]
        ) + f" {number}"
        notes[note_id] = Note(
            note_id, rng.choice(KINDS), rng.choice(PRIORITIES), text, "agent",
            "2026-05-04T08:00:00Z", "a", state=state,
            state_at=None if state == "active" else "2026-06-01T00:00:00Z",
        )
    shorts = ids.short_ids({note_id: ids.MIN_SHORT for note_id in notes})
    return {note_id: note._replace(short=shorts[note_id]) for note_id, note in notes.items()}


EDITS = ("delete", "change", "move", "add", "duplicate", "stray", "blank", "priority", "stale", "crlf", "bom", "swap")


def _edit(text: str, rng: random.Random, steps: int) -> str:
    lines = text.split("\n")
    for _ in range(steps):
        items = [i for i, line in enumerate(lines) if line.startswith("- [#")]
        headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
        action = rng.choice(EDITS)
        if not items:
            action = "add"
        i = rng.choice(items) if items else 0
        if action == "delete":
            del lines[i]
        elif action == "change":
            lines[i] = lines[i] + " changed"
        elif action == "move":
            line = lines.pop(i)
            lines.insert(rng.choice(headings) + 1, line)
        elif action == "add":
            lines.insert(rng.choice(headings) + 1, f"- a new note {rng.random():.6f}")
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "stray":
            lines.insert(i + 1, "stray words at column zero")
        elif action == "blank":
            lines.insert(i + 1, "")
        elif action == "priority":
            lines[i] = lines[i].replace(" · medium · ", " · high · ", 1)
        elif action == "stale":
            head, sep, tail = lines[i].partition(" · agent · ")
            if sep and not tail.startswith(("REVOKED", "STALE", "EXPIRED")):
                lines[i] = head + sep + "STALE (looks old) · " + tail
        elif action == "swap" and len(items) > 1:
            j = rng.choice(items)
            lines[i], lines[j] = lines[j], lines[i]
    out = "\n".join(lines)
    if "crlf" in EDITS and rng.random() < 0.1:
        out = out.replace("\n", "\r\n")
    if rng.random() < 0.1:
        out = "\ufeff" + out
    return out


def _outcome(plan):
    return (
        sorted((op.action, op.note_id or "", repr(op.content), op.reason or "") for op in plan.ops),
        sorted(c.note_id for c in plan.conflicts),
        bool(plan.errors),
    )


def _both(notes: dict[str, Note], base_text: str, edited: str):
    full = parse(edited)
    if full.memory is None:
        return None
    by_short = {note.shown: note for note in notes.values()}  # as the base shows them
    whole = make_plan(full, by_short, notes, {})
    diff = diff_edit(base_text.encode("utf-8"), edited.encode("utf-8"))
    if diff is None:
        return None  # the shortcut declined: the full parse is used, nothing to compare
    partial = make_plan(diff.parsed, by_short, notes, {}, removed=diff.removed)
    return whole, partial


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), size=st.integers(0, 25), steps=st.integers(0, 6))
def test_the_shortcut_plans_what_a_full_parse_plans(seed, size, steps):
    notes = _store(seed, size)
    base_text = render(notes.values(), MEMORY)
    edited = _edit(base_text, random.Random(seed * 31 + steps), steps)
    both = _both(notes, base_text, edited)
    if both is None:
        return
    whole, partial = both
    _agree(whole, partial)


def _agree(whole, partial):
    """Both refuse, or both plan the same events and conflicts.  (A refused edit writes
    nothing, so what else each would have planned does not matter; which copy of a
    duplicated item is named can differ.)"""
    assert bool(partial.errors) == bool(whole.errors), (partial.errors, whole.errors)
    if not whole.errors:
        assert _outcome(partial) == _outcome(whole)


@settings(max_examples=100, deadline=None)
@given(text=TEXTS)
def test_any_new_text_is_read_the_same_way(text):
    notes = _store(3, 8)
    base_text = render(notes.values(), MEMORY)
    body = text.split("\n")
    new_item = "\n".join(["- " + body[0]] + ["  " + line if line else "" for line in body[1:]])
    edited = base_text.replace("## Findings\n", "## Findings\n\n" + new_item + "\n", 1)
    both = _both(notes, base_text, edited)
    if both is not None:
        whole, partial = both
        _agree(whole, partial)


def test_an_unchanged_file_parses_nothing():
    notes = _store(5, 200)
    base_text = render(notes.values(), MEMORY)
    diff = diff_edit(base_text.encode(), base_text.encode())
    assert diff is not None
    assert diff.parsed.items == [] and diff.removed == set() and diff.parsed.errors == []


def test_only_the_changed_blocks_are_parsed_and_lines_are_real():
    notes = _store(6, 300)
    base_text = render(notes.values(), MEMORY)
    lines = base_text.split("\n")
    target = next(i for i, line in enumerate(lines) if line.startswith("- [#") and " · agent · " in line
                  and not any(w in line for w in ("REVOKED", "STALE", "EXPIRED", "FORGOTTEN")))
    lines[target] += " edited"
    diff = diff_edit(base_text.encode(), "\n".join(lines).encode())
    assert diff is not None
    assert [item.line for item in diff.parsed.items] == [target + 1]


def test_invalid_utf8_in_a_changed_block_names_its_line():
    notes = _store(7, 30)
    base = render(notes.values(), MEMORY).encode()
    lines = base.split(b"\n")
    target = next(i for i, line in enumerate(lines) if line.startswith(b"- [#"))
    lines[target] += b" \xff\xfe"
    diff = diff_edit(base, b"\n".join(lines))
    assert diff is not None
    assert [e.line for e in diff.parsed.errors] == [target + 1]
    assert "UTF-8" in diff.parsed.errors[0].message


@pytest.mark.parametrize("edit", ["duplicate", "move", "stray"])
def test_awkward_edits_agree_with_the_full_parse(edit):
    notes = _store(11, 40)
    base_text = render(notes.values(), MEMORY)
    lines = base_text.split("\n")
    i = next(i for i, line in enumerate(lines) if line.startswith("- [#"))
    if edit == "duplicate":
        lines.insert(i, lines[i])
    elif edit == "move":
        lines.append(lines.pop(i))
    else:
        lines.insert(i + 1, "a stray line")
    both = _both(notes, base_text, "\n".join(lines))
    if both is not None:
        whole, partial = both
        _agree(whole, partial)


def _summary(diff):
    if diff is None:
        return None
    return ([(i.line, i.note_id, i.raw) for i in diff.parsed.items], [str(e) for e in diff.parsed.errors],
            sorted(diff.removed))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), size=st.integers(0, 25), steps=st.integers(0, 6), chunk=st.integers(1, 400))
def test_the_base_read_a_chunk_at_a_time_gives_the_whole_comparison(seed, size, steps, chunk):
    """Whatever the chunks (a block, a separator or the header straddling a chunk's end),
    the streamed comparison finds what the comparison of the whole files finds."""
    notes = _store(seed, size)
    base = render(notes.values(), MEMORY).encode()
    edited = _edit(base.decode(), random.Random(seed * 31 + steps), steps).encode()
    streamed = diff_edit(lambda: (base[i:i + chunk] for i in range(0, len(base), chunk)), edited)
    whole = _diff_whole(lambda: [base], edited)
    if streamed is not None and whole is not None:
        assert _summary(streamed) == _summary(whole)
    if streamed is not None:  # and it plans what a full parse plans
        full = parse(edited.decode("utf-8", "replace"))
        by_short = {note.shown: note for note in notes.values()}
        _agree(make_plan(full, by_short, notes, {}),
               make_plan(streamed.parsed, by_short, notes, {}, removed=streamed.removed))


def _chunked(data: bytes, size: int):
    return lambda: (data[i:i + size] for i in range(0, len(data), size))


def _items(text: str) -> tuple[list[str], list[int]]:
    lines = text.split("\n")
    return lines, [i for i, line in enumerate(lines) if line.startswith("- [#")]


@pytest.mark.parametrize("size", [1, 3, 50, 4096])
def test_a_block_moved_far_within_its_section_is_no_change(size):
    notes = _store(21, 300)
    base = render(notes.values(), MEMORY)
    lines, items = _items(base)
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    first, last = next((a, b) for a, b in zip(headings, headings[1:] + [len(lines)])
                       if sum(a < i < b for i in items) > 20)
    section = [i for i in items if first < i < last and not lines[i + 1].startswith("  ")]
    lines.insert(section[-1] + 1, lines.pop(section[0]))  # the section's first item, moved to its end
    diff = diff_edit(_chunked(base.encode(), size), "\n".join(lines).encode())
    assert diff is not None
    assert diff.parsed.items == [] and diff.removed == set() and diff.parsed.errors == []


@pytest.mark.parametrize("size", [7, 64, 1 << 20])
def test_a_section_moved_whole_agrees_with_the_whole_comparison(size):
    notes = _store(22, 200)
    base = render(notes.values(), MEMORY)
    start = base.index("\n## ", base.index("\n## ") + 1)  # the second section, moved to the end
    end = base.index("\n## ", start + 1)
    help_at = base.find("\n<!--", end)
    stop = help_at if help_at >= 0 else len(base.rstrip("\n"))
    edited = base[:start] + base[end:stop] + base[start:end] + base[stop:]
    streamed = diff_edit(_chunked(base.encode(), size), edited.encode())
    assert streamed is not None
    assert _summary(streamed) == _summary(_diff_whole(lambda: [base.encode()], edited.encode()))


@pytest.mark.parametrize("size", [5, 200, 1 << 20])
def test_an_item_copied_far_from_itself_is_refused_as_the_full_parse_refuses_it(size):
    notes = _store(23, 300)
    base = render(notes.values(), MEMORY)
    lines, items = _items(base)
    single = [i for i in items if not lines[i + 1].startswith("  ")]
    lines.insert(single[-1], lines[single[-1]])  # an item twice, alike, next to itself: no shortcut
    assert diff_edit(_chunked(base.encode(), size), "\n".join(lines).encode()) is None
    lines, items = _items(base)
    lines.insert(single[-1], lines[single[1]])  # an early item copied far down its section, or another
    edited = "\n".join(lines)
    diff = diff_edit(_chunked(base.encode(), size), edited.encode())
    full = parse(edited)
    by_short = {note.shown: note for note in notes.values()}
    whole = make_plan(full, by_short, notes, {})
    assert whole.errors
    if diff is not None:
        partial = make_plan(diff.parsed, by_short, notes, {}, removed=diff.removed)
        assert partial.errors


@pytest.mark.parametrize("size", [1, 2, 3, 4, 9])
def test_a_change_straddling_every_chunk_end_names_its_real_line(size):
    notes = _store(24, 60)
    base = render(notes.values(), MEMORY)
    lines, items = _items(base)
    target = items[len(items) // 2]
    lines[target] += " edited"
    diff = diff_edit(_chunked(base.encode(), size), "\n".join(lines).encode())
    assert diff is not None
    assert [item.line for item in diff.parsed.items] == [target + 1]
    assert diff.removed == {lines[target][4:lines[target].index("]")]}


@pytest.mark.parametrize("size", [3, 1 << 20])
def test_a_new_item_written_twice_declines_as_the_whole_comparison_does(size):
    notes = _store(25, 80)
    base = render(notes.values(), MEMORY)
    assert "## Findings\n\n- [#" in base
    edited = base.replace("## Findings\n\n", "## Findings\n\n- the same new note\n- the same new note\n", 1)
    assert _diff_whole(lambda: [base.encode()], edited.encode()) is None
    assert diff_edit(_chunked(base.encode(), size), edited.encode()) is None


def _heads_of(data: bytes) -> list[int]:
    out, at = [], data.find(b"\n## ")
    while at >= 0:
        out.append(at)
        at = data.find(b"\n## ", at + 4)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), size=st.integers(0, 25), steps=st.integers(0, 6), chunk=st.integers(1, 400))
def test_the_headings_a_checkout_recorded_give_what_searching_for_them_gives(seed, size, steps, chunk):
    """With the base's heading offsets known (a checkout records them), the stretches both
    sides hold alike are not searched, and the comparison finds exactly what it finds by
    searching."""
    notes = _store(seed, size)
    base = render(notes.values(), MEMORY).encode()
    edited = _edit(base.decode(), random.Random(seed * 31 + steps), steps).encode()
    searched = diff_edit(_chunked(base, chunk), edited)
    known = diff_edit(_chunked(base, chunk), edited, heads=_heads_of(base))
    assert _summary(known) == _summary(searched)


@pytest.mark.parametrize("size", [7, 64, 4096])
def test_headings_recorded_for_another_file_decline_rather_than_mislead(size):
    """Offsets that are not where the file's headings are (the base rewritten since they
    were recorded) are found out where the walk uses them: the full parse decides."""
    notes = _store(5, 120)
    base = render(notes.values(), MEMORY).encode()
    lines, items = _items(base.decode())
    lines[items[-1]] += " (edited)"
    edited = "\n".join(lines).encode()
    wrong = [at + 1 for at in _heads_of(base)]
    assert diff_edit(_chunked(base, size), edited, heads=wrong) is None
    assert diff_edit(_chunked(base, size), edited, heads=_heads_of(base)) is not None

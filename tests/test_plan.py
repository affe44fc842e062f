"""The reconciler in-process: parse, rebase, and properties of planning + applying on
random stores and random edits.  What each edit plans (two-way and three-way), and every
refusal with its exact lines, is a check-in case: fixtures/checkin/, run by
test_checkin_cases.py."""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from builders import CASES, add, emit, full_id, load_store, render_text, shown
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from qem_edit.reconciler.parse import clean_lines, parse
from qem_edit.reconciler.rebase import with_errors
from qem_edit.renderer import render_item
from qem_edit.renderer.format import SECTION_TITLES, SEP, escape_first_line

from qem_edit.base.decisions import NewNote
from qem_edit.base.replay import replay
from qem_edit.base.stored_form import normalize_text
from qem_edit.base.vocabulary import KINDS, LIVE_STATES, PRIORITIES
from qem_edit.mirror.verify import verify_report
from qem_edit.storage.store import Store
from qem_edit.storage.transaction import Transaction
from qem_edit.writes import checkin
from qem_edit.writes.checkin_plan import Proposal, propose, whole

AT = "2026-05-04T08:00:00Z"


def actions(plan) -> list[tuple[str, str | None]]:
    return [(op.action, op.note_id) for op in plan.ops]


def drop_line(text: str, fragment: str) -> str:
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if fragment in line]
    assert len(hits) == 1, (fragment, text)
    return "\n".join(lines[: hits[0]] + lines[hits[0] + 1:])


@pytest.fixture
def small(tmp_path: Path):
    """The store of fixtures/checkin/small.jsonl (numbered; each note keeps its number as
    its alias): #1 gotcha "alpha lock order", #2 finding · low "beta cache", #3 task "gamma
    task", #4 gotcha "delta old" (revoked: wrong), #5 finding "epsilon" (stale: check); 7
    events."""
    with load_store(tmp_path / ".qem", CASES / "small.jsonl") as store:
        yield store


# -- parse ---------------------------------------------------------------------------------------


def test_editor_noise_is_not_content(small: Store) -> None:
    text = render_text(small)[1]
    noisy = "\ufeff" + "\r\n".join(line + " \t" for line in text.split("\n")) + "\r\n\r\n"
    assert clean_lines(noisy) == clean_lines(text)
    assert [(i.note_id, i.text, i.state) for i in parse(noisy).items] == [(i.note_id, i.text, i.state) for i in parse(text).items]


def test_parse_new_items_markers_and_escapes(small: Store) -> None:
    text = render_text(small)[1].replace(
        "## Tasks\n",
        "## Tasks\n\n- plain\n- high · urgent\n  second line\n\n  after a blank\n- low · \\STALE is a word\n- \\[#3] not an id\n",
    )
    parsed = parse(text)
    assert parsed.ok, parsed.errors
    new = [(i.kind, i.priority, i.text, i.provenance) for i in parsed.items if i.note_id is None]
    assert new == [
        ("task", "medium", "plain", "human"),
        ("task", "high", "urgent\nsecond line\n\nafter a blank", "human"),
        ("task", "low", "STALE is a word", "human"),
        ("task", "medium", "[#3] not an id", "human"),
    ]
    revoked = next(i for i in parsed.items if i.note_id == shown(small, 4))
    assert (revoked.state, revoked.state_reason, revoked.text) == ("revoked", "wrong", "delta old")


def test_parse_strips_qems_error_comment(small: Store) -> None:
    text = render_text(small)[1]
    commented = with_errors(text, ["line 3: something --> odd", "conflict on #1"])
    assert "<!-- qem:errors" in commented and "- ->" in commented
    def items(t):
        return [replace(i, line=0) for i in parse(t).items]

    assert items(commented) == items(text) and parse(commented).ok
    # a second round replaces the comment instead of stacking another
    again = with_errors(commented, ["only this"])
    assert again.count("<!-- qem:errors") == 1 and "conflict on #1" not in again and "only this" in again


# -- rebase ---------------------------------------------------------------------------------------


def _conflicted(store: Store) -> tuple[str, str]:
    """An edit that conflicts on #1 (revoked meanwhile) and changes three other things,
    rebased on the store now; and the id of a note another writer created meanwhile."""
    base_text = render_text(store)[1]
    text = base_text.replace("alpha lock order", "alpha v2")  # conflicts
    text = text.replace("beta cache", "beta cache is cold")  # merges
    text = drop_line(text, "gamma task")  # merges
    text = text.replace("## Decisions\n", "## Decisions\n\n- high · a new decision\n")
    emit(store, 1, "revoked", "they disagree", actor="other", at=AT)
    theirs = add(store, "their note", "task", actor="other", at=AT)
    proposal = propose(store, text, base_text)
    assert [c.note_id for c in proposal.plan.conflicts] == [full_id(store, 1)]
    rebased, _ = checkin.rebased(store, proposal, checkin.problems(proposal))
    return rebased, theirs


def test_rebase_marks_the_conflict_and_keeps_the_rest(small: Store) -> None:
    rebased, theirs = _conflicted(small)
    lines = rebased.split("\n")
    assert lines[0].startswith(f"<!-- qem memory={small.memory_id()} ")
    assert lines[1].startswith("<!-- qem:errors") and f"conflict on #{shown(small, 1)}:" in rebased
    marks = [line.split()[0] for line in lines if line[:7] in ("<<<<<<<", "|||||||", "=======", ">>>>>>>")]
    assert marks == ["<<<<<<<", "|||||||", "=======", ">>>>>>>"]
    yours = rebased[rebased.index("<<<<<<<"):rebased.index("|||||||")]
    store = rebased[rebased.index("======="):rebased.index(">>>>>>>")]
    assert "alpha v2" in yours and "REVOKED" in store and "they disagree" in store
    assert "beta cache is cold" in rebased and "gamma task" not in rebased
    assert rebased.count("a new decision") == 1 and f"[#{shown(small, theirs)}]" in rebased
    # markers are refused until resolved
    assert any("conflict marker" in str(e) for e in parse(rebased).errors)


@pytest.mark.parametrize("keep", ["yours", "theirs"])
def test_a_resolved_rebase_checks_in(small: Store, keep: str) -> None:
    rebased, theirs = _conflicted(small)
    out, side = [], None
    for line in rebased.split("\n"):
        mark = {"<<<<<<<": "yours", "|||||||": "base", "=======": "theirs", ">>>>>>>": None}.get(line[:7], "-")
        if mark != "-":
            side = mark
        elif side in (None, keep):
            out.append(line)
    plan = propose(small, "\n".join(out)).plan
    assert plan.ok, (plan.errors, plan.conflicts)
    got = sorted(actions(plan), key=str)
    one, two, three = (full_id(small, n) for n in (1, 2, 3))
    expected = [("create", None), ("revoke", three), ("supersede", two)]
    if keep == "yours":  # bring the revoked note back with your text
        expected += [("reinstate", one), ("supersede", one)]
    assert got == sorted(expected, key=str)


# -- properties: random stores, random edits, plan + apply + replay -----------------------------

WORDS = ["REVOKED", "STALE", "EXPIRED", "SUPERSEDED", "FORGOTTEN", "supersedes", "DISPUTED", "##", "-", "·",
         "[#3]", "\\", "<<<<<<<", "=======", "high", "(x)", "<!--", "-->", "é", "✅", "`code`"]
text_part = st.one_of(st.sampled_from(WORDS), st.text(alphabet="abcXYZ 019#[]()·-\\\t*>", min_size=1, max_size=8))
line_st = st.lists(text_part, min_size=1, max_size=4).map(" ".join)
raw_text = st.lists(st.one_of(line_st, st.just("")), min_size=1, max_size=3).map("\n".join)


def _normal(raw: str) -> str | None:
    try:
        return normalize_text(raw)
    except Exception:
        return None


text_st = raw_text.map(_normal).filter(lambda t: t is not None)
reason_st = st.sampled_from(["why", "a (b) c", "back\\slash", "x"])
FATES = ["active", "active", "stale", "revoked", "expired", "superseded", "forgotten", "reinstated", "promoted"]

note_st = st.tuples(st.sampled_from(KINDS), st.sampled_from(PRIORITIES),
                    st.sampled_from(["auto", "agent", "user-stated", "human"]), text_st, st.sampled_from(FATES), reason_st, text_st)


# Hypothesis builds a store per example: on tmpfs that is ~3 ms, on a disk with fsync ~80 ms.
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def build_store(path: Path, specs) -> Store:
    store = Store.open(path, create=True)

    def work(tx: Transaction) -> None:
        for kind, priority, provenance, text, fate, reason, other_text in specs:
            note = tx.create(NewNote(kind, priority, provenance, text), "agent")
            if fate in ("stale", "revoked", "expired", "reinstated"):
                tx.emit(note.id, {"stale": "stale_flagged", "reinstated": "revoked"}.get(fate, fate), "agent", reason)
            if fate == "reinstated":
                tx.emit(note.id, "reinstated", "agent", None)
            if fate == "superseded":
                tx.create(NewNote(kind, priority, provenance, other_text, note.id), "agent", reason)
            if fate == "forgotten":
                tx.forget(note.id, "agent", reason)
            if fate == "promoted" and note.provenance != "human":
                tx.emit(note.id, "promoted", "agent", None)

    store.write(work)
    return store


def creation_order(store: Store) -> list[str]:
    """The notes' full ids in the order they were created (their ids are random, so an
    order by id would make Hypothesis draw differently for one example)."""
    return [e.note for e in store.events() if e.type == "created"]


def plan(store: Store, edited: str, checkout: str, data) -> Proposal:
    """Plan the check-in the quick way (only the changed blocks parsed) or, drawn at
    random, the whole-file way; both must give the same plan."""
    if data.draw(st.booleans(), label="whole-file parse"):
        return whole(store, propose(store, edited, checkout))
    return propose(store, edited, checkout)


def blocks_of(text: str) -> tuple[str, dict[str, list[list[str]]]]:
    """The rendered file as its header line and, per section, its items' lines."""
    lines = text.rstrip("\n").split("\n")
    sections: dict[str, list[list[str]]] = {}
    current = None
    for line in lines[1:]:
        if line.startswith("## "):
            current = sections.setdefault(line[3:], [])
        elif line.startswith("- "):
            current.append([line])
        elif current:  # an indented line, or a blank one, of the item above
            current[-1].append(line)
    # blank lines inside an item belong to it; blank lines after the last item do not
    for items in sections.values():
        for item in items:
            while item and item[-1] == "":
                item.pop()
    return lines[0], sections


def assemble(header: str, sections: dict[str, list[list[str]]], order: list[str]) -> str:
    out = [header, ""]
    for title in order:
        out += [f"## {title}", ""]
        for item in sections.get(title, []):
            out.extend(item)
        out.append("")
    return "\n".join(out)


EDITS_BY_STATE = {
    "active": ["keep", "delete", "text", "priority", "move", "stale", "promote"],
    "stale": ["keep", "delete", "text", "priority", "move", "reinstate", "promote"],
    "revoked": ["keep", "reinstate", "reinstate-text", "promote"],
    "expired": ["keep", "reinstate", "reinstate-text", "promote"],
    "superseded": ["keep", "promote"],
    "forgotten": ["keep"],
}


def new_item_lines(kind_priority_text) -> list[str]:
    _, priority, text = kind_priority_text
    first, *more = text.split("\n")
    return [f"- {priority}{SEP}{escape_first_line(first)}", *("  " + m if m else "" for m in more)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(specs=st.lists(note_st, min_size=1, max_size=7), data=st.data())
def test_planning_and_applying_gives_the_notes_the_edited_file_describes(specs, data) -> None:
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        store = build_store(Path(tmp) / ".qem", specs)
        with store:
            base, checkout = render_text(store)
            written = len(store.events())
            before = {n.id: n for n in store.notes()}
            shorts = {n.id: n.shown for n in before.values()}
            by_short = {short: note_id for note_id, short in shorts.items()}
            header, sections = blocks_of(checkout)
            blocks = {by_short[re.match(r"- \[#([0-9a-z]+)\]", item[0])[1]]: item
                      for items in sections.values() for item in items}
            assert set(blocks) == set(before)
            out: dict[str, list[list[str]]] = {title: [] for title in SECTION_TITLES.values()}
            expected_live: Counter = Counter()
            expected_state: dict[str, tuple[str, str]] = {}
            changed = False
            for number, note_id in enumerate(creation_order(store), start=1):
                note = before[note_id]
                edit = data.draw(st.sampled_from(EDITS_BY_STATE[note.state]), label=f"edit note {number}")
                kind, priority, text, state, provenance = note.kind, note.priority, note.text, note.state, note.provenance
                block = blocks[note_id]
                if edit == "delete":
                    expected_state[note_id] = ("revoked", provenance)
                    changed = True
                    continue
                if edit in ("text", "reinstate-text"):
                    text = data.draw(text_st.filter(lambda t: t != note.text), label="text")
                if edit == "priority":
                    priority = data.draw(st.sampled_from([p for p in PRIORITIES if p != note.priority]), label="priority")
                if edit == "move":
                    kind = data.draw(st.sampled_from([k for k in KINDS if k != note.kind]), label="kind")
                if edit == "stale":
                    state = "stale"
                if edit in ("reinstate", "reinstate-text"):
                    state = "active"
                if edit == "promote":
                    provenance = "human"
                if edit != "keep":
                    changed = changed or (edit != "promote" or note.provenance != "human")
                    stale_reason = data.draw(reason_st, label="reason") if edit == "stale" else note.state_reason
                    block = render_item(note._replace(kind=kind, priority=priority, text=text, state=state,
                                                provenance=provenance, state_reason=stale_reason,
                                                state_at=None if edit == "stale" else note.state_at), None, shorts)
                out[SECTION_TITLES[kind]].append(block)
                content_changed = (kind, priority, text) != (note.kind, note.priority, note.text)
                if content_changed:
                    # a successor is created (active, human); the old note is superseded
                    expected_live[(kind, priority, text, "active", "human")] += 1
                    expected_state[note_id] = ("superseded", provenance)
                else:
                    expected_state[note_id] = (state, provenance)
                    if state in LIVE_STATES:
                        expected_live[(kind, priority, text, state, provenance)] += 1
            for kind, priority, text in data.draw(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(PRIORITIES), text_st), max_size=3), label="new"):
                out[SECTION_TITLES[kind]].append(new_item_lines((kind, priority, text)))
                expected_live[(kind, priority, text, "active", "human")] += 1
                changed = True
            # reordering and editor noise, which must change nothing
            order = list(SECTION_TITLES.values())
            if data.draw(st.booleans(), label="shuffle"):
                order = data.draw(st.permutations(order), label="order")
                for title in out:
                    out[title] = data.draw(st.permutations(out[title]), label="items")
            edited = assemble(header, out, order)
            if data.draw(st.booleans(), label="trailing"):
                edited = edited.replace("\n", "  \n")
            if data.draw(st.booleans(), label="crlf"):
                edited = edited.replace("\n", "\r\n")
            if data.draw(st.booleans(), label="bom"):
                edited = "\ufeff" + edited

            planned = plan(store, edited, checkout, data)
            assert planned.plan.ok, (checkin.problems(planned), edited)
            if not changed:
                assert planned.plan.ops == [] and store.head() == base and len(store.events()) == written
                return
            assert planned.plan.ops
            checkin.apply_plan(store, planned.plan, "person", "property check-in")
            assert verify_report(store).problems == []
            after = {n.id: n for n in store.notes()}
            assert replay(store.events(), store.texts()) == {i: n._replace(short="") for i, n in after.items()}
            live = Counter((n.kind, n.priority, n.text, n.state, n.provenance) for n in after.values() if n.live)
            assert live == expected_live
            for note_id, (state, provenance) in expected_state.items():
                assert (after[note_id].state, after[note_id].provenance) == (state, provenance), note_id
            new_events = store.events()[written:]
            assert len({e.checkin for e in new_events}) == 1 and new_events[0].checkin
            # the result, rendered and parsed again, says the same
            _, rendered = render_text(store)
            reparsed = parse(rendered)
            assert reparsed.ok and reparsed.memory == store.memory_id()
            live_items = Counter((i.kind, i.priority, i.text, i.state, i.provenance) for i in reparsed.items if i.state in LIVE_STATES)
            assert live_items == expected_live
            # and checking that rendering in again is no change
            assert propose(store, rendered, rendered).plan.ops == []


OTHER_MOVES = {
    "active": ["revoked", "stale_flagged", "expired", "superseded", "forgotten", "promoted"],
    "stale": ["revoked", "reinstated", "expired", "superseded", "forgotten"],
    "revoked": ["reinstated", "forgotten"],
    "expired": ["reinstated", "forgotten"],
    "superseded": ["forgotten"],
    "forgotten": [],
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(note_st, min_size=2, max_size=6), data=st.data())
def test_others_changes_to_notes_you_left_alone_always_stand(specs, data) -> None:
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        store = build_store(Path(tmp) / ".qem", specs)
        with store:
            base, checkout = render_text(store)
            before = {n.id: n for n in store.notes()}
            shorts = {n.id: n.shown for n in before.values()}
            order = creation_order(store)
            live = [i for i in order if before[i].live]
            assume(live)
            mine = data.draw(st.sampled_from(live), label="my note")
            edited = checkout.replace(
                "\n".join(render_item(before[mine], None, shorts)) + "\n", "", 1
            )  # I delete one live note
            assert edited != checkout
            theirs = {}
            for number, note_id in enumerate(order, start=1):
                note = before[note_id]
                if note_id == mine:
                    continue
                move = data.draw(st.sampled_from(["none", *OTHER_MOVES[note.state]]), label=f"other note {number}")
                if move != "none":
                    theirs[note_id] = move

            def other(tx: Transaction) -> None:
                for note_id, move in theirs.items():
                    if move == "superseded":
                        tx.create(NewNote(before[note_id].kind, "low", "agent", "their successor", note_id), "other")
                    elif move == "forgotten":
                        tx.forget(note_id, "other", "gone")
                    elif move == "promoted":
                        if before[note_id].provenance != "human":
                            tx.emit(note_id, "promoted", "other", None)
                    else:
                        tx.emit(note_id, move, "other", "theirs")

            store.write(other)
            now = {n.id: n for n in store.notes()}
            planned = plan(store, edited, checkout, data)
            assert planned.plan.ok, checkin.problems(planned)
            assert [(op.action, op.note_id) for op in planned.plan.ops] == [("revoke", mine)]
            checkin.apply_plan(store, planned.plan, "person", "mine")
            after = {n.id: n for n in store.notes()}
            assert after[mine].state == "revoked"
            assert {i: n for i, n in after.items() if i != mine} == {i: n for i, n in now.items() if i != mine}


def test_apply_refuses_a_plan_made_against_an_older_head(tmp_path: Path) -> None:
    from qem_edit.base import errors

    spec = [("gotcha", "medium", "agent", "alpha lock order", "active", "why", "x")]
    with build_store(tmp_path / ".qem", spec) as store:
        [note_id] = [n.id for n in store.notes()]
        _, text = render_text(store)
        edited = text.replace("alpha lock order", "alpha lock order v2")
        planned = propose(store, edited, text)
        assert planned.plan.ok and actions(planned.plan) == [("supersede", note_id)]
        # another writer lands between planning and applying
        store.write(lambda tx: tx.emit(note_id, "promoted", "other", None))
        moved, written = store.head(), len(store.events())
        with pytest.raises(errors.HeadMoved):
            checkin.apply_plan(store, planned.plan, "person", "why")
        assert store.head() == moved and len(store.events()) == written  # nothing written
        # planned again against the store now, it is a conflict
        assert [c.note_id for c in propose(store, edited, text).plan.conflicts] == [note_id]


def test_the_error_comment_keeps_line_numbers_pointing_at_their_lines() -> None:
    from qem_edit.reconciler.rebase import with_errors

    text = "<!-- qem memory=m1 kinds=directive · x -->\n\n## Directives\n\nstray words\n"
    first = parse(text)
    assert [e.line for e in first.errors] == [5]
    reopened = with_errors(text, [str(e) for e in first.errors])
    lines = reopened.split("\n")
    [message] = [line for line in lines if line.startswith("line ")]
    number = int(message.split(":")[0].split()[1])
    assert lines[number - 1] == "stray words"
    # reopened again: the older comment is replaced, and the number still holds
    again = with_errors(reopened, [str(e) for e in parse(reopened).errors])
    assert again == reopened


@pytest.mark.parametrize("link", ["supersedes", "dispute"])
def test_a_note_added_beside_the_one_you_edit_is_no_conflict(tmp_path: Path, link: str) -> None:
    """A note another writer adds lands in the rendering right beside the item you edit;
    the block beside it moved, but the store shows your note as it did: no conflict.  (The
    item's links name notes the check-in does not read; it compared them by full id, and
    refused a supersession or a dispute's side as "changed".)  Ids are random, so stores
    are made until the new note lands right after yours."""
    beside = 0
    for trial in range(40):
        with Store.open(tmp_path / f"t{trial}" / ".qem", create=True) as store:
            other = add(store, "the parent", "finding", at=AT)
            if link == "supersedes":
                mine = add(store, "the successor", "finding", supersedes=other, at=AT)
            else:
                mine = add(store, "the successor", "finding", at=AT)
                store.write(lambda tx: tx.dispute(mine, other, "a", "they disagree"), at=AT)
            _, base = render_text(store)
            edited = base.replace("· the successor", "· the successor, edited")
            new = add(store, "their finding", "finding", actor="other", at=AT)
            _, now = render_text(store)
            lines = now.split("\n")
            at = next(i for i, line in enumerate(lines) if line.startswith(f"- [#{shown(store, mine)}]"))
            beside += lines[at + 1].startswith(f"- [#{shown(store, new)}]")
            proposal = propose(store, edited, base)
            assert proposal.plan.ok, checkin.problems(proposal)
            assert actions(proposal.plan) == [("supersede", mine)]
        if beside >= 3:
            break
    assert beside >= 3

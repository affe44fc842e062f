"""The reconciler in-process: parse, make_plan (two-way and three-way), rebase, and
properties of planning + applying on random stores and random edits."""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from qem_edit import checkin
from qem_edit.export import fill_forgotten_texts, rendering
from qem_edit.model import KINDS, LIVE_STATES, PRIORITIES, Event, Note, normalize_text, replay
from qem_edit.store import NewNote, Store, Transaction
from qem_edit.reconciler.parse import clean_lines, parse
from qem_edit.reconciler.plan import Content, make_plan
from qem_edit.reconciler.rebase import rebase, with_errors
from qem_edit.renderer import Selection, render, render_item
from qem_edit.renderer.format import SECTION_TITLES, SEP, escape_first_line

AT = "2026-05-04T08:00:00Z"
LATER = "2026-06-01T09:00:00Z"


class Log:
    """A hand-built event log (no store): notes are its replay."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    @property
    def head(self) -> int:
        return len(self.events)

    def _emit(self, note_id: int, type_: str, actor: str, reason=None, data=None, at=AT) -> None:
        self.events.append(Event(self.head + 1, note_id, type_, at, actor, reason, None, data or {}))

    def add(self, text: str, kind: str = "gotcha", priority: str = "medium", provenance: str = "agent",
            supersedes: int | None = None, actor: str = "agent", at: str = AT) -> int:
        note_id = max((e.note_id for e in self.events), default=0) + 1
        self._emit(note_id, "created", actor, None,
                   {"kind": kind, "priority": priority, "provenance": provenance, "text": text, "supersedes": supersedes}, at)
        if supersedes is not None:
            self._emit(supersedes, "superseded", actor, None, {"by": note_id}, at)
        return note_id

    def emit(self, note_id: int, type_: str, reason: str | None = None, actor: str = "agent", at: str = AT) -> None:
        data = {"from": self.notes()[note_id].provenance} if type_ == "promoted" else {}
        self._emit(note_id, type_, actor, reason, data, at)

    def forget(self, note_id: int, actor: str = "agent") -> None:
        self._emit(note_id, "forgotten", actor, "leaked", {}, LATER)
        self.events = [
            replace(e, data={**e.data, "text": None}) if e.note_id == note_id and e.type == "created" else e
            for e in self.events
        ]

    def notes(self, upto: int | None = None) -> dict[int, Note]:
        return replay(self.events[: self.head if upto is None else upto])

    def render(self, upto: int | None = None, selection: Selection = Selection()) -> str:
        base = self.head if upto is None else upto
        return render(self.notes(base).values(), base, selection)

    def plan(self, text: str, base_text: str | None = None):
        parsed = parse(text)
        assert parsed.base is not None
        base_notes = self.notes(parsed.base)
        if base_text is not None:  # texts forgotten since the base, from the base rendering
            fill_forgotten_texts(base_notes, base_text.encode("utf-8"))
        return make_plan(parsed, base_notes, self.notes(), self.events[parsed.base:], self.head), parsed, base_notes


def actions(plan) -> list[tuple[str, int | None]]:
    return [(op.action, op.note_id) for op in plan.ops]


def drop_line(text: str, fragment: str) -> str:
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if fragment in line]
    assert len(hits) == 1, (fragment, text)
    return "\n".join(lines[: hits[0]] + lines[hits[0] + 1:])


@pytest.fixture
def log() -> Log:
    log = Log()
    log.add("alpha lock order")  # 1 gotcha
    log.add("beta cache", kind="finding", priority="low")  # 2
    log.add("gamma task", kind="task")  # 3
    log.add("delta old")  # 4, revoked
    log.emit(4, "revoked", "wrong")
    log.add("epsilon", kind="finding")  # 5, stale
    log.emit(5, "stale_flagged", "check")
    return log


# -- parse ---------------------------------------------------------------------------------------


def test_editor_noise_is_not_content(log: Log) -> None:
    text = log.render()
    noisy = "\ufeff" + "\r\n".join(line + " \t" for line in text.split("\n")) + "\r\n\r\n"
    assert clean_lines(noisy) == clean_lines(text)
    assert [(i.note_id, i.text, i.state) for i in parse(noisy).items] == [(i.note_id, i.text, i.state) for i in parse(text).items]
    plan, _, _ = log.plan(noisy)
    assert plan.ok and plan.ops == []


def test_parse_new_items_markers_and_escapes(log: Log) -> None:
    text = log.render().replace(
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
    revoked = next(i for i in parsed.items if i.note_id == 4)
    assert (revoked.state, revoked.state_reason, revoked.text) == ("revoked", "wrong", "delta old")


def test_parse_strips_qems_error_comment(log: Log) -> None:
    text = log.render()
    commented = with_errors(text, ["line 3: something --> odd", "conflict on #1"])
    assert "<!-- qem:errors" in commented and "- ->" in commented
    def items(t):
        return [replace(i, line=0) for i in parse(t).items]

    assert items(commented) == items(text) and parse(commented).ok
    # a second round replaces the comment instead of stacking another
    again = with_errors(commented, ["only this"])
    assert again.count("<!-- qem:errors") == 1 and "conflict on #1" not in again and "only this" in again


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: "junk\n" + t, "first line must be qem's header"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\nloose words\n"), "neither a section heading"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\n<<<<<<< yours\n"), "unresolved conflict marker"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\n   three spaces\n"), "indented line outside any note"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\n* star item\n"), "start a note's line with `- `"),
        (lambda t: t.replace("## Tasks", "### Tasks"), "not a qem section heading"),
        (lambda t: t.replace("## Tasks", "## Chores"), "unknown section"),
        (lambda t: t.replace(" · medium · agent · gamma", " · urgent · agent · gamma"), "unknown priority"),
        (lambda t: t.replace(" · medium · agent · gamma", " · medium · robot · gamma"), "unknown provenance"),
        (lambda t: t.replace("· gamma task", "· STALE (x) · REVOKED (y) · gamma task"), "2 state markers"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\n\n- \n"), "start a note's line"),
        (lambda t: t.replace("## Tasks\n", "## Tasks\n\n- \\\n"), "has no text"),
    ],
)
def test_parse_errors_name_the_line(log: Log, edit, message: str) -> None:
    parsed = parse(edit(log.render()))
    assert any(message in str(e) for e in parsed.errors), parsed.errors
    assert all(str(e).startswith("line ") for e in parsed.errors)


# -- two-way: an edit against its base ------------------------------------------------------------


def test_each_change_maps_to_its_action(log: Log) -> None:
    text = log.render()
    text = text.replace("alpha lock order", "alpha lock order, fixed")  # supersede 1
    text = text.replace("low · agent · beta", "low · human · beta")  # promote 2
    text = drop_line(text, "gamma task")  # revoke 3
    text = re.sub(r"REVOKED [0-9-]+ \(wrong\) · ", "", text)  # reinstate 4
    text = re.sub(r"STALE [0-9-]+ \(check\) · ", "REVOKED (nope) · ", text)  # stale -> revoked 5
    text = text.replace("## Decisions\n", "## Decisions\n\n- low · decided\n")  # create
    plan, _, _ = log.plan(text)
    assert plan.ok, plan.errors
    assert sorted(actions(plan), key=str) == sorted(
        [("supersede", 1), ("promote", 2), ("revoke", 3), ("reinstate", 4), ("revoke", 5), ("create", None)], key=str
    )
    by = {op.note_id: op for op in plan.ops}
    assert by[1].content == Content("gotcha", "medium", "alpha lock order, fixed")
    assert by[5].reason == "nope" and by[3].reason is None and by[3].line == 0
    assert by[None].content == Content("decision", "low", "decided")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("delta old", "delta new"), "remove its marker too"),
        (lambda t: t.replace("· alpha lock", "· STALE (x) · alpha lock").replace("alpha lock order", "alpha 2"), "not both"),
        (lambda t: re.sub(r"- \[#1\] [0-9-]+", "- [#1] 1999-01-01", t), "created date is history"),
        (lambda t: t.replace("· alpha lock", "· supersedes #2 · alpha lock"), "`supersedes` link is history"),
        (lambda t: t.replace("agent · alpha", "auto · alpha"), "only be raised to human"),
        (lambda t: t.replace("agent · alpha", "agent · SUPERSEDED by #2 · alpha"), "do not write the marker"),
        (lambda t: t.replace("agent · gamma", "agent · EXPIRED · gamma"), None),
        (lambda t: drop_line(t, "delta old"), "history stays"),
        (lambda t: t + "- [#2] 2026-05-04 · low · agent · beta cache\n", "appears twice"),
        (lambda t: t + "- [#77] 2026-05-04 · low · agent · who\n", "no note #77"),
    ],
)
def test_two_way_refusals(log: Log, edit, message: str | None) -> None:
    plan, _, _ = log.plan(edit(log.render()))
    if message is None:  # control case: a legal state change
        assert plan.ok and actions(plan) == [("expire", 3)]
    else:
        assert not plan.ok and any(message in str(e) for e in plan.errors), plan.errors


def test_superseded_and_forgotten_notes(log: Log) -> None:
    successor = log.add("alpha v2", supersedes=1)
    log.forget(2)
    text = log.render()
    assert "FORGOTTEN" in text and f"SUPERSEDED by #{successor}" in text
    assert log.plan(text)[0].ops == []
    plan, _, _ = log.plan(text.replace("· alpha lock order", "· alpha lock order!"))
    assert any(f"edit #{successor} instead" in str(e) for e in plan.errors)
    plan, _, _ = log.plan(re.sub(r"(- \[#2\] FORGOTTEN [0-9-]+)", r"\1\n  resurrected", text))
    assert any("tombstone (#2) has no text" in str(e) for e in plan.errors)
    plan, _, _ = log.plan(drop_line(text, "FORGOTTEN"))
    assert any("#2 (forgotten) was deleted" in str(e) for e in plan.errors)


def test_scope_narrows_what_deletion_means(log: Log) -> None:
    text = log.render(selection=Selection(kinds=("finding",), active_only=True))
    assert "[#2]" in text and "[#5]" in text and "[#1]" not in text
    plan, _, _ = log.plan(text)
    assert plan.ok and plan.ops == []  # notes outside the checkout are not "deleted"
    plan, _, _ = log.plan(drop_line(text, "beta cache"))
    assert actions(plan) == [("revoke", 2)]
    plan, _, _ = log.plan(text + "\n## Tasks\n\n- sneaky\n")
    assert any("outside this checkout" in str(e) for e in plan.errors)


# -- three-way ----------------------------------------------------------------------------------


def test_others_changes_to_other_notes_merge(log: Log) -> None:
    base = log.head
    text = log.render().replace("alpha lock order", "alpha lock order, fixed")
    log.emit(2, "revoked", "theirs", actor="other")
    theirs_new = log.add("their note", actor="other")
    plan, _, _ = log.plan(text)
    assert plan.ok and actions(plan) == [("supersede", 1)]
    assert plan.merged == [2] and plan.base == base and plan.head == log.head
    assert theirs_new not in {op.note_id for op in plan.ops}  # created meanwhile: not deleted


@pytest.mark.parametrize(
    "mine, theirs, agreed",
    [
        (lambda t: drop_line(t, "alpha lock"), lambda log: log.emit(1, "revoked", "x", actor="o"), True),
        (lambda t: drop_line(t, "alpha lock"), lambda log: log.forget(1, actor="o"), True),
        (lambda t: t.replace("agent · alpha", "human · alpha"), lambda log: log.emit(1, "promoted", actor="o"), True),
        (lambda t: t.replace("· alpha", "· STALE (a) · alpha"), lambda log: log.emit(1, "stale_flagged", "b", actor="o"), True),
        (lambda t: drop_line(t, "alpha lock"), lambda log: log.emit(1, "stale_flagged", "b", actor="o"), False),
        (lambda t: t.replace("alpha lock order", "alpha v2"), lambda log: log.emit(1, "revoked", "b", actor="o"), False),
        (lambda t: t.replace("alpha lock order", "alpha v2"), lambda log: log.forget(1, actor="o"), False),
        (lambda t: t.replace("alpha lock order", "alpha v2"), lambda log: log.add("alpha v3", supersedes=1, actor="o"), False),
        (lambda t: t.replace("alpha lock order", "alpha v2"), lambda log: log.emit(1, "promoted", actor="o"), False),
        (lambda t: t.replace("· alpha", "· STALE (a) · alpha"), lambda log: log.emit(1, "revoked", "b", actor="o"), False),
    ],
    ids=["revoke/revoke", "revoke/forget", "promote/promote",
         "stale/stale", "revoke/stale", "supersede/revoke", "supersede/forget", "supersede/supersede",
         "supersede/promote", "stale/revoke"],
)
def test_same_note_on_both_sides(log: Log, mine, theirs, agreed: bool) -> None:
    base_text = log.render()
    text = mine(base_text).replace("gamma task", "gamma task, also changed")
    theirs(log)
    plan, _, _ = log.plan(text, base_text)
    if agreed:
        assert plan.ok, plan.conflicts
        assert plan.agreed == [1] and actions(plan) == [("supersede", 3)]
    else:
        assert not plan.ok and [c.note_id for c in plan.conflicts] == [1]
        assert plan.conflicts[0].theirs and all(e.note_id == 1 for e in plan.conflicts[0].theirs)


def test_both_superseding_with_the_same_content_agrees(log: Log) -> None:
    text = log.render().replace("alpha lock order", "alpha v2")
    log.add("alpha v2", supersedes=1, provenance="agent", actor="o")
    plan, _, _ = log.plan(text)
    assert plan.ok and plan.agreed == [1] and plan.ops == []


# -- rebase ---------------------------------------------------------------------------------------


def _conflicted(log: Log):
    base_text = log.render()
    text = base_text.replace("alpha lock order", "alpha v2")  # conflicts
    text = text.replace("beta cache", "beta cache is cold")  # merges
    text = drop_line(text, "gamma task")  # merges
    text = text.replace("## Decisions\n", "## Decisions\n\n- high · a new decision\n")
    log.emit(1, "revoked", "they disagree", actor="other")
    theirs = log.add("their note", kind="task", actor="other")
    plan, parsed, base_notes = log.plan(text, base_text)
    assert [c.note_id for c in plan.conflicts] == [1]
    messages = checkin.problems(checkin.Proposal(parsed, plan, base_notes, log.notes(), log.events[parsed.base:]))
    rebased = rebase(parsed, plan, base_notes, log.notes(), {1: "revoked by other"}, messages)
    return rebased, theirs


def test_rebase_marks_the_conflict_and_keeps_the_rest(log: Log) -> None:
    rebased, theirs = _conflicted(log)
    lines = rebased.split("\n")
    assert lines[0].startswith(f"<!-- qem base={log.head} ")
    assert lines[1].startswith("<!-- qem:errors") and "conflict on #1" in rebased
    marks = [line.split()[0] for line in lines if line[:7] in ("<<<<<<<", "|||||||", "=======", ">>>>>>>")]
    assert marks == ["<<<<<<<", "|||||||", "=======", ">>>>>>>"]
    yours = rebased[rebased.index("<<<<<<<"):rebased.index("|||||||")]
    store = rebased[rebased.index("======="):rebased.index(">>>>>>>")]
    assert "alpha v2" in yours and "REVOKED" in store and "they disagree" in store
    assert "beta cache is cold" in rebased and "gamma task" not in rebased
    assert rebased.count("a new decision") == 1 and f"[#{theirs}]" in rebased
    # markers are refused until resolved
    assert any("conflict marker" in str(e) for e in parse(rebased).errors)


@pytest.mark.parametrize("keep", ["yours", "theirs"])
def test_a_resolved_rebase_checks_in(log: Log, keep: str) -> None:
    rebased, theirs = _conflicted(log)
    out, side = [], None
    for line in rebased.split("\n"):
        mark = {"<<<<<<<": "yours", "|||||||": "base", "=======": "theirs", ">>>>>>>": None}.get(line[:7], "-")
        if mark != "-":
            side = mark
        elif side in (None, keep):
            out.append(line)
    plan, _, _ = log.plan("\n".join(out))
    assert plan.ok, (plan.errors, plan.conflicts)
    got = sorted(actions(plan), key=str)
    expected = [("create", None), ("revoke", 3), ("supersede", 2)]
    if keep == "yours":  # bring the revoked note back with your text
        expected += [("reinstate", 1), ("supersede", 1)]
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


def plan(store: Store, edited: str, checkout: str, data) -> checkin.Proposal:
    """Plan the check-in the quick way (only the changed blocks parsed) or, drawn at
    random, the whole-file way; both must give the same plan."""
    if data.draw(st.booleans(), label="whole-file parse"):
        return checkin.whole(store, checkin.propose(store, edited, checkout))
    return checkin.propose(store, edited, checkout)


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
        store = build_store(Path(tmp) / "m.db", specs)
        with store:
            base, checkout = rendering(store)
            before = {n.id: n for n in store.notes()}
            header, sections = blocks_of(checkout)
            blocks = {int(re.match(r"- \[#(\d+)\]", item[0])[1]): item for items in sections.values() for item in items}
            assert set(blocks) == set(before)
            out: dict[str, list[list[str]]] = {title: [] for title in SECTION_TITLES.values()}
            expected_live: Counter = Counter()
            expected_state: dict[int, tuple[str, str]] = {}
            changed = False
            for note_id, note in sorted(before.items()):
                edit = data.draw(st.sampled_from(EDITS_BY_STATE[note.state]), label=f"edit #{note_id}")
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
                    block = render_item(replace(note, kind=kind, priority=priority, text=text, state=state,
                                                provenance=provenance, state_reason=stale_reason,
                                                state_at=None if edit == "stale" else note.state_at))
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
                assert planned.plan.ops == [] and store.head() == base
                return
            assert planned.plan.ops
            checkin.apply_plan(store, planned.plan, "person", "property check-in")
            assert store.verify() == []
            after = {n.id: n for n in store.notes()}
            assert replay(store.events()) == after
            live = Counter((n.kind, n.priority, n.text, n.state, n.provenance) for n in after.values() if n.live)
            assert live == expected_live
            for note_id, (state, provenance) in expected_state.items():
                assert (after[note_id].state, after[note_id].provenance) == (state, provenance), note_id
            new_events = store.events(after=base)
            assert len({e.checkin for e in new_events}) == 1 and new_events[0].checkin
            # the result, rendered and parsed again, says the same
            head, rendered = rendering(store)
            reparsed = parse(rendered)
            assert reparsed.ok and reparsed.base == head
            live_items = Counter((i.kind, i.priority, i.text, i.state, i.provenance) for i in reparsed.items if i.state in LIVE_STATES)
            assert live_items == expected_live
            # and checking that rendering in again is no change
            assert checkin.propose(store, rendered, rendered).plan.ops == []


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
        store = build_store(Path(tmp) / "m.db", specs)
        with store:
            base, checkout = rendering(store)
            before = {n.id: n for n in store.notes()}
            live = sorted(i for i, n in before.items() if n.live)
            assume(live)
            mine = data.draw(st.sampled_from(live), label="my note")
            edited = checkout.replace(
                "\n".join(render_item(before[mine])) + "\n", "", 1
            )  # I delete one live note
            theirs = {}
            for note_id, note in before.items():
                if note_id == mine:
                    continue
                move = data.draw(st.sampled_from(["none", *OTHER_MOVES[note.state]]), label=f"other #{note_id}")
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
    from qem_edit import errors

    spec = [("gotcha", "medium", "agent", "alpha lock order", "active", "why", "x")]
    with build_store(tmp_path / "m.db", spec) as store:
        _, text = rendering(store)
        edited = text.replace("alpha lock order", "alpha lock order v2")
        planned = checkin.propose(store, edited, text)
        assert planned.plan.ok and actions(planned.plan) == [("supersede", 1)]
        # another writer lands between planning and applying
        store.write(lambda tx: tx.emit(1, "promoted", "other", None))
        moved = store.head()
        with pytest.raises(errors.HeadMoved):
            checkin.apply_plan(store, planned.plan, "person", "why")
        assert store.head() == moved
        # planned again against the new head, it is a conflict
        assert [c.note_id for c in checkin.propose(store, edited, text).plan.conflicts] == [1]


def test_the_error_comment_keeps_line_numbers_pointing_at_their_lines() -> None:
    from qem_edit.reconciler.rebase import with_errors

    text = "<!-- qem base=1 · x -->\n\n## Directives\n\nstray words\n"
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

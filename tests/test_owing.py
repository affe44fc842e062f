"""Answered is three-valued, with the reason: qem_edit.base.owing decides it from notes alone, no
database, no clock (now is given)."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from qem_edit.base.owing import NO, NOT_OWED, UNKNOWN, YES, answered, duration, pointer, seconds_between
from qem_edit.base.replay import Note

NOW = "2026-09-10T12:00:00Z"
R = "r" * 26


def note(id_: str, *, state: str = "active", to: str | None = None, due: str | None = None,
         answers: str | None = None, at: str = "2026-09-01T09:00:00Z", actor: str = "alice", **more) -> Note:
    return Note(id_, "task", "medium", "text", "agent", at, actor, state=state, to=to, due=due, answers=answers,
                short=id_[:4], **more)


REQUEST = note(R, to="bob", due="2026-09-05T23:59:59Z")


def test_no_answer_is_no_with_who_owes_it_when_it_was_due_and_how_late() -> None:
    got = answered(REQUEST, [], NOW)
    assert got.value == NO
    assert got.why == "owed by bob, due 2026-09-05T23:59:59Z, late by 4d 12h"
    assert got.late == 4 * 86400 + 12 * 3600 + 1
    early = answered(REQUEST, [], "2026-09-05T23:59:59Z")
    assert early.value == NO and early.late is None and "late" not in early.why
    assert answered(note(R, to="bob"), [], NOW).why == "owed by bob"
    assert answered(note(R, due="2026-09-11T00:00:00Z"), [], NOW).why == "owed by nobody named, due 2026-09-11T00:00:00Z"


def test_one_answer_is_yes_by_which_note_who_and_when() -> None:
    a = note("a" * 26, answers=R, at="2026-09-03T14:00:00Z", actor="bob")
    got = answered(REQUEST, [a], NOW)
    assert (got.value, got.by) == (YES, (a,))
    assert got.why == "answered by #aaaa (bob, 2026-09-03T14:00:00Z)" and got.late is None


def test_a_withdrawn_answer_answers_nothing_and_a_replaced_one_speaks_through_its_successor() -> None:
    revoked = note("a" * 26, answers=R, state="revoked")
    forgotten = note("f" * 26, answers=R, state="forgotten")
    assert answered(REQUEST, [revoked, forgotten], NOW).value == NO
    old = note("o" * 26, answers=R, state="superseded", superseded_by="n" * 26)
    new = note("n" * 26, answers=R, at="2026-09-04T00:00:00Z")
    got = answered(REQUEST, [old, new], NOW)
    assert (got.value, got.by) == (YES, (new,))
    # an answer that was given and then expired (or replaced by a note that answers nothing) stands
    expired = note("e" * 26, answers=R, state="expired")
    assert answered(REQUEST, [expired], NOW).by == (expired,)


def test_two_answers_in_force_are_unknown_and_a_part_read_log_makes_no_unknown() -> None:
    a = note("a" * 26, answers=R, actor="bob")
    b = note("b" * 26, answers=R, actor="carol", at="2026-09-02T00:00:00Z")
    got = answered(REQUEST, [b, a], NOW)
    assert got.value == UNKNOWN and "#aaaa (bob" in got.why and "#bbbb (carol" in got.why
    assert "supersede one" in got.why
    partial = answered(REQUEST, [], NOW, ["1 log file set aside"])
    assert partial.value == UNKNOWN and "incomplete (1 log file set aside)" in partial.why
    assert "owed by bob" in partial.why and partial.late is not None
    # an answer found is an answer, whatever else the log lacks
    assert answered(REQUEST, [a], NOW, ["1 log file set aside"]).value == YES


def test_a_request_out_of_force_is_not_owed_and_says_why() -> None:
    revoked = REQUEST._replace(state="revoked", state_at="2026-09-04T08:00:00Z", state_actor="bob",
                               state_reason="no longer needed")
    assert answered(revoked, [], NOW) == (NOT_OWED, "not owed: revoked at 2026-09-04T08:00:00Z by bob: no longer needed",
                                          (), None)
    superseded = REQUEST._replace(state="superseded", superseded_by="s" * 26)
    assert answered(superseded, [], NOW).why == "not owed: superseded by #ssssssss (the successor is the request now)"
    for state in ("expired", "forgotten"):
        assert answered(REQUEST._replace(state=state), [], NOW).value == NOT_OWED
    # a stale request is still in force, so still owed
    assert answered(REQUEST._replace(state="stale"), [], NOW).value == NO


def test_an_answer_whose_request_is_not_in_the_log_read_is_unknown() -> None:
    a = note("a" * 26, answers="z" * 26)
    got = pointer(a, None)
    assert got is not None and got.value == UNKNOWN and "zzzzzzzz, which is not in the log read" in got.why
    assert pointer(a, REQUEST) is None and pointer(REQUEST, None) is None


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2400, 12, 31)),
       st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2400, 12, 31)))
def test_seconds_between_is_the_calendar_s(a: datetime, b: datetime) -> None:
    a, b = a.replace(microsecond=0), b.replace(microsecond=0)
    stamp = lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    assert seconds_between(stamp(a), stamp(b)) == int((b.replace(tzinfo=timezone.utc)
                                                       - a.replace(tzinfo=timezone.utc)).total_seconds())


def test_duration_says_the_two_largest_units() -> None:
    assert [duration(s) for s in (0, 20, 61, 3600 * 5 + 60 * 12 + 3, 86400 * 3 + 3600 * 4 + 5)] == \
        ["0s", "20s", "1m 1s", "5h 12m", "3d 4h"]


# -- qem owed equals a brute-force replay --------------------------------------------------------

import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from qem_edit.renderer import render  # noqa: E402

from qem_edit.base import errors
from qem_edit.base.decisions import NewNote  # noqa: E402
from qem_edit.mirror.export import render_store  # noqa: E402
from qem_edit.reads import owed as owed_read  # noqa: E402
from qem_edit.storage.store import Store  # noqa: E402

SEATS = (None, "alice", "bob")
DUES = (None, "2026-09-01T00:00:00Z", "2026-12-01T00:00:00Z")  # one past NOW, one not yet
STEP = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(SEATS[1:]), st.sampled_from(DUES)),
    st.tuples(st.just("deadline"), st.sampled_from(DUES[1:])),
    st.tuples(st.just("answer"), st.integers(0, 4)),
    st.tuples(st.just("supersede"), st.integers(0, 4)),
    st.tuples(st.just("revoke"), st.integers(0, 4)),
)


def _replayed(history: list[tuple]) -> tuple[Store, dict[str, dict], Path]:
    """The history written through the store's own transaction, and beside it, replayed
    by hand: each note's seat, deadline, pointer and state."""
    root = Path(tempfile.mkdtemp())
    store = Store.open(root / ".qem", create=True)
    brute: dict[str, dict] = {}
    order: list[str] = []

    def create(new: NewNote) -> str:
        made = store.write(lambda tx: tx.create(new, "tester"), at="2026-08-01T00:00:00Z").id
        brute[made] = {"to": new.to, "due": new.due, "answers": new.answers, "state": "active"}
        order.append(made)
        return made

    for step in history:
        if step[0] in ("request", "deadline"):
            to, due = (step[1], step[2]) if step[0] == "request" else (None, step[1])
            create(NewNote("task", "medium", "agent", f"request {len(order)}", to=to, due=due))
        elif order:
            target = order[step[1] % len(order)]
            if step[0] == "answer" and brute[target]["to"] is None and brute[target]["due"] is None:
                with pytest.raises(errors.Refused, match="is not a request"):  # only a request is answered
                    store.write(lambda tx: tx.create(NewNote("finding", "medium", "agent", "no answer", answers=target),
                                                     "tester"), at="2026-08-01T00:00:00Z")
            elif step[0] == "answer":
                create(NewNote("finding", "medium", "agent", f"answer {len(order)}", answers=target))
            elif brute[target]["state"] == "active":
                old = brute[target]
                if step[0] == "revoke":
                    store.write(lambda tx: tx.emit(target, "revoked", "tester", "no"), at="2026-08-02T00:00:00Z")
                    old["state"] = "revoked"
                else:
                    create(NewNote("task", "medium", "agent", f"successor {len(order)}", target,
                                   to=old["to"], due=old["due"], answers=old["answers"]))
                    old["state"] = "superseded"
    return store, brute, root


def _brute_owed(brute: dict[str, dict]) -> dict[str, tuple[str, bool]]:
    out = {}
    for note_id, n in brute.items():
        if n["state"] != "active" or (n["to"] is None and n["due"] is None):
            continue
        given = [a for a in brute.values() if a["answers"] == note_id and a["state"] != "revoked"]
        in_force = [a for a in given if a["state"] == "active"]
        value = "unknown" if len(in_force) > 1 else ("yes" if given else "no")
        if value != "yes":
            out[note_id] = (value, n["due"] is not None and n["due"] < NOW)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, max_size=14))
def test_owed_is_a_brute_force_replay_of_requests_answers_supersessions_and_revocations(history) -> None:
    """And MEMORY.md's `answered by` is too: the index's items, kept current write by
    write, equal a rendering of the whole log and a fresh index's."""
    store, brute, root = _replayed(history)
    with store:
        got = owed_read.build(store, now=NOW)
        assert {o.note.id: (o.answer.value, o.answer.late is not None) for o in got.owed} == _brute_owed(brute)
        late = owed_read.build(store, late=True, now=NOW)
        assert {o.note.id for o in late.owed} == {k for k, (_, is_late) in _brute_owed(brute).items() if is_late}
        alice = owed_read.build(store, to="alice", now=NOW)
        assert {o.note.id for o in alice.owed} == {k for k in _brute_owed(brute) if brute[k]["to"] == "alice"}
        _, rendered = render_store(store)  # the items the index kept current as each answer landed
        shorts = {n.id: n.shown for n in store.notes()}
        assert rendered == render(store.notes(), store.memory_id()).encode("utf-8")  # the whole log, rendered anew
    (root / ".qem" / "index.db").unlink()
    with Store.open(root / ".qem") as fresh:  # a fresh clone's index, built from the log alone
        assert render_store(fresh)[1] == rendered
    lines = {line.split("] ", 1)[0][4:]: line for line in rendered.decode().splitlines() if line.startswith("- [#")}
    for note_id, n in brute.items():
        if n["to"] is None and n["due"] is None:
            continue
        given = sorted(a for a, b in brute.items() if b["answers"] == note_id and b["state"] != "revoked")
        speaking = [a for a in given if brute[a]["state"] == "active"] or given[-1:]  # (one second: id order)
        marker = "answered by " + ", ".join(f"#{shorts[a]}" for a in speaking)
        assert (marker in lines[shorts[note_id]]) == bool(speaking), (marker, lines[shorts[note_id]])

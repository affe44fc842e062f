"""The notes due at a moment, in order: qem_edit.reads.delivery.Ranks is the list of Ranked it stands for.

A start at scale has thousands of notes due and gives a hundred, so a hook holds the order
as each note's fields and makes a Ranked only for the notes it reads; every question a
reply asks of the whole order (how many, the directives among them, each moment's last
rank, the order without the notes a session was given) is answered from the fields.  Here
each is held to the answer the plain list gives, over any parts, slices and filters.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import add
from hypothesis import given, settings
from hypothesis import strategies as st

from qem_edit.base.triggers import bundle_why
from qem_edit.base.vocabulary import KIND_RANK, KINDS, PRIORITIES, PRIORITY_RANK
from qem_edit.reads.delivery import Due, Moment, Ranked, Ranks, hits, owed_of
from qem_edit.storage.store import Store

MOMENTS = [Moment("start"), Moment("compact"), Moment("edit", paths=("a.py",))]

rows = st.builds(lambda n, kind, priority, why, owed: (n, KIND_RANK[kind], priority, PRIORITY_RANK[priority])
                 + (() if why is None else (why,) if owed is None else (why, owed)),
                 st.sampled_from(["n1", "n2", "n3", "n4", "n5", "n6"]), st.sampled_from(KINDS),
                 st.sampled_from(PRIORITIES), st.sampled_from([None, "on start", "late, not answered yet"]),
                 st.sampled_from([None, 0, 1, 2]))


@st.composite
def parts(draw):  # type: ignore[no-untyped-def]
    out = []
    for _ in range(draw(st.integers(0, 3))):
        made = draw(st.lists(rows, max_size=8))
        if draw(st.booleans()):
            ranks: range | list[int] = range(len(made))
        else:
            ranks = sorted(draw(st.lists(st.integers(0, 50), min_size=len(made), max_size=len(made), unique=True)))
        out.append((draw(st.sampled_from(MOMENTS)), made, ranks))
    return out


def plain(made: list) -> list[Ranked]:
    """The list the parts stand for: a row is (id, kind rank, priority, priority rank, and
    its why where it does not come by its kind's bundle, and what is owed where anything
    is), a whole note (every note due is)."""
    return [Ranked(moment, rank, Due(row[0], KINDS[row[1]], row[2], row[4] if len(row) > 4 else bundle_why(
        KINDS[row[1]], row[2]), True, row[5] if len(row) > 5 else 0)) for moment, part, ranks in made
        for row, rank in zip(part, ranks)]


@settings(max_examples=300, deadline=None)
@given(parts(), st.integers(-12, 12), st.integers(-12, 12), st.one_of(st.none(), st.integers(-12, 12)),
       st.frozensets(st.sampled_from(["n1", "n2", "n3", "n9"])), st.sampled_from([0, 1, 2]))
def test_ranks_answer_as_the_list_of_ranked_they_stand_for(  # type: ignore[no-untyped-def]
        made, index, start, stop, among, owed) -> None:
    ranks, listed = Ranks(made), plain(made)
    assert list(ranks) == listed and len(ranks) == len(listed) and bool(ranks) == bool(listed)
    assert ranks.ids() == [e.due.id for e in listed]
    assert list(ranks.dues()) == [row for _, part, _ in made for row in part]
    if -len(listed) <= index < len(listed):
        assert ranks[index] == listed[index]
    else:
        with pytest.raises(IndexError):
            ranks[index]  # noqa: B018
    part = ranks[start:stop]
    assert isinstance(part, Ranks) and list(part) == listed[start:stop]
    assert list(part[1:]) == listed[start:stop][1:] and list((part + ranks)[:3]) == (listed[start:stop] + listed)[:3]
    assert ranks.directives() == sum(e.due.kind == "directive" for e in listed)
    assert part.directives() == sum(e.due.kind == "directive" for e in listed[start:stop])
    assert ranks.last_ranks() == {e.moment: e.rank for e in listed}
    assert list(ranks.owed()) == [row for _, part, _ in made for row in part[:next(
        (i for i, r in enumerate(part) if not owed_of(r)), len(part))]]
    assert part.last_ranks() == {e.moment: e.rank for e in listed[start:stop]}

    def gone(row: tuple) -> bool:
        return owed_of(row) != owed

    kept = ranks.without(among, gone)
    assert list(kept) == [e for e in listed if not (e.due.id in among and e.due.owed != owed)]
    assert list(kept[1:]) == list(kept)[1:] and kept.directives() == sum(e.due.kind == "directive" for e in kept)
    with pytest.raises(ValueError):
        ranks[::2]  # noqa: B018


def test_hits_come_in_the_one_order_and_once(tmp_path: Path) -> None:
    """What a start fires comes once each, in Due.key's order: what is owed, the late
    first, then kind rank, priority, id; every directive and every high task among them."""
    with Store.open(tmp_path / ".qem", create=True) as store:
        made = {(kind, priority): [add(store, f"{kind} {priority} {i}", kind, priority=priority) for i in range(4)]
                for kind in ("directive", "task", "gotcha") for priority in PRIORITIES}
        with store.reading():
            found = hits(store, Moment("start"))
    dues = [e.due for e in found]
    assert dues == sorted(dues, key=Due.key) and [e.rank for e in found] == list(range(len(dues)))
    assert len({d.id for d in dues}) == len(dues)
    want = {n for (kind, priority), ids in made.items() for n in ids
            if kind == "directive" or (kind, priority) == ("task", "high")}
    assert {d.id for d in dues} == want and dues[0].kind == "directive" and dues[0].priority == "high"


def test_a_read_gives_a_note_declaring_it_and_the_edit_once_as_the_reads(tmp_path: Path) -> None:
    """A read fires what is due before an edit too (triggers.declaring): a note declaring
    both comes once, for the read; one declaring the edit alone, for the edit."""
    from qem_edit.base.decisions import NewNote

    with Store.open(tmp_path / ".qem", create=True) as store:
        both = store.write(lambda tx: tx.create(NewNote("gotcha", "medium", "agent", "Look before you touch",
                                                        triggers=(("on", "read"), ("on", "edit"))), "tester")).id
        edit = store.write(lambda tx: tx.create(NewNote("gotcha", "high", "agent", "Run the formatter after",
                                                        triggers=(("on", "edit"),)), "tester")).id
        with store.reading():
            found = hits(store, Moment("read", paths=("a.py",)))
    assert [(e.due.id, e.due.why) for e in found] == [(edit, "on edit"), (both, "on read")]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=60), st.text(min_size=190, max_size=700),
                 st.builds(lambda a, b: a + " " * 150 + b, st.text(min_size=1, max_size=120), st.text(max_size=200))),
       st.sampled_from(KINDS), st.sampled_from(PRIORITIES),
       st.sampled_from(["agent", "human", "user-stated", "auto"]), st.sampled_from(["active", "stale"]),
       st.sampled_from(["", "abcd", "a1b2c"]), st.sampled_from(["every directive, at start and after compaction",
                                                               "late, not answered yet", "on start"]),
       st.one_of(st.none(), st.text(max_size=3)), st.booleans())
def test_a_line_takes_no_fewer_units_than_a_read_ahead_counts(  # type: ignore[no-untyped-def]
        text, kind, priority, provenance, state, short, why, to, past) -> None:
    """tiers.least, what a start's read ahead counts a note's line as against the budget
    (reads.session._ahead), is never more than the line and its newline take in either
    measure: characters, or Claude Code's UTF-16 units; so no note a reply could give goes
    unread."""
    from qem_edit.base.harness import utf16_units
    from qem_edit.base.replay import Note
    from qem_edit.reads.standing import Standing
    from qem_edit.reads.tiers import Listed, least

    note = Note("n" * 26, kind, priority, text, provenance, "2026-01-01T00:00:00Z", "a", state=state, short=short,
                to=to, due="2026-02-01T00:00:00Z" if to else None, expires="2026-01-02T00:00:00Z" if past else None)
    for whole in (False, True):
        listed = Listed(note, why, whole, Standing(past_end="2026-01-02T00:00:00Z" if past else None))
        for measure in (len, utf16_units):
            assert least(note) <= measure(listed.line()) + 1
            assert least(note) <= measure(listed.block()) + 1


def test_a_start_reads_ahead_what_its_budget_can_give_and_gives_what_reading_every_text_gives(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A start with more notes due than its budget holds reads the texts of those its
    lines can fit (reads.session._ahead), and gives, and records in its ledger, what it
    gives having read READ_AHEAD texts: for each harness's budget and unit, a first line
    cut or not, wide characters or not."""
    import json
    import random

    from qem_edit.base.harness import HARNESSES
    from qem_edit.reads import session
    from qem_edit.shells import hookrun
    from qem_edit.system import ledger

    rng = random.Random(7)
    with Store.open(tmp_path / ".qem", create=True) as store:
        for i in range(260):
            words = rng.choice(["Run the tests", "Ask first", "日本語のテスト", "Never push 🚀", "x" * 230])
            add(store, f"{words} {i} " + "y" * rng.randrange(0, 90), "directive", priority=rng.choice(PRIORITIES))
    every, read = session._ahead, []

    def bounded(store, fresh, budget):  # type: ignore[no-untyped-def]
        texts = every(store, fresh, budget)
        read.append(len(texts))
        return texts

    def reads_all(store, fresh, budget):  # type: ignore[no-untyped-def]
        return every(store, fresh, 0)

    for name in ("claude", "codex", "gemini"):
        replies = []
        for ahead in (bounded, reads_all):
            monkeypatch.setattr(session, "_ahead", ahead)
            (tmp_path / ".qem" / "index.db-starts.json").unlink(missing_ok=True)
            key = f"s-{name}-{ahead is bounded}"
            raw = json.dumps({"session_id": key, "hook_event_name": "SessionStart", "source": "startup",
                              "cwd": str(tmp_path)}).encode()
            out, code = hookrun.run(HARNESSES[name], "SessionStart", raw)
            book = ledger.peek(tmp_path / ".qem", f"{name}:{key}")
            assert code == 0 and book is not None
            replies.append((out, book.given))
        assert replies[0] == replies[1] and "more notes did not fit" in replies[0][0]
        assert 0 < read[-1] < 260  # (the bound read less than every text)


def test_a_tiered_reply_never_gives_more_than_its_budget_even_one_its_last_lines_fill(tmp_path: Path) -> None:
    """A budget the last lines' room takes whole leaves no room for a note: none is given
    (0 is no limit; a budget the footer fills is not)."""
    from qem_edit.reads import tiers

    with Store.open(tmp_path / ".qem", create=True) as store:
        for i in range(30):
            add(store, f"Rule {i}: keep the change small", "directive")
        given = []
        for budget in range(1, 700):
            out = tiers.deliver(store, Moment("start"), budget)
            assert not out.given or len(out.text()) <= budget, budget
            given.append(len(out.given))
    assert given == sorted(given) and given[0] == 0 and given[-1] > 0


def _reply(top: Path, session: str, source: str = "startup") -> str:
    import json

    from qem_edit.base.harness import HARNESSES
    from qem_edit.shells import hookrun

    raw = json.dumps({"session_id": session, "hook_event_name": "SessionStart", "source": source,
                      "cwd": str(top)}).encode()
    out, code = hookrun.run(HARNESSES["claude"], "SessionStart", raw)
    assert code == 0
    return out


def test_a_start_a_hook_beside_it_gave_notes_to_meanwhile_reads_the_texts_after_them(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A hook beside a start (the same session) that gives notes between the start's read
    and its reply leaves room for notes past what the start read ahead: their texts are
    read then, and the reply is the one a start gives whose ledger held those notes
    before it began."""
    from qem_edit.reads import session
    from qem_edit.system import ledger

    with Store.open(tmp_path / ".qem", create=True) as store:
        made = [add(store, f"Rule {i:03}: " + "keep it small and tested " * 3, "directive") for i in range(300)]
    first = sorted(made)[:90]  # (the order is by id among directives of one priority)

    def give_first(key: str) -> None:
        with ledger.session(tmp_path / ".qem", key) as book:
            for n in first:
                book.give(n, True, n)

    give_first("claude:before")
    (tmp_path / ".qem" / "index.db-starts.json").unlink(missing_ok=True)
    want = _reply(tmp_path, "before", "resume")

    read = session._read

    def beside(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = read(*args, **kwargs)
        give_first("claude:race")  # (the hook beside, between the read and the reply)
        return found

    monkeypatch.setattr(session, "_read", beside)
    got = _reply(tmp_path, "race", "resume")
    assert got == want and "did not fit" in got


def test_a_start_whose_index_was_rebuilt_before_its_reply_keeps_no_reply(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch) -> None:
    """A start keeps its reply through the store it read from; an index put in its place
    meanwhile (a rebuild) is another index, whose moments the reply is not of: nothing kept."""
    from qem_edit.reads import session

    with Store.open(tmp_path / ".qem", create=True) as store:
        for i in range(5):
            add(store, f"Rule {i}", "directive")
    kept = tmp_path / ".qem" / "index.db-starts.json"
    kept.unlink(missing_ok=True)
    _reply(tmp_path, "control")
    assert kept.exists()  # (kept where nothing moved)
    kept.unlink()
    read = session._read

    def rebuilt(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = read(*args, **kwargs)
        with Store.open(tmp_path / ".qem") as other:
            other.rebuild()
        return found

    monkeypatch.setattr(session, "_read", rebuilt)
    assert "Rule 0" in _reply(tmp_path, "rebuilt")
    assert not kept.exists()

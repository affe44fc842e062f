"""Which note is current: yes, no or unknown, with the reason; never guessed.

Hand-made logs go in through `qem load` (the path a foreign log takes), and the answers
come out through `qem status`, `qem verify` and `qem query`, as a user would see them.
The logs here are written in the old numbered format (`seq`, `note_id`), which `qem load`
converts: each note gets a content-hashed id and keeps its number as an alias, so the CLI
still finds note 2 as `2`, while every answer names notes by their short ids.

Content-hashed ids make some broken graphs impossible to write: a note's `created` event
holds its parent's id, and its own id is the hash of that event, so no note can point at
itself or close a cycle.  A numbered log that had one converts the pointer that goes
forward to the old number it named (hashed), which the graph reads back: the cycle is
named as one, with the old numbers; the resolver's own cycle detection is proved on notes
built in memory too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _edit_support import shorts

from qem_edit.base import ids as ids_mod
from qem_edit.base.replay import Note
from qem_edit.base.resolver import Graph


def created(seq: int, note_id: int, supersedes: object = None, at: str = "2026-01-01T00:00:00Z",
            kind: str = "finding") -> dict:
    return {
        "seq": seq, "note_id": note_id, "type": "created", "at": at, "actor": "far-away",
        "reason": None, "checkin": None,
        "data": {"kind": kind, "priority": "medium", "provenance": "agent",
                 "text": f"note {note_id}", "supersedes": supersedes},
    }


def event(seq: int, note_id: int, type_: str, data: dict | None = None, reason: str | None = "why",
          at: str = "2026-01-02T00:00:00Z", actor: str = "far-away") -> dict:
    return {"seq": seq, "note_id": note_id, "type": type_, "at": at, "actor": actor,
            "reason": reason, "checkin": None, "data": data or {}}


def load(qem, tmp_path: Path, events: list[dict]) -> None:
    log = tmp_path / "foreign.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    done = qem("load", str(log))
    assert done.returncode == 0, done.stderr


def status(qem, note_id: int | str) -> dict:
    done = qem("status", str(note_id), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def full_ids(ws: Path) -> dict:  # type: ignore[type-arg]
    """Each note's full id by its old number."""
    from _edit_support import aliases

    return {number: full for full, number in aliases(ws).items()}


def test_a_cycle_in_a_numbered_log_is_named_as_one_with_the_old_numbers(qem, ws, tmp_path):
    # #1 supersedes #2, which supersedes #1: #1's created event cannot hold the hash of an
    # event that holds #1's own hash, so the conversion keeps #1's pointer as #2's old
    # number (hashed), which the graph reads back: a cycle, never a made-up dangling id
    load(qem, tmp_path, [created(1, 1, 2), created(2, 2, 1), created(3, 3, 2)])
    s = shorts(ws)
    low, high = sorted([1, 2], key=lambda n: full_ids(ws)[n])
    path = f"#{s[low]} → #{s[high]} → #{s[low]} (numbered #{low} → #{high} → #{low} before the conversion)"
    for note_id in (1, 2):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert path in answer["reason"] and "dangling" not in answer["reason"]
    assert status(qem, 3)["current"] == "unknown"  # downstream of the cycle
    verify = qem("verify")
    assert verify.returncode == 1 and f"cycle: {path}" in verify.stdout, verify.stdout
    assert "dangling" not in verify.stdout


def _note(note_id: str, supersedes: str | None = None, state: str = "active", **over) -> Note:
    return Note(note_id, "finding", "medium", "t", "agent", "2026-01-01T00:00:00Z", "a",
                supersedes=supersedes, state=state, short=note_id[:4], **over)


def _id(prefix: str) -> str:
    return (prefix + "0" * ids_mod.ID_LENGTH)[:ids_mod.ID_LENGTH]


def test_a_cycle_of_two_is_unknown_for_both_and_named():
    a, b = _id("aaaa"), _id("bbbb")
    graph = Graph.of({a: _note(a, b), b: _note(b, a)})
    for note_id in (a, b):
        answer = graph.currency(note_id)
        assert answer.value == "unknown"
        assert "cycle #aaaa → #bbbb → #aaaa" in answer.reason
    assert graph.problems() == ["cycle: #aaaa → #bbbb → #aaaa"]


def test_a_cycle_of_three_is_rotated_to_its_smallest_id():
    # the downstream note has the smallest id: the walk enters the cycle at #ccc7
    n5, n6, n7, n1 = _id("ccc5"), _id("ccc6"), _id("ccc7"), _id("ccc1")
    graph = Graph.of({n7: _note(n7, n6), n6: _note(n6, n5), n5: _note(n5, n7), n1: _note(n1, n7)})
    for note_id in (n5, n6, n7):
        assert graph.currency(note_id).value == "unknown"
        assert "cycle #ccc5 → #ccc7 → #ccc6 → #ccc5" in graph.currency(note_id).reason
    # a note downstream of the cycle cannot be placed either
    downstream = graph.currency(n1)
    assert downstream.value == "unknown" and "cycle #ccc5 → #ccc7 → #ccc6 → #ccc5" in downstream.reason
    assert "(#ccc1 descends from #" in downstream.reason
    assert graph.problems()[0] == "cycle: #ccc5 → #ccc7 → #ccc6 → #ccc5"  # (then the fork of #ccc7)


def test_a_dangling_pointer_poisons_its_subgraph_and_names_the_note(qem, ws, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 99), created(3, 3, 2), created(4, 4, 3)])
    s = shorts(ws)
    assert status(qem, 1)["current"] == "yes"  # an unrelated note is unaffected
    for note_id in (2, 3, 4):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert f"#{s[2]} points to #" in answer["reason"] and "dangling" in answer["reason"]
    verify = qem("verify")
    assert verify.returncode == 1 and f"dangling: #{s[2]} points to #" in verify.stdout
    # the pointer is kept in the log as a pointer to no note (the conversion does not drop it)
    full = full_ids(ws)
    dumped = {e["id"]: e for e in map(json.loads, qem("dump").stdout.splitlines()[1:])}
    pointer = dumped[full[2]]["data"]["supersedes"]
    assert ids_mod.is_id(pointer) and pointer not in full.values()


@pytest.mark.parametrize("pointer", ["abc", -3, 0, 1.5, True, [1], {"id": 1}])
def test_a_malformed_pointer_in_a_numbered_log_keeps_its_note_unknown(qem, ws, tmp_path, pointer):
    # the log holds only note ids as pointers, so a malformed one becomes a pointer to no
    # note: never dropped (that would make the note current), never read as a number
    # (True is not note 1)
    load(qem, tmp_path, [created(1, 1), created(2, 2, pointer), created(3, 3, 2)])
    s = shorts(ws)
    answer = status(qem, 2)
    assert answer["current"] == "unknown"
    assert f"#{s[2]} points to #" in answer["reason"] and "dangling" in answer["reason"]
    assert status(qem, 3)["current"] == "unknown"
    assert status(qem, 1)["current"] == "yes"
    full = full_ids(ws)
    dumped = {e["id"]: e for e in map(json.loads, qem("dump").stdout.splitlines()[1:])}
    kept = dumped[full[2]]["data"]["supersedes"]
    assert ids_mod.is_id(kept) and kept not in full.values()  # recorded, as a pointer to no note
    assert qem("verify").returncode == 1


def test_a_malformed_pointer_in_the_log_format_is_refused_naming_the_line(qem, ws, tmp_path):
    # a dump in the log's own format cannot carry one: the line is named, nothing is loaded
    load(qem, tmp_path, [created(1, 1)])
    line = json.loads(qem("dump").stdout.splitlines()[1])
    line["data"]["supersedes"] = "abc"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(line) + "\n")
    done = qem("load", str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "bad.jsonl:1" in done.stderr and "'abc' is not a note id" in done.stderr
    assert len(qem("dump").stdout.splitlines()) == 2  # the memory's id, and the one event


def test_a_malformed_pointer_is_named_by_the_resolver():
    a, b = _id("dddd"), _id("eeee")
    graph = Graph.of({a: _note(a, bad_pointer="'abc'"), b: _note(b, a)})
    assert graph.currency(a).value == "unknown"
    assert "#dddd has a malformed supersedes pointer 'abc'" in graph.currency(a).reason
    assert graph.currency(b).value == "unknown" and "(#eeee descends from #dddd)" in graph.currency(b).reason
    assert graph.problems() == ["malformed: #dddd has supersedes pointer 'abc'"]


def test_a_note_pointing_at_itself_is_unknown_not_a_loop(qem, ws, tmp_path):
    load(qem, tmp_path, [created(1, 1, 1)])
    answer = status(qem, 1)
    assert answer["current"] == "unknown" and "dangling" not in answer["reason"]
    assert f"cycle #{shorts(ws)[1]} → #{shorts(ws)[1]} (numbered #1 → #1 before the conversion)" in answer["reason"]


def test_a_fork_leaves_the_old_note_not_current_and_the_successors_unknown(qem, ws, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 1), created(3, 3, 1)])
    s, full = shorts(ws), full_ids(ws)
    old = status(qem, 1)
    assert old["current"] == "no" and {f"#{s[2]}", f"#{s[3]}"} <= set(old["reason"].replace(":", "").split())
    for note_id in (2, 3):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert (f"fork: #{s[2]} and #{s[3]} both supersede #{s[1]}" in answer["reason"]
                or f"fork: #{s[3]} and #{s[2]} both supersede #{s[1]}" in answer["reason"])
    kids = " and ".join(f"#{s[n]}" for n in sorted((2, 3), key=lambda n: full[n]))
    verify = qem("verify")
    assert f"fork: #{s[1]} is superseded by {kids}" in verify.stdout
    assert qem("verify", "--fail-on-disputes").returncode == 1
    # the export shows the fork on both successors, the way it shows a dispute
    rendered = qem("export", "--stdout").stdout
    assert f"DISPUTED with #{s[3]} (fork of #{s[1]})" in rendered
    assert f"DISPUTED with #{s[2]} (fork of #{s[1]})" in rendered
    assert qem("query", "disputed=yes", "--count").stdout == "2\n"


def test_a_fork_then_a_ruling_leaves_one_current(qem, ws, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 1), created(3, 3, 1)])
    s, full = shorts(ws), full_ids(ws)
    dispute = qem("dispute", "2", "3", "-m", "two successors")
    assert dispute.returncode == 0, dispute.stderr
    dispute_id = dispute.stdout.strip()
    ruled = qem("rule", dispute_id, "--keep", "3", "-m", "3 was measured")
    assert ruled.returncode == 0, ruled.stderr
    assert status(qem, 3) == {"id": full[3], "short": s[3], "current": "yes",
                              "reason": "current: in force, nothing supersedes it", "expires": None, "past_end": False,
                              "open_disputes": [], "scope": "team", "session": None}
    loser = status(qem, 2)
    assert loser["current"] == "no" and "revoked" in loser["reason"] and f"#{s[3]} stands" in loser["reason"]
    assert status(qem, 1)["current"] == "no"
    assert "DISPUTED" not in qem("export", "--stdout").stdout
    assert "0 notes match" in qem("query", "disputed=yes").stdout


def test_a_later_timestamp_on_an_older_link_does_not_win(qem, tmp_path):
    # #2 was written earlier in time, yet it supersedes #1: the pointer decides, not the clock
    load(qem, tmp_path, [
        created(1, 1, at="2026-09-01T00:00:00Z"),
        created(2, 2, 1, at="2026-01-01T00:00:00Z"),
        event(3, 1, "superseded", {"by": 2}, at="2026-01-01T00:00:00Z"),
    ])
    assert status(qem, 1)["current"] == "no"
    assert status(qem, 2)["current"] == "yes"


def test_plain_answers_name_the_reason(qem, ws):
    a = qem("add", "a", "-k", "gotcha").stdout.strip()
    b = qem("add", "b", "-k", "gotcha").stdout.strip()
    successor = qem("supersede", a, "a2")
    assert successor.returncode == 0
    c = successor.stdout.strip()
    assert qem("revoke", b, "-m", "wrong").returncode == 0
    d = qem("add", "c", "-k", "task").stdout.strip()
    assert qem("flag-stale", d, "-m", "old?").returncode == 0
    assert len({a, b, c, d}) == 4 and not any(x.isdigit() for x in (a, b, c, d))
    full = {n: json.loads(qem("show", n, "--json").stdout)["id"] for n in (a, b, c, d)}
    assert status(qem, a) == {"id": full[a], "short": a, "current": "no", "reason": f"superseded by #{c}",
                              "expires": None, "past_end": False,
                              "open_disputes": [], "scope": "team", "session": None}
    assert status(qem, b)["current"] == "no" and "revoked" in status(qem, b)["reason"]
    assert status(qem, c)["current"] == "yes"
    assert status(qem, d) == {"id": full[d], "short": d, "current": "yes", "reason": "current, but flagged stale: old?",
                              "expires": None, "past_end": False,
                              "open_disputes": [], "scope": "team", "session": None}
    assert status(qem, full[a])["short"] == a  # a full id (or any unambiguous prefix) finds it too
    plain = qem("status", a)
    assert plain.stdout.strip() == f"#{a} current: no (superseded by #{c})"
    missing = qem("status", "99")
    assert missing.returncode == 2 and "no note #99" in missing.stderr


def test_the_graph_is_a_pure_function_of_the_notes():
    one, two, three, gone = _id("f1"), _id("f2"), _id("f3"), _id("f9")
    notes = {one: _note(one, state="superseded", superseded_by=two), two: _note(two, one), three: _note(three, gone)}
    graph = Graph.of(notes)
    assert graph.currency(two).value == "yes"
    assert graph.currency(one).value == "no"
    assert graph.currency(three).value == "unknown"
    assert graph.problems() == [f"dangling: #f300 points to #{gone[:8]}, which is not in the log"]
    assert Graph.of(dict(reversed(list(notes.items())))).problems() == graph.problems()

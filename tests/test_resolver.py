"""Which note is current: yes, no or unknown, with the reason; never guessed.

Hand-made logs go in through `qem load` (the path a foreign log takes), and the answers
come out through `qem status`, `qem verify` and `qem query`, as a user would see them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qem_edit.model import Note
from qem_edit.resolver import Graph


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


def status(qem, note_id: int) -> dict:
    done = qem("status", str(note_id), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_cycle_of_two_is_unknown_for_both_and_named(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1, 2), created(2, 2, 1)])
    for note_id in (1, 2):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert "cycle #1 → #2 → #1" in answer["reason"]
    verify = qem("verify")
    assert verify.returncode == 1 and "cycle: #1 → #2 → #1" in verify.stdout


def test_a_cycle_of_three_is_rotated_to_its_smallest_id(qem, tmp_path):
    load(qem, tmp_path, [created(1, 5, 7), created(2, 6, 5), created(3, 7, 6), created(4, 8, 7)])
    for note_id in (5, 6, 7):
        assert status(qem, note_id)["current"] == "unknown"
        assert "cycle #5 → #7 → #6 → #5" in status(qem, note_id)["reason"]
    # a note downstream of the cycle cannot be placed either
    downstream = status(qem, 8)
    assert downstream["current"] == "unknown" and "cycle #5 → #7 → #6 → #5" in downstream["reason"]
    assert "(#8 descends from #" in downstream["reason"]


def test_a_dangling_pointer_poisons_its_subgraph_and_names_the_note(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 99), created(3, 3, 2), created(4, 4, 3)])
    assert status(qem, 1)["current"] == "yes"  # an unrelated note is unaffected
    for note_id in (2, 3, 4):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert "#2 points to #99" in answer["reason"] and "dangling" in answer["reason"]
    assert "dangling: #2 points to #99" in qem("verify").stdout


@pytest.mark.parametrize("pointer", ["abc", -3, 0, 1.5, True, [1], {"id": 1}])
def test_a_malformed_pointer_is_recorded_as_given_and_named(qem, tmp_path, pointer):
    load(qem, tmp_path, [created(1, 1), created(2, 2, pointer), created(3, 3, 2)])
    answer = status(qem, 2)
    assert answer["current"] == "unknown"
    assert "#2 has a malformed supersedes pointer" in answer["reason"]
    assert json.dumps(pointer) in answer["reason"]
    assert status(qem, 3)["current"] == "unknown"
    dumped = qem("dump").stdout.splitlines()
    assert json.loads(dumped[1])["data"]["supersedes"] == pointer  # recorded as given


def test_a_note_pointing_at_itself_is_malformed_not_a_loop(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1, 1)])
    answer = status(qem, 1)
    assert answer["current"] == "unknown" and "malformed" in answer["reason"]


def test_a_fork_leaves_the_old_note_not_current_and_the_successors_unknown(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 1), created(3, 3, 1)])
    old = status(qem, 1)
    assert old["current"] == "no" and "#2 and #3" in old["reason"]
    for note_id in (2, 3):
        answer = status(qem, note_id)
        assert answer["current"] == "unknown"
        assert "fork: #2 and #3 both supersede #1" in answer["reason"] or "fork: #3 and #2" in answer["reason"]
    assert "fork: #1 is superseded by #2 and #3" in qem("verify").stdout
    # the export shows the fork on both successors, the way it shows a dispute
    rendered = qem("export", "--stdout").stdout
    assert "DISPUTED with #3 (fork of #1)" in rendered and "DISPUTED with #2 (fork of #1)" in rendered
    assert qem("query", "disputed=yes", "--count").stdout == "2\n"


def test_a_fork_then_a_ruling_leaves_one_current(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1), created(2, 2, 1), created(3, 3, 1)])
    dispute = qem("dispute", "2", "3", "-m", "two successors")
    assert dispute.returncode == 0, dispute.stderr
    dispute_id = dispute.stdout.strip()
    ruled = qem("rule", dispute_id, "--keep", "3", "-m", "3 was measured")
    assert ruled.returncode == 0, ruled.stderr
    assert status(qem, 3) == {"id": 3, "current": "yes", "reason": "current: in force, nothing supersedes it"}
    loser = status(qem, 2)
    assert loser["current"] == "no" and "revoked" in loser["reason"] and "#3 stands" in loser["reason"]
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
    assert qem("add", "a", "-k", "gotcha").stdout.strip() == "1"
    assert qem("add", "b", "-k", "gotcha").stdout.strip() == "2"
    assert qem("supersede", "1", "a2").returncode == 0  # note 3
    assert qem("revoke", "2", "-m", "wrong").returncode == 0
    assert qem("add", "c", "-k", "task").returncode == 0  # note 4
    assert qem("flag-stale", "4", "-m", "old?").returncode == 0
    assert status(qem, 1) == {"id": 1, "current": "no", "reason": "superseded by #3"}
    assert status(qem, 2)["current"] == "no" and "revoked" in status(qem, 2)["reason"]
    assert status(qem, 3)["current"] == "yes"
    assert status(qem, 4) == {"id": 4, "current": "yes", "reason": "current, but flagged stale: old?"}
    plain = qem("status", "1")
    assert plain.stdout.strip() == "#1 current: no (superseded by #3)"
    missing = qem("status", "99")
    assert missing.returncode == 2 and "no note #99" in missing.stderr


def test_the_graph_is_a_pure_function_of_the_notes():
    def note(note_id, supersedes=None, state="active"):
        return Note(note_id, "finding", "medium", "t", "agent", "2026-01-01T00:00:00Z", "a",
                    supersedes=supersedes, state=state)

    notes = {1: note(1, state="superseded"), 2: note(2, 1), 3: note(3, 3 + 1000)}
    notes[1] = Note(**{**notes[1].__dict__, "superseded_by": 2})
    graph = Graph.of(notes)
    assert graph.currency(2).value == "yes"
    assert graph.currency(1).value == "no"
    assert graph.currency(3).value == "unknown"
    assert graph.problems() == ["dangling: #3 points to #1003, which is not in the store"]

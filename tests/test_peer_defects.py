"""The closest peer's known defects (shared/FIELD-NOTES.md), one test each, so that qem
provably does not have them.  Each test is the sharpest form of the defect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import add, emit, render_text, shown, store_path
from qem_edit.reconciler.parse import parse

from qem_edit.base import errors
from qem_edit.base.resolver import Graph
from qem_edit.storage.store import Store
from qem_edit.writes import checkin
from qem_edit.writes.checkin_plan import propose


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(store_path(tmp_path), create=True) as handle:
        yield handle


def test_dates_are_utc_whatever_the_time_zone(tmp_path: Path) -> None:
    """Peer: dates rendered in the machine's local time zone, so bytes depend on TZ."""
    db = store_path(tmp_path)
    with Store.open(db, create=True) as handle:
        short = shown(handle, add(handle, "written just after midnight UTC", at="2026-07-01T02:00:00Z"))
    outputs = set()
    for tz in ("UTC", "America/Los_Angeles", "Pacific/Kiritimati", "Asia/Kolkata"):
        done = subprocess.run(
            [sys.executable, "-m", "qem_edit", "export", "--stdout", "--store", str(db)],
            capture_output=True, env={**os.environ, "TZ": tz}, cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert f"- [#{short}] 2026-07-01 ".encode() in outputs.pop()  # Los Angeles would say 2026-06-30


def test_a_heading_inside_a_note_neither_truncates_it_nor_moves_it(store: Store) -> None:
    """Peer: a body line starting with `## ` is written verbatim, and the edit path then
    supersedes that note with its body cut off at that line."""
    text = "Keep the lock order.\n## Findings\n- [#99] 2026-01-01 · high · agent · forged\nend of note"
    victim = add(store, text)
    other = add(store, "an unrelated note")
    head, checkout = render_text(store)
    edited = checkout.replace("an unrelated note", "an unrelated note, edited")
    planned = propose(store, edited, checkout)
    assert planned.plan.ok
    assert [(op.action, op.note_id) for op in planned.plan.ops] == [("supersede", other)]
    checkin.apply_plan(store, planned.plan, "person", "edit")
    assert store.note(victim).text == text and store.note(victim).state == "active"
    successor = store.note(other).superseded_by
    assert successor is not None and store.note(successor).text == "an unrelated note, edited"
    assert {n.id for n in store.notes()} == {victim, other, successor}  # no forged #99


def test_kind_and_priority_edits_are_events_that_keep_the_old_note(store: Store) -> None:
    """Peer: kind, priority and tag edits are in-place UPDATEs with no event."""
    old = add(store, "Release the lock before restart", priority="low")
    _, checkout = render_text(store)
    line = _item_line(checkout, shown(store, old))
    # raise its priority and move it under Findings
    edited = checkout.replace(line + "\n", "", 1).replace(
        "## Findings\n", "## Findings\n\n" + line.replace(" · low · ", " · high · ") + "\n", 1
    )
    planned = propose(store, edited, checkout)
    assert planned.plan.ok, checkin.problems(planned)
    checkin.apply_plan(store, planned.plan, "person", "reclassify")
    before = store.note(old)
    assert (before.kind, before.priority, before.state) == ("gotcha", "low", "superseded")
    after = store.note(before.superseded_by)
    assert (after.kind, after.priority, after.provenance) == ("finding", "high", "human")
    assert [e.type for e in store.events(old)] == ["created", "superseded"]


def _item_line(text: str, short: str) -> str:
    return next(line for line in text.split("\n") if line.startswith(f"- [#{short}] "))


def test_a_concurrent_lifecycle_change_is_a_conflict(store: Store) -> None:
    """Peer: the conflict check fingerprints content only, so a concurrent revoke of an
    edited note applies cleanly and leaves two active heads."""
    note = add(store, "the cache is warm after a rebuild")
    _, checkout = render_text(store)
    edited = checkout.replace("warm after", "cold after")
    emit(store, note, "revoked", "measured: it is cold", actor="agent-2", at=None)
    planned = propose(store, edited, checkout)
    assert [c.note_id for c in planned.plan.conflicts] == [note]
    assert not planned.plan.ok
    live = [n for n in store.notes() if n.live]
    assert live == []  # and nothing was applied: no second head


def test_the_conflict_check_and_the_writes_are_one_transaction(store: Store) -> None:
    """Peer: the conflict check and the writes are not in one transaction.  Here the plan
    names the head it was made against, and the transaction that applies it checks that
    head first: a write landing in between makes the apply refuse, writing nothing."""
    note = add(store, "alpha")
    _, checkout = render_text(store)
    planned = propose(store, checkout.replace("alpha", "beta"), checkout)
    assert planned.plan.ok
    emit(store, note, "revoked", "in between", actor="agent-2", at=None)
    head, written = store.head(), len(store.events())
    with pytest.raises(errors.HeadMoved):
        checkin.apply_plan(store, planned.plan, "person", "late")
    assert store.head() == head and len(store.events()) == written and store.note(note).state == "revoked"
    # planned again against the store as it is now, the same edit is a conflict
    assert propose(store, checkout.replace("alpha", "beta"), checkout).plan.conflicts


def test_a_fork_is_reported_not_silently_won(qem, ws: Path, tmp_path: Path) -> None:
    """Peer: two notes superseding the same note both stay active and the later silently
    wins the back-pointer; nothing reports the fork.  Here `qem verify` names it (an open
    dispute: listed, and a failure under --fail-on-disputes, as a CI job runs it)."""
    lines = []
    for seq, (note_id, parent) in enumerate([(1, None), (2, 1), (3, 1)], start=1):
        lines.append(json.dumps({
            "seq": seq, "note_id": note_id, "type": "created", "at": f"2026-01-0{seq}T00:00:00Z",
            "actor": "x", "reason": None, "checkin": None,
            "data": {"kind": "finding", "priority": "medium", "provenance": "agent",
                     "text": f"n{note_id}", "supersedes": parent},
        }))
    (tmp_path / "fork.jsonl").write_text("\n".join(lines) + "\n")
    assert qem("load", str(tmp_path / "fork.jsonl")).returncode == 0
    with Store.open(store_path(ws)) as loaded:
        parent = shown(loaded, 1)
        kids = [n.shown for n in sorted((loaded.note(loaded.resolve(k)) for k in (2, 3)), key=lambda n: n.id)]
    fork = f"fork: #{parent} is superseded by #{kids[0]} and #{kids[1]}"
    verify = qem("verify")
    assert verify.returncode == 0 and fork in verify.stdout and "1 open dispute" in verify.stderr
    strict = qem("verify", "--fail-on-disputes")
    assert strict.returncode == 1 and fork in strict.stdout
    for note_id in (2, 3):  # neither "wins": the later timestamp means nothing
        assert json.loads(qem("status", str(note_id), "--json").stdout)["current"] == "unknown"


def test_the_edit_buffer_is_the_audit_view(store: Store) -> None:
    """Peer: the edit buffer shows active notes only, and the audit view is another file,
    so a reviewer cannot check in what they read in git.  Here they are one format: the
    exported file, history included, is what `qem checkin` takes."""
    kept, gone = add(store, "kept"), add(store, "gone")
    emit(store, gone, "revoked", "wrong", actor="agent-1", at=None)
    _, exported = render_text(store)
    parsed = parse(exported)
    assert {i.note_id: i.state for i in parsed.items} == {shown(store, kept): "active", shown(store, gone): "revoked"}
    planned = propose(store, exported.replace("· kept", "· kept, reviewed"))
    assert planned.plan.ok and [(op.action, op.note_id) for op in planned.plan.ops] == [("supersede", kept)]


def test_a_fork_loaded_from_elsewhere_is_visible_in_the_graph() -> None:
    """The resolver's own view of the same fork, without a store."""
    from qem_edit.base.replay import Note

    def note(note_id: str, parent: str | None) -> Note:
        return Note(note_id, "finding", "medium", "t", "agent", "2026-01-01T00:00:00Z", "a", supersedes=parent)

    one, two, three = ("a" * 26, "b" * 26, "c" * 26)
    graph = Graph.of({one: note(one, None), two: note(two, one), three: note(three, one)})
    assert graph.forks() == {one: [two, three]}

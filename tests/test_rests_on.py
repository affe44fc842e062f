"""Notes that rest on notes: `--rests-on` on every way in, and a base's change flagging every
note resting on it, transitively, in the same write, with its cause named; the same across
clones (real git, a bare origin) and for random histories (hypothesis, against a brute-force
closure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import planted_created, store_path
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_git import same_view, team  # noqa: F401  (the fixture)
from test_mcp import failed, ok, serve

from qem_edit.base.decisions import NewNote
from qem_edit.storage.store import Store


def _notes(qem) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    return {row["short"]: row for row in json.loads(qem("list", "--json").stdout)}


def _flags(ws: Path, note: str) -> list[Any]:
    with Store.open(store_path(ws)) as store:
        full = store.resolve(note)
        return [e for e in store.events(full) if e.type == "stale_flagged"]


def _event_files(ws: Path) -> set[str]:
    """The log's event files: loose events and event packs."""
    memory = store_path(ws)
    packs = (memory / "packs").iterdir() if (memory / "packs").exists() else []
    return {p.name for p in (memory / "events").iterdir()} | {p.name for p in packs if p.name.startswith("e")}


def _chain(qem) -> tuple[str, str, str, str]:  # type: ignore[no-untyped-def]
    """A base, a note resting on it, one resting on that, and a bystander."""
    base = qem("add", "The estimate is 2 days", "-k", "finding").stdout.strip()
    total = qem("add", "The total is 4 days", "-k", "decision", "--rests-on", base).stdout.strip()
    plan = qem("add", "Ship on Friday", "-k", "task", "--rests-on", total).stdout.strip()
    other = qem("add", "The build needs python 3.11", "-k", "finding").stdout.strip()
    return base, total, plan, other


@pytest.mark.parametrize("move, state, words", [
    (("supersede", "{base}", "The estimate is 3 days", "-m", "measured"), "superseded", "which was superseded by #"),
    (("revoke", "{base}", "-m", "wrong"), "revoked", "which was revoked"),
    (("expire", "{base}", "-m", "sprint over"), "expired", "which was expired"),
    (("forget", "{base}", "-m", "leaked", "--yes"), "forgotten", "which was forgotten"),
    (("flag-stale", "{base}", "-m", "the model changed"), "stale", "which was flagged stale"),
])
def test_a_base_leaving_force_flags_every_note_resting_on_it_in_the_same_write(qem, ws: Path, move, state, words) -> None:
    base, total, plan, other = _chain(qem)
    before = _event_files(ws)
    done = qem(*(m.format(base=base) for m in move))
    assert done.returncode == 0, done.stderr
    assert len(_event_files(ws) - before) == 1, "the change and its flags land as one pack: one write"
    notes = _notes(qem)
    assert notes[base]["state"] == state
    assert notes[total]["state"] == "stale" and notes[plan]["state"] == "stale"
    assert notes[other]["state"] == "active"
    assert notes[total]["state_reason"].startswith(f"rests on #{base}") and words in notes[total]["state_reason"]
    assert notes[plan]["state_reason"].startswith(f"rests on #{base} through #{total}")
    [flag] = _flags(ws, total)
    with Store.open(store_path(ws)) as store:
        full_base, full_total = store.resolve(base), store.resolve(total)
        base_event = store.note(full_base).state_event
    assert flag.data["rests_on"] == {"base": full_base, "event": base_event, "root": full_base, "change": state}
    [through] = _flags(ws, plan)
    assert through.data["rests_on"] == {"base": full_total, "event": flag.id, "root": full_base, "change": state}
    status = qem("status", plan).stdout
    assert f"rests on #{base} through #{total}, which was" in status
    assert f"rests on notes in force: no (#{total} is flagged stale)" in status


def test_a_person_confirms_a_dependent_and_a_later_write_does_not_flag_it_again(qem, ws: Path) -> None:
    base, total, plan, _ = _chain(qem)
    qem("revoke", base, "-m", "wrong")
    assert qem("reinstate", total, "-m", "still 4 days: checked").returncode == 0
    qem("add", "Anything at all", "-k", "finding")
    notes = _notes(qem)
    assert notes[total]["state"] == "active" and notes[plan]["state"] == "stale"
    assert len(_flags(ws, total)) == 1
    assert "confirmed since (reinstated)" in qem("status", total).stdout
    # a new change of the base (reinstated, then flagged stale) flags it again: another change
    qem("reinstate", base, "-m", "right after all")
    qem("flag-stale", base, "-m", "the model changed again")
    assert _notes(qem)[total]["state"] == "stale" and len(_flags(ws, total)) == 2


def test_re_pointing_by_superseding_keeps_only_the_bases_still_in_force(qem, ws: Path) -> None:
    base, total, plan, other = _chain(qem)
    qem("supersede", base, "The estimate is 3 days", "-m", "measured")
    new_base = _notes(qem)[base]["superseded_by"]
    successor = qem("supersede", total, "The total is 5 days", "--rests-on", new_base, "--rests-on", other).stdout.strip()
    row = _notes(qem)[successor]
    assert row["state"] == "active" and sorted(row["rests_on"]) == sorted([new_base, _full(ws, other)])
    assert _notes(qem)[plan]["state"] == "stale", "the plan rested on the old total, which is superseded now"
    kept = qem("supersede", successor, "The total is 5 days, checked").stdout.strip()
    assert sorted(_notes(qem)[kept]["rests_on"]) == sorted([new_base, _full(ws, other)])


def _full(ws: Path, short: str) -> str:
    with Store.open(store_path(ws)) as store:
        return store.resolve(short)


def test_the_sweep_of_due_notes_flags_their_dependents(qem, ws: Path) -> None:
    base = qem("add", "The freeze ends on Friday", "-k", "finding", "--expires", "2030-01-01").stdout.strip()
    plan = qem("add", "Merge after the freeze", "-k", "task", "--rests-on", base).stdout.strip()
    done = qem("expire", "--due", env={"QEM_NOW": "2030-01-02T00:00:00Z"})
    assert done.returncode == 0, done.stderr
    notes = _notes(qem)
    assert notes[base]["state"] == "expired" and notes[plan]["state"] == "stale"
    assert notes[plan]["state_reason"] == f"rests on #{base}, which was expired"


@pytest.mark.parametrize("move", [("revoke", "-m", "wrong"), ("forget", "-m", "leaked", "--yes"),
                                  ("supersede", "The estimate is 3 days"), ("flag-stale", "-m", "old")])
def test_a_session_note_on_a_team_note_never_blocks_its_change_outside_the_session(qem, ws: Path, move) -> None:
    """The flag of another session's note resting on the base is this clone's consequence
    of the change, written on that note; it is not the writer reading that note."""
    base = qem("add", "The estimate is 2 days", "-k", "finding").stdout.strip()
    s1 = {"QEM_SESSION": "s1"}
    dep = qem("add", "My total is 4 days", "-k", "decision", "--scope", "session", "--rests-on", base, env=s1)
    assert dep.returncode == 0, dep.stderr
    done = qem(move[0], base, *move[1:])
    assert done.returncode == 0, done.stderr
    row = {r["short"]: r for r in json.loads(qem("list", "--json", env=s1).stdout)}[dep.stdout.strip()]
    assert row["state"] == "stale" and row["state_reason"].startswith(f"rests on #{base}")
    assert base in qem("list").stdout and dep.stdout.strip() not in qem("list").stdout  # still hidden outside s1


@pytest.mark.parametrize("args, said", [
    (("--rests-on", "zzzz"), "no note"),
    (("--rests-on", "{gone}"), "is revoked"),
    (("--rests-on", "{stale}"), "is stale"),
])
def test_a_base_that_is_no_ground_is_refused_and_nothing_is_written(qem, ws: Path, args, said) -> None:
    gone = qem("add", "Gone", "-k", "finding").stdout.strip()
    qem("revoke", gone, "-m", "wrong")
    stale = qem("add", "Doubtful", "-k", "finding").stdout.strip()
    qem("flag-stale", stale, "-m", "unsure")
    count = len(_notes(qem))
    done = qem("add", "Rests on nothing good", "-k", "decision", *(a.format(gone=gone, stale=stale) for a in args))
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert len(_notes(qem)) == count


def test_a_check_in_reads_the_marker_back_and_refuses_a_base_out_of_force_on_its_line(qem, ws: Path) -> None:
    base, total, plan, other = _chain(qem)
    qem("export")
    text = (ws / "MEMORY.md").read_text("utf-8")
    assert f"· rests on #{base} · The total is 4 days" in text
    assert f"· rests on #{total} · Ship on Friday" in text
    edited = text.replace("## References\n", f"## References\n\n- high · rests on #{other}, #{base} · Two bases\n")
    (ws / "MEMORY.md").write_text(edited, "utf-8")
    done = qem("checkin", "-m", "a note on two bases", "--yes")
    assert done.returncode == 0, done.stderr
    [new] = [row for row in _notes(qem).values() if row["text"] == "Two bases"]
    assert sorted(new["rests_on"]) == sorted([_full(ws, base), _full(ws, other)])
    # an edit that drops a base supersedes the note, resting on what the marker says now
    text = (ws / "MEMORY.md").read_text("utf-8")
    line = next(ln for ln in text.splitlines() if ln.endswith("Two bases"))
    marker = next(f for f in line.split(" · ") if f.startswith("rests on "))
    assert sorted(marker.removeprefix("rests on ").split(", ")) == sorted([f"#{base}", f"#{other}"])
    (ws / "MEMORY.md").write_text(text.replace(line, line.replace(marker, f"rests on #{base}")), "utf-8")
    assert qem("checkin", "-m", "one base", "--yes").returncode == 0
    live = [row for row in _notes(qem).values() if row["text"] == "Two bases" and row["state"] == "active"]
    assert [row["rests_on"] for row in live] == [[_full(ws, base)]]
    # a marker naming a base out of force is refused on its line, nothing checked in
    qem("revoke", other, "-m", "wrong")
    text = (ws / "MEMORY.md").read_text("utf-8")
    (ws / "MEMORY.md").write_text(text.replace("## Tasks\n", f"## Tasks\n\n- rests on #{other} · Doomed\n"), "utf-8")
    done = qem("checkin", "-m", "bad", "--yes")
    assert done.returncode == 2 and f"`rests on #{other}`: that note is revoked" in done.stderr
    assert f"qem: error: {ws / 'MEMORY.md'}: 1 problem(s)" in done.stderr, done.stderr  # (the file named)
    assert not any(row["text"] == "Doomed" for row in _notes(qem).values())


def test_a_check_in_that_revokes_a_base_and_rests_a_new_note_on_it_is_refused_naming_file_and_line(
        qem, ws: Path) -> None:
    """The marker names a base the same check-in takes out of force: refused when applied
    (exit 2), the file and the line named, nothing checked in."""
    base = qem("add", "The estimate is 2 days", "-k", "finding").stdout.strip()
    qem("export")
    mirror = ws / "MEMORY.md"
    text = mirror.read_text("utf-8")
    line = next(ln for ln in text.splitlines() if ln.endswith("The estimate is 2 days"))
    mirror.write_text(text.replace(line + "\n", "").replace("## Tasks\n", f"## Tasks\n\n- rests on #{base} · Doomed\n"),
                      "utf-8")
    done = qem("checkin", "-m", "both at once", "--yes")
    assert done.returncode == 2, done.stderr
    assert f"qem: error: {mirror}: line " in done.stderr and f"`rests on #{base}`: that note is revoked" in done.stderr
    assert _notes(qem)[base]["state"] == "active" and "Doomed" not in {r["text"] for r in _notes(qem).values()}


def test_mcp_add_and_supersede_take_rests_on(qem, ws: Path) -> None:
    base = qem("add", "The estimate is 2 days", "-k", "finding").stdout.strip()

    async def script(s: Any) -> Any:
        made = await ok(s, "add", text="The total is 4 days", kind="decision", rests_on=[base])
        bad = await failed(s, "add", text="On nothing", kind="decision", rests_on=["zzzz"])
        return made.structured_content, bad

    made, bad = serve(ws, script)
    assert made["rests_on"] == [_full(ws, base)]
    assert "zzzz" in bad
    qem("revoke", base, "-m", "wrong")
    assert _notes(qem)[made["short"]]["state"] == "stale"


def test_load_keeps_rests_on_and_a_clone_file_with_a_malformed_one_is_set_aside(qem, ws: Path, tmp_path: Path) -> None:
    base, total, plan, _ = _chain(qem)
    dump = qem("dump").stdout
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "log.jsonl").write_text(dump, "utf-8")
    assert qem("load", str(tmp_path / "log.jsonl"), "-w", str(other)).returncode == 0
    qem("export")
    assert qem("export", "--stdout", "-w", str(other)).stdout == (ws / "MEMORY.md").read_text("utf-8")
    rows = [json.loads(line) for line in dump.splitlines()]
    for row in rows:
        if row.get("data", {}).get("rests_on"):
            row["data"]["rests_on"] = ["not an id"]
    (tmp_path / "bad.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    third = tmp_path / "third"
    third.mkdir()
    done = qem("load", str(tmp_path / "bad.jsonl"), "-w", str(third))
    assert done.returncode == 2 and "rests_on" in done.stderr and "Traceback" not in done.stderr
    # a file from another clone: a malformed pointer sets the file aside (named by verify),
    # a dangling one (a base this log lacks) is kept and read as unknown
    planted_created(store_path(ws), "Malformed", "decision", rests_on=["x"])
    dangling = planted_created(store_path(ws), "Dangling", "decision", rests_on=["a" * 26])
    listing = qem("list").stdout
    assert "Malformed" not in listing and "Dangling" in listing
    said = qem("verify").stdout + qem("verify").stderr
    assert "rests_on" in said
    status = qem("status", Path(dangling).name[:8]).stdout
    assert "rests on notes in force: unknown (#aaaaaaaa is not in this log)" in status


def test_a_cycle_is_unknown_and_named(qem, ws: Path) -> None:
    from qem_edit.base import resting
    from qem_edit.base.replay import Note

    def note(i: str, *bases: str) -> Note:
        return Note(i, "finding", "medium", "t", "agent", "2026-01-01T00:00:00Z", "a", rests_on=bases, short=i[:4])

    graph = {"aaaa1": ("bbbb1",), "bbbb1": ("cccc1",), "cccc1": ("aaaa1",), "dddd1": ("aaaa1",)}
    loop = resting.cycle("dddd1", lambda n: graph.get(n, ()))
    assert loop == ["aaaa1", "bbbb1", "cccc1", "aaaa1"]
    value, why = resting.standing(note("dddd1", "aaaa1"), {"aaaa1": note("aaaa1", "bbbb1")}, loop,
                                  "2026-06-01T00:00:00Z")
    assert value == "unknown" and why == "its bases form a cycle: #aaaa → #bbbb1 → #cccc1 → #aaaa"
    assert resting.cycle("aaaa1", lambda n: {"aaaa1": ("bbbb1",)}.get(n, ())) is None


# -- across clones ---------------------------------------------------------------------------------


def test_two_clones_flag_the_same_change_and_agree_after_a_merge(team) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    base = founder.add("The estimate is 2 days")
    total = founder.qem("add", "The total is 4 days", "-k", "decision", "--rests-on", base).stdout.strip()
    founder.qem("export")
    founder.publish("a note on a base")
    mate = team.clone("mate")
    # each clone revokes the base on its own: each flags the dependent in its write
    founder.qem("revoke", base, "-m", "wrong estimate")
    mate.qem("revoke", base, "-m", "the estimate was wrong")
    # and the mate adds a note on a note the founder is about to supersede
    later = mate.qem("add", "Ship on Friday", "-k", "task", "--rests-on", founder_short(mate)).stdout.strip()
    founder.qem("supersede", founder_short(founder), "the build needs python 3.12", "-m", "upgraded")
    for clone in (founder, mate):
        clone.qem("export")
        clone.commit("work")
    mate.pull()
    mate.git("push", "-q", "origin", "main")
    founder.pull()
    for clone in (founder, mate):
        row = {r["short"]: r for r in clone.notes()}
        assert row[total]["state"] == "stale" and not row[total]["rivals"], "two flags for one change agree"
    # the supersession arrived by the pull: the next write on either clone flags the note on it
    assert "not flagged yet" in founder.qem("status", later).stdout
    verify = founder.qem("verify")  # listed, never failed: the next write flags it
    assert f"#{later} rests on #" in verify.stdout + verify.stderr and "not flagged yet" in verify.stdout + verify.stderr
    founder.add("after the pull")
    mate.add("after the pull too")
    for clone in (founder, mate):
        clone.qem("export")
        clone.commit("flagged")
    mate.pull()
    mate.git("push", "-q", "origin", "main")
    founder.pull()
    founder.git("push", "-q", "origin", "main")
    mate.pull()
    view = same_view(founder, mate)
    rows = {r["short"]: r for r in founder.notes()}
    assert rows[later]["state"] == "stale" and not rows[later]["rivals"]
    assert rows[later]["state_reason"].startswith("rests on #") and "superseded" in rows[later]["state_reason"]
    fresh = team.clone("fresh")
    assert fresh.memory_md() == view
    fresh.qem("verify")
    fresh.qem("export", "--check")
    assert {r["short"]: r["state"] for r in fresh.notes()} == {r["short"]: r["state"] for r in founder.notes()}


def test_a_pulled_change_of_a_base_flags_a_session_note_resting_on_it_at_the_next_write(team) -> None:  # noqa: F811
    """After a pull revoking a team note a session note of this clone rests on, every
    write here still works, and the first one flags the session note (its flag stays here)."""
    founder = team.founded("the build needs python 3.11")
    base = founder_short(founder)
    mate = team.clone("mate")
    dep = founder.qem("add", "this exercise uses 3.11", "-k", "finding", "--scope", "session", "--session", "s1",
                      "--rests-on", base).stdout.strip()
    mate.qem("revoke", base, "-m", "upgraded")
    mate.qem("export")
    mate.publish("revoked")
    founder.pull()
    founder.add("after the pull")
    team.monkeypatch.setenv("QEM_SESSION", "s1")
    row = {r["short"]: r for r in founder.notes()}[dep]
    assert row["state"] == "stale" and row["state_reason"].startswith(f"rests on #{base}")
    team.monkeypatch.delenv("QEM_SESSION")
    founder.qem("export")
    founder.check()


def founder_short(clone) -> str:  # type: ignore[no-untyped-def]
    return clone.texts_short("the build needs python 3.11")


# -- random histories against a brute-force closure --------------------------------------------------

_MOVES = ("add", "add", "supersede", "revoke", "expire", "forget", "flag", "reinstate")
_SOURCES = {"supersede": ("active", "stale"), "revoke": ("active", "stale"), "expire": ("active", "stale"),
            "flag": ("active",), "reinstate": ("revoked", "stale", "expired"),
            "forget": ("active", "stale", "superseded", "revoked", "expired")}


def _brute_flags(states: dict[str, str], rests: dict[str, tuple[str, ...]], changed: str) -> set[str]:
    """The notes in plain force from which `changed` is reached over rests-on edges whose
    every note on the way (but `changed`) was in plain force before the change: found by
    trying every note, walking its paths."""
    out = set()
    for start in states:
        if states[start] != "active":
            continue
        stack, seen = [start], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for base in rests.get(node, ()):
                if base == changed:
                    out.add(start)
                elif states.get(base) == "active":
                    stack.append(base)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_MOVES), st.integers(0, 7), st.lists(st.integers(0, 7), min_size=1, max_size=3)),
                min_size=1, max_size=20))
@example([("add", 0, [0]), ("add", 0, [0]), ("add", 1, [1]), ("revoke", 0, [0]), ("reinstate", 1, [0]),
          ("add", 0, [0]), ("flag", 2, [0])])
def test_the_notes_flagged_are_the_transitive_closure_for_random_histories(tmp_path_factory, steps) -> None:
    root = tmp_path_factory.mktemp("hist")
    store = Store.open(root / ".qem", create=True)
    states: dict[str, str] = {}
    rests: dict[str, tuple[str, ...]] = {}
    order: list[str] = []
    try:
        for move, pick, picks in steps:
            live = [n for n in order if states[n] == "active"]
            able = [n for n in order if states[n] in _SOURCES.get(move, ())]  # a move that makes sense
            target = able[pick % len(able)] if able else None
            bases = tuple(sorted({live[p % len(live)] for p in picks})) if live else ()
            changed = _step(store, move, target, bases, states, rests, order)
            if changed is not None:
                before = dict(states)
                before[changed] = "gone"
                for note in _brute_flags(before, rests, changed):
                    states[note] = "stale"
            found = {n.id: n.state for n in store.notes()}
            assert {n for n, s in found.items() if s == "stale"} == {n for n, s in states.items() if s == "stale"}, steps
            assert found == states
    finally:
        store.close()


def _step(store: Store, move: str, target: str | None, bases: tuple[str, ...], states: dict[str, str],
          rests: dict[str, tuple[str, ...]], order: list[str]) -> str | None:
    """One move on the store and on the model; the note whose change must flag (None: none)."""
    to = {"revoke": ("revoked", ("active", "stale")), "expire": ("expired", ("active", "stale")),
          "flag": ("stale", ("active",)), "reinstate": ("active", ("revoked", "stale", "expired")),
          "forget": ("forgotten", ("active", "stale", "superseded", "revoked", "expired"))}
    if target is None and move != "add":
        return None
    if move == "add":
        note = store.write(lambda tx: tx.create(NewNote("finding", "medium", "agent", f"n{len(order)}",
                                                        rests_on=bases), "t"))
        states[note.id], rests[note.id] = "active", bases
        order.append(note.id)
        return None
    if move == "supersede":
        kept = tuple(b for b in rests[target] if states[b] == "active")
        note = store.write(lambda tx: tx.create(NewNote("finding", "medium", "agent", f"s{len(order)}", target,
                                                        rests_on=kept), "t", "r"))
        states[note.id], rests[note.id], states[target] = "active", kept, "superseded"
        order.append(note.id)
        return target
    state, sources = to[move]
    assert states[target] in sources
    event = {"revoke": "revoked", "expire": "expired", "flag": "stale_flagged", "reinstate": "reinstated"}.get(move)
    store.write(lambda tx: tx.forget(target, "t", "r") if move == "forget" else tx.emit(target, event, "t", "r"))
    states[target] = state
    return None if move == "reinstate" else target


def test_a_drift_flag_and_a_check_in_that_revokes_a_base_flag_its_dependents(qem, ws: Path) -> None:
    (ws / "lock.py").write_text("ORDER = 1\n", "utf-8")
    base = qem("add", "The lock is taken first", "-k", "gotcha", "--anchor", "lock.py").stdout.strip()
    rule = qem("add", "Release in reverse order", "-k", "directive", "--rests-on", base).stdout.strip()
    (ws / "lock.py").write_text("ORDER = 2\n", "utf-8")
    assert qem("anchors", "check", "--flag").returncode == 1
    notes = _notes(qem)
    assert notes[base]["state"] == "stale" and notes[rule]["state"] == "stale"
    assert notes[rule]["state_reason"] == f"rests on #{base}, which was flagged stale"
    # a check-in that deletes a base's item revokes it, and flags what rests on it
    other = qem("add", "The cache holds an hour", "-k", "finding").stdout.strip()
    plan = qem("add", "Warm the cache hourly", "-k", "task", "--rests-on", other).stdout.strip()
    qem("export")
    text = (ws / "MEMORY.md").read_text("utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith(f"- [#{other}]"))
    (ws / "MEMORY.md").write_text(text.replace(line + "\n", ""), "utf-8")
    done = qem("checkin", "-m", "the cache changed", "--yes")
    assert done.returncode == 0, done.stderr
    notes = _notes(qem)
    assert notes[other]["state"] == "revoked" and notes[plan]["state"] == "stale"
    assert f"STALE {notes[plan]['state_at'][:10]} (rests on #{other}, which was revoked)" in (ws / "MEMORY.md").read_text("utf-8")


def test_the_commit_hooks_drift_flag_of_a_base_flags_a_session_note_on_it(qem, ws: Path) -> None:
    """`qem anchors check --staged --flag` (the commit hook) flags a drifted team note that
    another session's note rests on, and that note with it."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@a", *args], cwd=ws, check=True,
                       capture_output=True)

    git("init", "-q")
    (ws / "f.txt").write_text("a\n", "utf-8")
    git("add", "f.txt")
    git("commit", "-qm", "f")
    base = qem("add", "f.txt says a", "-k", "finding", "--anchor", "f.txt").stdout.strip()
    dep = qem("add", "so we say a", "-k", "finding", "--scope", "session", "--rests-on", base,
              env={"QEM_SESSION": "s1"}).stdout.strip()
    git("add", "-A")
    git("commit", "-qm", "the notes")
    (ws / "f.txt").write_text("c\n", "utf-8")
    git("add", "f.txt")
    done = qem("anchors", "check", "--staged", "--flag")
    assert done.returncode == 1 and f"flagged stale: #{base}" in done.stdout, done.stdout + done.stderr
    row = {r["short"]: r for r in json.loads(qem("list", "--json", env={"QEM_SESSION": "s1"}).stdout)}[dep]
    assert row["state"] == "stale" and row["state_reason"].startswith(f"rests on #{base}")

"""Concurrency stress: writers and check-ins hammer one store, and nothing is lost.

Several writer processes add, supersede, revoke and flag notes stale (two through the
store API, two through qem's own CLI code, all with auto-export on), while several
scripted people check edits in (`qem checkout` + an edit + `qem checkin --yes`, and
`qem edit --yes` with a QEM_EDITOR script).  Afterwards the test proves:

- zero lost writes: every acknowledged write (an id printed, exit 0) is in the log;
- zero "locked" (or any traceback) in any process's output;
- every check-in exited 0 (applied) or 3 (refused with a conflict), nothing else;
- every conflict was real, by an oracle that reads only the log: a refused check-in's base
  was followed by an event on a note it changed that did not reach the end it asked for;
  an applied one had no such event before it, and it wrote exactly what it asked for;
- the memory verifies (no fork, no concurrent change: writers on one clone take turns
  under the write lock), and the mirror is the rendering of the final log.

Positions in the log are Lamport clocks: on one clone every write holds the write lock and
starts from the highest clock, so the clocks are 1, 2, 3, ... with no gap (the test checks
it), as the old sequence numbers were.  A check-in's base is found by rendering: the
prefix of the log whose rendering is the text the person edited.

Bounded (well under a minute).  The soak runs the same with QEM_SOAK=N times the work:
    QEM_SOAK=10 python -m pytest tests/test_stress.py -k soak
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _reliability import EDITOR_SCRIPT, SOAK, no_traceback, python_env, record, verify
from qem_edit.renderer import Selection

from qem_edit.base.decisions import NewNote
from qem_edit.base.replay import Note, after_event, note_from_created
from qem_edit.mirror.export import export, render_store
from qem_edit.storage.store import Store
from qem_edit.storage.transaction import Transaction

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
KINDS = ("directive", "task", "gotcha", "finding", "reference", "decision", "operational")

API_WRITER = r'''
import json, random, sys
from pathlib import Path
from qem_edit.base import errors
from qem_edit.mirror.export import auto_export
from qem_edit.base.decisions import NewNote
from qem_edit.storage.store import Store
from qem_edit.system.workspace import Workspace

root, name, count, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
place = Workspace(root, root / ".qem")
for i in range(count):
    token = f"{name}-{i}"
    with Store.open(place.store_path) as store:
        live = [n for n in store.notes() if n.state in ("active", "stale")]
        pick = rng.choice(live)
        op = rng.choice(("add", "add", "supersede", "revoke", "flag-stale"))
        try:
            if op == "add":
                note = store.write(lambda tx: tx.create(NewNote("finding", "low", "agent", token), name))
                ack = [op, token, note.id]
            elif op == "supersede":
                new = NewNote(pick.kind, pick.priority, pick.provenance, token, pick.id)
                ack = [op, token, pick.id, store.write(lambda tx: tx.create(new, name)).id]
            else:
                kind = "revoked" if op == "revoke" else "stale_flagged"
                ack = [op, token, pick.id, store.write(lambda tx: tx.emit(pick.id, kind, name, token)).id]
        except errors.Refused as exc:  # the note moved on under us: a refusal, not an error
            print(json.dumps(["refused", token, str(exc)]), flush=True)
            continue
        print(json.dumps(ack), flush=True)
        auto_export(store, place)
'''

CLI_WRITER = r'''
import contextlib, io, json, random, sys
from pathlib import Path
from qem_edit.shells.cli import main as qem
from qem_edit.storage.store import Store

root, name, count, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
for i in range(count):
    token = f"{name}-{i}"
    with Store.open(root / ".qem") as store:
        pick = rng.choice([n.id for n in store.notes() if n.state in ("active", "stale")])
    op = rng.choice(("add", "supersede", "revoke", "flag-stale"))
    argv = {"add": ["add", token, "--kind", "task"], "supersede": ["supersede", pick, token]}.get(op)
    argv = argv or [op, pick, "-m", token]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            qem(argv + ["--workspace", str(root), "--actor", name])
            code = 0
        except SystemExit as exc:
            code = exc.code
    print(json.dumps([op, token, pick, code, out.getvalue(), err.getvalue()]), flush=True)
'''


def seed_store(root: Path, notes: int) -> Path:
    (root / ".qem").mkdir(parents=True)
    (root / ".qem" / "config.toml").write_text("[export]\nauto = true\n")
    rng = random.Random(1)

    def work(tx: Transaction) -> None:
        for i in range(notes):
            tx.create(NewNote(KINDS[i % len(KINDS)], rng.choice(("high", "medium", "low")), "agent",
                              f"seed note {i}"), "seeder")

    path = root / ".qem"
    with Store.open(path, create=True) as store:
        store.write(work)
        export(store, root / "MEMORY.md")
    return path


def head_of(path: Path) -> int:
    """How far the log has come: its highest clock (the number of events, on one clone)."""
    with Store.open(path) as store:
        return store.max_clock()


def qem(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=cwd, capture_output=True,
                          text=True, env=python_env(env), timeout=timeout)


class Run:
    """One stress run: its processes' outputs and its check-ins, for the oracle."""

    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        self.tmp = tmp
        self.store = root / ".qem"
        self.outputs: list[str] = []  # every stderr, to grep
        self.checkins: list[dict] = []
        self.lock = threading.Lock()

    def writer(self, script: str, name: str, count: int, seed: int) -> list[list]:
        done = subprocess.run(
            [sys.executable, "-c", script, str(self.root), name, str(count), str(seed)],
            capture_output=True, text=True, env=python_env(), timeout=300,
        )
        with self.lock:
            self.outputs.append(done.stderr)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    def editor(self, name: str, rounds: int, seed: int) -> None:
        rng = random.Random(seed)
        for r in range(rounds):
            token = f"{name}-r{r}"
            record = self.tmp / f"{token}.json"
            env = {"QEM_ACTOR": name}
            if rng.random() < 0.5:
                before = head_of(self.store)
                out = qem("checkout", cwd=self.root, env=env)
                assert out.returncode == 0, out.stderr
                path = Path(out.stdout.strip())
                text = path.read_text("utf-8")
                from _reliability import random_edit

                edited, wanted = random_edit(text, rng.randrange(10**9), token)
                path.write_text(edited, "utf-8")
                start = head_of(self.store)
                done = qem("checkin", "--path", str(path), "-m", token, "--yes", cwd=self.root, env=env)
                way = "checkout+checkin"
                # the base: rendered after `before`, at or before `start`
                since, upto = before, start
            else:
                start = head_of(self.store)
                editor = f"{sys.executable} {self.tmp / 'editor.py'}"
                done = qem("edit", "-m", token, "--yes", cwd=self.root, env={
                    **env, "QEM_EDITOR": editor, "QEM_TEST_SEED": str(rng.randrange(10**9)),
                    "QEM_TEST_TOKEN": token, "QEM_TEST_RECORD": str(record),
                    "QEM_TEST_TESTS": str(TESTS), "QEM_TEST_REPO": str(REPO)})
                saved = json.loads(record.read_text())
                text, edited, wanted = saved["text"], saved["edited"], saved["wanted"]
                way = "qem edit"
            end = head_of(self.store)
            if way == "qem edit":
                since, upto = start, end
            with self.lock:
                self.outputs.append(done.stderr)
                self.checkins.append({
                    "name": name, "token": token, "way": way, "code": done.returncode,
                    "stderr": done.stderr, "text": text, "since": since, "upto": upto,
                    "start": start, "end": end, "wanted": wanted,
                })


# -- the oracle -------------------------------------------------------------------------------


class History:
    """The log in clock order, with the notes after any number of its events (replays
    cached), and the renderings a check-in's base is looked for among."""

    def __init__(self, store: Store) -> None:
        self.events = store.events()
        clocks = [e.clock for e in self.events]
        assert clocks == list(range(1, len(clocks) + 1)), "one clone's writers left a gap in the clocks"
        self.texts = store.texts()
        self.memory = store.memory_id()
        self._states: dict[int, dict[str, Note]] = {0: {}}
        self._rendered: dict[int, str] = {}

    def at(self, clock: int) -> dict[str, Note]:
        """The notes right after the event at `clock` (a replay from the nearest state known)."""
        if clock not in self._states:
            start = max(s for s in self._states if s <= clock)
            notes = dict(self._states[start])
            for event in self.events[start:clock]:
                if event.type == "created":
                    notes[event.id] = note_from_created(event, self.texts.get(event.id))
                else:
                    notes[event.note] = after_event(notes[event.note], event)
            self._states[clock] = notes
        return self._states[clock]

    def rendered(self, clock: int) -> str:
        """The checkout a person got at `clock`: the rendering, with the help comment."""
        if clock not in self._rendered:
            from _reliability import prefix_notes
            from qem_edit.renderer import for_editing, render

            notes = prefix_notes(self.events, self.texts, clock)
            self._rendered[clock] = for_editing(render(notes.values(), self.memory))
        return self._rendered[clock]

    def base_of(self, ci: dict) -> int:
        """The clock the edited text was rendered at (the latest, should two agree)."""
        for clock in range(ci["upto"], ci["since"] - 1, -1):
            if self.rendered(clock) == ci["text"]:
                return clock
        raise AssertionError(f"check-in {ci['token']}: the text edited is no rendering of the log"
                             f" between {ci['since']} and {ci['upto']}")

    def touching(self, note_id: str, after: int, upto: int) -> list:
        return [e for e in self.events if e.note == note_id and after < e.clock <= upto]


def full_ids(history: History, base: int, wanted: dict) -> dict:
    """The edit's wishes by full note id (the file names notes by their short ids then)."""
    from _reliability import prefix_notes

    shown = {n.shown: n.id for n in prefix_notes(history.events, history.texts, base).values()}
    return {(key if key == "new" else shown[key]): want for key, want in wanted.items()}


def reached(notes: dict[str, Note], note_id: str, want: list) -> bool:
    """Whether the store, as `notes`, already is where the edit asked note `note_id` to go."""
    note = notes.get(note_id)
    if note is None:
        return False
    if want[0] == "revoke":
        return note.state in ("revoked", "forgotten")
    if want[0] == "stale":
        return note.state == "stale"
    successor = notes.get(note.superseded_by or "")
    return note.state == "superseded" and successor is not None and successor.text == want[1]


def conflicting(history: History, base: int, wanted: dict, upto: int) -> list[str]:
    """The notes the edit changed that others touched since its base, not reaching its end."""
    out = []
    for note_id, want in wanted.items():
        if note_id == "new":
            continue
        if history.touching(note_id, base, upto) and not reached(history.at(upto), note_id, want):
            out.append(note_id)
    return out


def judge_checkin(history: History, ci: dict) -> str:
    assert ci["code"] in (0, 3), f"check-in {ci['token']} exited {ci['code']}:\n{ci['stderr']}"
    base = history.base_of(ci)
    wanted = full_ids(history, base, ci["wanted"])
    mine = [e for e in history.events if e.actor == ci["name"] and (e.reason == ci["token"])]
    if ci["code"] == 3:
        assert not mine, f"refused check-in {ci['token']} wrote events"
        # planned against some point of the log between its start (or its base) and its end
        window = range(max(base, ci["start"]), ci["end"] + 1)
        assert any(conflicting(history, base, wanted, h) for h in window), (
            f"check-in {ci['token']} was refused, but no event since its base {base}"
            f" touched a note it changed without reaching its end:\n{ci['stderr']}"
        )
        return "refused"
    if not mine:
        # nothing written: everything it asked for was already there
        assert "new" not in wanted, ci
        assert any(
            all(reached(history.at(h), k, w) for k, w in wanted.items())
            for h in range(max(base, ci["start"]), ci["end"] + 1)
        ), ci
        return "agreed"
    checkin_ids = {e.checkin for e in mine}
    assert len(checkin_ids) == 1 and None not in checkin_ids
    events = [e for e in history.events if e.checkin in checkin_ids]
    before, after = events[0].clock - 1, events[-1].clock
    assert [e.clock for e in events] == list(range(before + 1, after + 1)), "a check-in is one run of events"
    overlooked = conflicting(history, base, wanted, before)
    assert not overlooked, (
        f"check-in {ci['token']} ({ci['way']}, base {base}, applied after {before}) asked"
        f" {wanted} and overwrote a change: "
        + "; ".join(f"{e.clock} #{e.note[:8]} {e.type} by {e.actor}" for n in overlooked
                    for e in history.touching(n, base, after))
    )
    then, now = history.at(before), history.at(after)
    for note_id, want in wanted.items():
        if note_id == "new":
            created = [e for e in events if e.type == "created" and e.data.get("supersedes") is None]
            assert sorted(history.texts[e.id] for e in created) == sorted(want)
            continue
        wrote = [e for e in events if e.note == note_id]
        assert reached(now, note_id, want), (ci, note_id)
        assert bool(wrote) != reached(then, note_id, want), (ci, note_id)  # written, or agreed
    return "applied"


def check_writes(history: History, acks: list[list], cli: list[list], notes: dict[str, Note]) -> dict:
    import re

    figures = {"acknowledged": 0, "refused": 0}
    by_id = {e.id: e for e in history.events}
    by_text: dict[str, list[Note]] = {}
    for note in notes.values():
        by_text.setdefault(note.text or "", []).append(note)
    for ack in acks:
        op, token, *rest = ack
        if op == "refused":
            figures["refused"] += 1
            continue
        figures["acknowledged"] += 1
        if op == "add":
            assert notes[rest[0]].text == token, ack
        elif op == "supersede":
            assert notes[rest[1]].text == token and notes[rest[1]].supersedes == rest[0], ack
        else:
            event = by_id[rest[1]]
            assert (event.note, event.reason) == (rest[0], token), ack
            assert event.type == ("revoked" if op == "revoke" else "stale_flagged")
    for op, token, pick, code, out, err in cli:
        assert code in (0, 2), (op, code, err)
        if code == 2:
            assert "cannot" in err and "Traceback" not in err, err
            figures["refused"] += 1
            continue
        figures["acknowledged"] += 1
        if op in ("add", "supersede"):  # it printed the new note's short id
            (note,) = by_text[token]
            assert note.id.startswith(out.strip()), (op, token, out)
            if op == "supersede":
                assert note.supersedes == pick
        else:  # "#SHORT stale_flagged (event PREFIX)"
            prefix = re.search(r"\(event (\w+)\)", out)[1]
            (event,) = [e for e in history.events if e.id.startswith(prefix)]
            assert (event.note, event.reason) == (pick, token)
    return figures


def stress(tmp_path: Path, scale: int) -> dict:
    root = tmp_path / "ws"
    # few notes, so that writers and editors often meet on the same one
    store_path = seed_store(root, notes=12)
    (tmp_path / "editor.py").write_text(EDITOR_SCRIPT)
    run = Run(root, tmp_path)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        api = [pool.submit(run.writer, API_WRITER, f"api{i}", 60 * scale, i) for i in range(2)]
        cli = [pool.submit(run.writer, CLI_WRITER, f"cli{i}", 30 * scale, 10 + i) for i in range(2)]
        editors = [pool.submit(run.editor, f"ed{i}", 6 * scale, 20 + i) for i in range(4)]
        acks = [a for f in api for a in f.result()]
        cli_acks = [a for f in cli for a in f.result()]
        for f in editors:
            f.result()
    elapsed = time.monotonic() - started
    for output in run.outputs:
        assert "locked" not in output.lower(), output
        no_traceback(output)
    with Store.open(store_path) as store:
        assert verify(store) == []
        history = History(store)
        notes = {n.id: n for n in store.notes()}
        # the oracle's own replay is the log's
        assert {n: (x.state, x.text, x.superseded_by) for n, x in history.at(len(history.events)).items()} == {
            n: (x.state, x.text, x.superseded_by) for n, x in notes.items()}
        figures = check_writes(history, acks, cli_acks, notes)
        verdicts = [judge_checkin(history, ci) for ci in run.checkins]
        final = render_store(store)[1]
    # the last export to run rendered the last state: the export lock orders the writers
    assert (root / "MEMORY.md").read_bytes() == final
    figures.update(
        checkins=len(verdicts),
        applied=verdicts.count("applied"),
        refused_conflicts=verdicts.count("refused"),
        agreed=verdicts.count("agreed"),
        events=len(history.events),
        seconds=round(elapsed, 1),
    )
    assert figures["applied"] >= 1
    return figures


def test_stress(tmp_path):
    figures = stress(tmp_path, 1)
    assert figures["acknowledged"] >= 120
    for name, value in figures.items():
        record("test_stress", name, value)


@pytest.mark.skipif(not SOAK, reason="the soak runs only with QEM_SOAK=N (N times the stress test's work)")
def test_soak(tmp_path):
    figures = stress(tmp_path, SOAK)
    for name, value in figures.items():
        record(f"test_soak[QEM_SOAK={SOAK}]", name, value)


def test_racing_first_writes_create_one_store(tmp_path):
    """Eight `qem add` at once on a workspace with no store yet: one store, eight notes."""
    root = tmp_path / "fresh"
    root.mkdir()
    procs = [
        subprocess.Popen([sys.executable, "-m", "qem_edit", "add", f"racer {i}", "--kind", "task"],
                         cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=python_env())
        for i in range(8)
    ]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for out, err, code in results:
        assert code == 0, err
        assert "locked" not in err.lower()
        no_traceback(err)
    shown = [out.strip() for out, _, _ in results]
    assert len(set(shown)) == 8, shown  # eight notes, each with its own id
    with Store.open(root / ".qem") as store:
        assert verify(store) == []
        assert sorted(n.text for n in store.notes()) == sorted(f"racer {i}" for i in range(8))
        for i, short in enumerate(shown):
            assert store.note(store.resolve(short)).text == f"racer {i}"
        assert [e.clock for e in store.events()] == list(range(1, 9))  # taken in turn, none lost
    record("test_racing_first_writes_create_one_store", "acknowledged writes", 8)


# -- the race window between planning and applying, made certain ------------------------------


@pytest.mark.parametrize("theirs", ["same note", "other note"])
def test_a_write_between_plan_and_apply_is_never_overwritten(tmp_path, monkeypatch, theirs):
    """Under load the window between planning a check-in and applying it is milliseconds
    wide; here a second process's write is put into it every time.  A change to the same
    note must turn the check-in into a conflict (nothing written); a change elsewhere is
    merged (the check-in is planned again and lands, theirs kept)."""
    from qem_edit.base import errors
    from qem_edit.shells import terminal
    from qem_edit.system.workspace import Workspace
    from qem_edit.writes import checkin, kept_edits

    root = tmp_path / "ws"
    store_path = seed_store(root, notes=5)
    place = Workspace(root, store_path)
    with Store.open(store_path) as store:
        kept = kept_edits.new_checkout(store, place, Selection())
        by_text = {n.text: n for n in store.notes()}
    text = kept.file.read_text("utf-8")
    kept.file.write_text(text.replace("· seed note 1\n", "· seed note 1, edited\n"), "utf-8")
    mine = by_text["seed note 1"].id
    target = mine if theirs == "same note" else by_text["seed note 3"].id
    real_plan = checkin.propose
    raced = []

    def plan_then_race(*args, **kwargs):
        planned = real_plan(*args, **kwargs)
        if not raced:  # another process writes right after the first plan is made
            done = subprocess.run([sys.executable, "-m", "qem_edit", "flag-stale", target, "-m", "raced"],
                                  cwd=root, capture_output=True, text=True, env=python_env())
            assert done.returncode == 0, done.stderr
            raced.append(True)
        return planned

    monkeypatch.setattr(checkin, "propose", plan_then_race)
    with Store.open(store_path) as store:
        count = len(store.events())
        if theirs == "same note":
            with pytest.raises(errors.ConflictError):
                terminal.run_checkin(store, place, kept.file, "mine", True, False, "me")
            assert len(store.events()) == count + 1  # theirs only
            assert store.note(mine).state == "stale"
            assert kept.file.exists()
        else:
            assert terminal.run_checkin(store, place, kept.file, "mine", True, False, "me").status == "applied"
            assert store.note(target).state == "stale"  # theirs, kept
            assert store.note(mine).state == "superseded"  # mine, applied on top
        assert verify(store) == []

"""State from the set, not the arrival order: a property test.

Hypothesis writes random histories on three clones of one memory (adds, supersessions,
revocations, flags, reinstatements, promotions, expiries, forgets, rulings) with merges
between them at random points, as git would bring one clone's log files into another.
Then the union of every clone's log is read in many orders:

- a fresh index built from all the files at once;
- an index caught up clone by clone, in every order of the clones (what a series of
  `git pull`s does), the files of each clone arriving in a shuffled order;
- `replay.replay` of the events in shuffled orders.

All must give the same notes and byte-identical MEMORY.md.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qem_edit.renderer import render

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.base.replay import replay
from qem_edit.mirror.export import render_store
from qem_edit.storage.store import Store
from qem_edit.transfer.dump import read_dump

LOG_DIRS = ("events", "texts", "packs")
OPS = ("add", "supersede", "revoke", "flag", "reinstate", "promote", "expire", "forget", "rule", "merge", "pack")
STEP = st.tuples(st.integers(0, 2), st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 2))


def log_files(root: Path) -> dict[str, bytes]:
    """Every log file of a memory: relative name → bytes."""
    out = {}
    for folder in LOG_DIRS:
        for path in sorted((root / folder).glob("*")):
            out[f"{folder}/{path.name}"] = path.read_bytes()
    return out


def bring(files: dict[str, bytes], into: Path, order: random.Random | None = None) -> None:
    """Copy log files into a memory, as a checkout by git would (an existing name holds
    the same bytes: names are content hashes)."""
    names = list(files)
    if order is not None:
        order.shuffle(names)
    for name in names:
        target = into / name
        if not target.exists():
            target.write_bytes(files[name])


def new_memory(root: Path) -> None:
    Store.open(root, create=True).close()


def copy_memory(source: Path, target: Path) -> None:
    target.mkdir(parents=True)
    for folder in LOG_DIRS:
        (target / folder).mkdir()
    shutil.copyfile(source / "config.toml", target / "config.toml")
    bring(log_files(source), target)


def act(root: Path, op: str, pick: int, actor: str, text: str, others: list[Path]) -> None:
    """One write on one clone; a write its note's state does not allow is skipped."""
    if op == "merge":
        bring(log_files(others[pick % len(others)]), root)
        return
    with Store.open(root) as store:
        if op == "pack":
            store.pack()
            return
        notes = sorted(store.notes(), key=lambda n: n.id)
        note = notes[pick % len(notes)] if notes else None
        try:
            store.write(lambda tx: _write(tx, op, note, actor, text))
        except errors.QemError:
            pass  # refused: that move does not apply to the note's state (nothing written)


def _write(tx, op, note, actor, text):  # type: ignore[no-untyped-def]
    if op == "add" or note is None:
        return tx.create(NewNote("finding", "medium", "agent", text), actor)
    if op == "supersede":
        return tx.create(NewNote(note.kind, note.priority, "agent", text, supersedes=note.id), actor)
    if op == "forget":
        return tx.forget(note.id, actor, "a secret")
    if op == "rule":
        if not note.rivals:
            raise errors.Refused("nothing to rule on")
        return tx.settle(note.id, note.rivals[len(text) % len(note.rivals)].tip, actor, "ruled")
    verb = {"revoke": "revoked", "flag": "stale_flagged", "reinstate": "reinstated", "promote": "promoted",
            "expire": "expired"}[op]
    return tx.emit(note.id, verb, actor, "because")


def rendering(root: Path) -> tuple[bytes, list[dict]]:
    with Store.open(root) as store:
        notes = [n.to_json() for n in sorted(store.notes(), key=lambda n: n.id)]
        return render_store(store)[1], notes


@settings(max_examples=int(os.environ.get("QEM_PROPERTY_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=st.lists(STEP, min_size=4, max_size=24), seed=st.integers(0, 2**32 - 1))
def test_any_merge_order_gives_one_state(steps, seed):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        origin = tmp / "origin"
        new_memory(origin)
        for i in range(3):
            act(origin, "add", 0, "founder", f"founding note {i}", [])
        clones = [tmp / f"clone{i}" for i in range(3)]
        for clone in clones:
            copy_memory(origin, clone)
        for n, (who, op, pick, _) in enumerate(steps):
            others = [c for c in clones if c != clones[who]]
            act(clones[who], op, pick, f"agent{who}", f"text {n} of agent{who}", others)

        union: dict[str, bytes] = {}
        for clone in clones:
            for name, data in log_files(clone).items():
                assert union.setdefault(name, data) == data, f"{name}: one name, two contents"

        fresh = tmp / "fresh"
        copy_memory(origin, fresh)
        bring(union, fresh, rng)
        expected_md, expected_notes = rendering(fresh)

        for order in itertools.permutations(range(3)):
            caught_up = tmp / ("pulled-" + "".join(map(str, order)))
            copy_memory(origin, caught_up)
            rendering(caught_up)  # an index that exists, so each pull is caught up incrementally
            for i in order:
                bring(log_files(clones[i]), caught_up, rng)
                rendering(caught_up)
            md, notes = rendering(caught_up)
            assert notes == expected_notes, f"pulling in the order {order} gives other notes"
            assert md == expected_md, f"pulling in the order {order} renders another MEMORY.md"

        events, texts = _events_and_texts(fresh)
        memory = json.loads(json.dumps(expected_notes))
        for _ in range(5):
            rng.shuffle(events)
            replayed = replay(events, texts)
            shorts = ids.short_ids({n: note.short_len for n, note in replayed.items()})
            notes = [dict(n.to_json(), short=shorts[n.id]) for n in sorted(replayed.values(), key=lambda n: n.id)]
            assert [_state(n) for n in notes] == [_state(n) for n in memory]


def _events_and_texts(root: Path):  # type: ignore[no-untyped-def]
    from qem_edit.transfer.dump import dump_lines

    with Store.open(root) as store:
        raw = b"".join(line.encode("utf-8") + b"\n" for line in dump_lines(store))
    events, text_records, _ = read_dump(raw, "dump")
    return list(events), {t.note: t.text for t in text_records}


def _state(note: dict) -> tuple:
    return (note["id"], note["short"], note["state"], note["text"], note["superseded_by"], note["provenance"],
            json.dumps(note["rivals"], sort_keys=True), json.dumps(note["disputes"], sort_keys=True))


def test_the_renderer_agrees_with_itself_on_a_shuffled_replay():
    """The same check without hypothesis, on the fixture corpus: shuffled replays render
    the bytes the index renders."""
    from builders import load_store
    from conftest import CORPUS

    with tempfile.TemporaryDirectory() as tmp:
        with load_store(Path(tmp) / ".qem", CORPUS) as store:
            _, expected = render_store(store)
            memory = store.memory_id()
        events, texts = _events_and_texts(Path(tmp) / ".qem")
    rng = random.Random(7)

    for _ in range(3):
        rng.shuffle(events)
        replayed = replay(events, texts)
        shorts = ids.short_ids({n: note.short_len for n, note in replayed.items()})
        notes = [n._replace(short=shorts[n.id]) for n in replayed.values()]
        assert render(notes, memory).encode("utf-8") == expected

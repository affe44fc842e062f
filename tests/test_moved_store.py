"""A check-in whose memory moved since its checkout reads only what changed since.

A checkout records the moment its base was rendered at and whether the base is calm (the
index's items alone); the index logs the generation at which each item last changed.
Once others wrote, the check-in reads the items that changed since that moment instead of
rendering the memory now (qem_edit.writes.checkin_plan.Since).  These tests hold that path to the
one that renders the memory whole: the same plan, conflicts and errors, for random edits
against random writes; and they check when the log cannot answer (an index built again,
a disputed note) that the whole rendering is what is read.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from builders import add, emit, forget, store_path, workspace
from conftest import run_qem
from qem_edit.renderer import Selection

from qem_edit.base.vocabulary import KINDS
from qem_edit.storage.store import Store
from qem_edit.writes.checkin import Source, problems
from qem_edit.writes.checkin_plan import Proposal, Since, propose
from qem_edit.writes.kept_edits import new_checkout

ITEM = re.compile(r"^- \[#([0-9a-z]+)\] ", re.M)


def plan_of(proposal: Proposal) -> dict:
    plan = proposal.plan
    return {
        "ops": sorted((op.action, op.note_id or "", op.line, repr(op.content)) for op in plan.ops),
        "conflicts": sorted((c.note_id, c.theirs, c.line) for c in plan.conflicts),
        "problems": sorted(problems(proposal)),
        "merged": sorted(map(str, plan.merged)), "agreed": sorted(map(str, plan.agreed)),
        "generation": plan.generation,
    }


def both(store: Store, source: Source) -> tuple[dict, dict, bool]:
    """The plan read through the item log, the plan read from the whole rendering now, and
    whether the first really read the log."""
    text, base, moment, calm, heads = source.read(store)
    assert calm
    args = dict(moment=moment, heads=heads)
    since_used = []
    import qem_edit.writes.checkin_plan as checkin_plan

    original = checkin_plan._since

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        found = original(*a, **k)
        since_used.append(found is not None and isinstance(found[1], Since))
        return found

    checkin_plan._since = spy
    try:
        read_log = plan_of(propose(store, text, base, calm=True, **args))
    finally:
        checkin_plan._since = original
    whole = plan_of(propose(store, text, base, calm=False, **args))
    return read_log, whole, any(since_used)


def items(text: str) -> list[tuple[int, int, str]]:
    """(start, end, short id) of each item's block in a rendering."""
    found = [(m.start(), m.group(1)) for m in ITEM.finditer(text)]
    out = []
    for i, (start, short) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else text.find("\n<!--", start)
        heading = text.find("\n## ", start)
        end = min(e for e in (end, heading + 1 if heading >= 0 else -1, len(text)) if e > start)
        out.append((start, end, short))
    return out


def edit(text: str, rng: random.Random) -> str:
    """A person's edit: some texts changed, some items deleted, a new item or two."""
    blocks = items(text)
    chosen = rng.sample(blocks, min(len(blocks), rng.randint(1, 6)))
    for start, end, short in sorted(chosen, reverse=True):
        block = text[start:end]
        if rng.random() < 0.35:
            text = text[:start] + text[end:]
        else:
            first, _, rest = block.partition("\n")
            text = text[:start] + first.rstrip() + f" (edited {rng.randint(0, 999)})\n" + rest + text[end:]
    for _ in range(rng.randint(0, 2)):
        kind = rng.choice(["Gotchas", "Findings", "Tasks"])
        at = text.find(f"\n## {kind}")
        if at >= 0:
            line_end = text.find("\n", at + 1)
            text = (text[:line_end + 1] + f"\n- a new {kind.lower()} note {rng.randint(0, 99999)}\n"
                    + text[line_end + 1:])
    return text


def others_write(store: Store, rng: random.Random, count: int) -> None:
    """Writers elsewhere: revocations, flags, supersessions, new notes, a forget."""
    for _ in range(count):
        live = [n for n in store.notes() if n.state == "active"]
        what = rng.random()
        if what < 0.25 or not live:
            add(store, f"written meanwhile {rng.randint(0, 10**9)}", rng.choice(KINDS), at=None)
        elif what < 0.45:
            emit(store, rng.choice(live).id, "revoked", at=None)
        elif what < 0.6:
            emit(store, rng.choice(live).id, "stale_flagged", at=None)
        elif what < 0.8:
            add(store, f"a better way {rng.randint(0, 10**9)}", "gotcha", supersedes=rng.choice(live).id, at=None)
        elif what < 0.9:
            emit(store, rng.choice(live).id, "promoted", at=None)
        else:
            forget(store, rng.choice(live).id, at=None)


def seeded_store(root: Path, rng: random.Random, count: int = 60) -> Store:
    store = Store.open(store_path(root), create=True)
    for i in range(count):
        add(store, f"note {i}: {rng.choice(['keep the lock', 'retry twice', 'pin the version'])} {i}",
            rng.choice(KINDS), priority=rng.choice(["high", "medium", "low"]), at=None)
    return store


@pytest.mark.parametrize("seed", range(24))
def test_reading_the_item_log_plans_what_the_whole_rendering_plans(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    with seeded_store(root, rng) as store:
        selection = Selection(kinds=tuple(rng.sample(KINDS, 3))) if seed % 4 == 3 else Selection()
        checkout = new_checkout(store, workspace(root), selection)
        assert checkout.calm() and checkout.moment() is not None
        checkout.file.write_text(edit(checkout.file.read_text("utf-8"), rng), "utf-8")
        others_write(store, rng, rng.randint(1, 12))
        read_log, whole, used = both(store, Source(checkout.file, workspace(root), checkout))
    assert used, "the check-in rendered the memory whole though the log could answer"
    assert read_log == whole


def test_a_short_id_the_base_shows_shorter_is_still_found() -> None:
    """A note whose short id grew since the base (a new note shares its prefix) is found
    under the short id the base shows: blocks_by_id looks for it by its full id."""
    from qem_edit.reconciler.blocks import blocks_by_id

    base = ("<!-- qem:memory m -->\n\n# Memory\n\n## Gotchas\n\n"
            "- [#k3f9] 2026-06-05 · high · agent · Release the lock first.\n"
            "- [#k3fa] 2026-06-05 · high · agent · Another.\n").encode()
    read = lambda at, size: base[at:at + size]  # noqa: E731
    heads = [base.index(b"\n## ")]
    found = blocks_by_id(read, len(base), heads, {"k3f9abcdefghjkmnpqrstvwxyz": "Gotchas"})
    assert list(found) == ["k3f9"] and found["k3f9"][1].startswith(b"[#k3f9] 2026-06-05")
    assert blocks_by_id(read, len(base), heads, {"k3fbabcdefghjkmnpqrstvwxyz": "Gotchas"}) == {}
    assert blocks_by_id(read, len(base), heads, {"k3f9abcdefghjkmnpqrstvwxyz": "Findings"}) == {}


@pytest.mark.parametrize("seed", range(4))
def test_bisection_finds_every_block_the_scan_finds(tmp_path: Path, seed: int) -> None:
    """Over a real rendering (multi-line items, every kind, a checkout's help at the end),
    every note's block found by bisection is the block the full scan finds."""
    from qem_edit.reconciler.blocks import _find_blocks, _head, _pieces, blocks_by_id
    from qem_edit.renderer.format import SECTION_TITLES

    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    with seeded_store(root, rng, 150) as store:
        for i in range(10):
            add(store, f"a long one {i}\nwith a second line\n\nand a paragraph", rng.choice(KINDS), at=None)
        checkout = new_checkout(store, workspace(root), Selection())
        notes = {n.id: n for n in store.notes()}
    data = checkout.base_file.read_bytes()
    head = _head([data])
    scanned = _find_blocks(_pieces([data], head[1] - 1), {n.shown for n in notes.values()})
    read = lambda at, size: data[at:at + size]  # noqa: E731
    found = blocks_by_id(read, len(data), checkout.base_heads(),
                         {i: SECTION_TITLES[n.kind] for i, n in notes.items()})
    assert found == scanned and len(found) == len(notes)


def test_a_rebuilt_index_or_a_dispute_reads_the_whole_rendering(tmp_path: Path) -> None:
    rng = random.Random(7)
    root = tmp_path / "ws"
    root.mkdir()
    with seeded_store(root, rng, 20) as store:
        checkout = new_checkout(store, workspace(root), Selection())
        moment = checkout.moment()
        assert moment is not None and store.items_changed_since(moment) == []
        note = store.notes()[0]
        emit(store, note.id, "revoked", at=None)
        assert store.items_changed_since(moment) is not None and note.id in store.items_changed_since(moment)
        checkout.file.write_text(edit(checkout.file.read_text("utf-8"), rng), "utf-8")
        read_log, whole, used = both(store, Source(checkout.file, workspace(root), checkout))
        assert used and read_log == whole
    (store_path(root) / "index.db").unlink()
    with Store.open(store_path(root)) as store:  # built again from the log: another index
        assert store.items_changed_since(moment) is None
        read_log, whole, used = both(store, Source(checkout.file, workspace(root), checkout))
        assert not used and read_log["ops"] == whole["ops"] and read_log["conflicts"] == whole["conflicts"]


def test_the_script_path_records_its_moment_and_lands_after_a_hundred_writes(tmp_path: Path) -> None:
    """`qem checkout --path F`, 100 writes by other processes, an edit of F, `qem checkin
    --path F`: the edit lands, the others' writes stand, F starts again from the memory
    now with its record renewed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(30):
        assert run_qem("add", f"note {i} about the retry loop", "-k", "gotcha", cwd=ws).returncode == 0
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=ws).returncode == 0
    record = json.loads(next((store_path(ws) / "checkouts").glob("*/session.json")).read_text())
    assert record["calm"] is True and record["moment"] and record["file"] == str(out.resolve())
    text = out.read_text("utf-8")
    theirs = [s for start, end, s in items(text) if "note 0 about" not in text[start:end]]
    for s in theirs[:20]:
        assert run_qem("revoke", s, "-m", "gone", cwd=ws).returncode == 0
    for i in range(80):
        assert run_qem("add", f"written meanwhile {i}", "-k", "finding", cwd=ws).returncode == 0
    out.write_text(text.replace("note 0 about the retry loop", "note 0: retry three times", 1), "utf-8")
    done = run_qem("checkin", "--path", str(out), "-m", "sharper", "--yes", "--json", cwd=ws)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "applied" and [o["action"] for o in data["operations"]] == ["supersede"]
    listed = run_qem("query", "state=active", "--json", cwd=ws)
    texts = [n["text"] for n in json.loads(listed.stdout)["notes"]]
    assert "note 0: retry three times" in texts and sum(t.startswith("written meanwhile") for t in texts) == 80
    assert sum(t.endswith("about the retry loop") for t in texts) == 29 - 20
    again = json.loads(next((store_path(ws) / "checkouts").glob("*/session.json")).read_text())
    assert again["calm"] is True and again["moment"] != record["moment"]
    assert "note 0: retry three times" in out.read_text("utf-8")


@pytest.mark.parametrize("revoked", [False, True])
def test_a_note_whose_short_id_grew_since_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       revoked: bool) -> None:
    """Another writer's new note shares the first characters of a note the checkout shows,
    so that note's short id grows; the edit of it is read against the base under the short
    id the base shows (and a revocation of it meanwhile is still a conflict)."""
    import qem_edit.storage.transaction as transaction_module
    from qem_edit.base import ids

    rng = random.Random(3)
    root = tmp_path / "ws"
    root.mkdir()
    with seeded_store(root, rng, 60) as store:
        checkout = new_checkout(store, workspace(root), Selection())
        targets = {n.shown: n for n in store.notes() if len(n.shown) == ids.MIN_SHORT}
        original = transaction_module._event

        def colliding(draft, data, *rest):  # type: ignore[no-untyped-def]
            while True:  # a created event whose id starts as a shown short id does
                event = original(draft, data, *rest)
                if draft.type != "created" or event.id[:ids.MIN_SHORT] in targets:
                    return event
                data = dict(data, nonce=ids.nonce())

        monkeypatch.setattr(transaction_module, "_event", colliding)
        twin = add(store, "a note whose id shares a prefix", "finding", at=None)
        monkeypatch.setattr(transaction_module, "_event", original)
        grown = targets[twin[:ids.MIN_SHORT]]
        assert len(store.note(grown.id).shown) > len(grown.shown)  # its short id grew
        if revoked:
            emit(store, grown.id, "revoked", at=None)
        text = checkout.file.read_text("utf-8")
        start = text.index(f"- [#{grown.shown}] ")
        end = text.index("\n", start)
        checkout.file.write_text(text[:start] + text[start:end] + " (said better)" + text[end:], "utf-8")
        read_log, whole, used = both(store, Source(checkout.file, workspace(root), checkout))
    assert used and read_log == whole
    if revoked:
        assert [c[0] for c in read_log["conflicts"]] == [grown.id]
    else:
        assert [(op[0], op[1]) for op in read_log["ops"]] == [("supersede", grown.id)] and not read_log["conflicts"]


def spy_plans(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record whether each patch plan was made (True) or declined (False)."""
    import qem_edit.renderer.patch as patch

    made: list[bool] = []
    original = patch.patch_plan

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        plan = original(*args, **kwargs)
        made.append(plan is not None)
        return plan

    monkeypatch.setattr(patch, "patch_plan", spy)
    return made


@pytest.mark.parametrize("seed", range(16))
def test_a_base_made_again_from_the_old_one_is_the_rendering_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 seed: int) -> None:
    """A recorded checkout starts again after its check-in from its old base and the items
    that changed since, read in place: byte for byte what rendering the memory gives."""
    from qem_edit.writes.kept_edits import render_base

    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    made = spy_plans(monkeypatch)
    kinds = rng.sample(KINDS, 5) if seed % 3 == 0 else list(KINDS)
    with seeded_store(root, random.Random(seed), 40) as store:
        selection = Selection(kinds=tuple(k for k in KINDS if k in kinds)) if seed % 3 == 0 else Selection()
        checkout = new_checkout(store, workspace(root), selection)
        since = checkout.as_base()
        others_write(store, rng, rng.randint(1, 25))
        for kind in rng.sample(KINDS, 2):  # a first note of a kind, sometimes
            add(store, f"one more {kind} {seed}", kind, at=None)
        patched = render_base(store, selection, tmp_path / "patched.md", since=since)
        whole = render_base(store, selection, tmp_path / "whole.md")
    assert made and made[-1] is True, "the base was rendered whole, not made from the old one"
    assert (tmp_path / "patched.md").read_bytes() == (tmp_path / "whole.md").read_bytes()
    assert patched["base_heads"]["at"] == whole["base_heads"]["at"] and patched["moment"] == whole["moment"]


def test_a_section_that_fills_or_empties_is_laid_out_as_rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qem_edit.writes.kept_edits import render_base

    root = tmp_path / "ws"
    root.mkdir()
    made = spy_plans(monkeypatch)
    with Store.open(store_path(root), create=True) as store:
        lone = add(store, "the only decision", "decision", at=None)
        add(store, "a gotcha", "gotcha", at=None)
        checkout = new_checkout(store, workspace(root), Selection())
        since = checkout.as_base()
        add(store, "the first task", "task", at=None)  # an empty section fills
        add(store, "the first reference", "reference", at=None)  # ... and the last one
        forget(store, lone, at=None)  # a tombstone stands for it
        render_base(store, Selection(), tmp_path / "patched.md", since=since)
        render_base(store, Selection(), tmp_path / "whole.md")
    assert made[-2:] == [True, True] or made[0] is True
    assert (tmp_path / "patched.md").read_bytes() == (tmp_path / "whole.md").read_bytes()


def test_export_after_others_wrote_is_made_from_its_kept_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qem_edit.renderer.patch import headings_in

    from qem_edit.mirror.export import _base_record, export, render_store

    rng = random.Random(11)
    root = tmp_path / "ws"
    root.mkdir()
    mirror = root / "MEMORY.md"
    with seeded_store(root, rng, 50) as store:
        export(store, mirror)
        made = spy_plans(monkeypatch)
        others_write(store, rng, 20)
        assert export(store, mirror) is True
        assert mirror.read_bytes() == render_store(store)[1]
        kept = _base_record(store)
    assert made == [True]
    # where its headings start, taken from the plan, is where they are
    assert kept is not None and kept[2] == headings_in([(root / ".qem" / "mirror-base.md").read_bytes()])


def test_headings_are_found_however_the_rendering_is_cut_into_chunks() -> None:
    from qem_edit.renderer.patch import headings_in

    rng = random.Random(5)
    for _ in range(2000):
        data = bytes(rng.choice(b"\n# a") for _ in range(rng.randint(0, 60)))
        want, at = [], data.find(b"\n## ")
        while at >= 0:
            want.append(at)
            at = data.find(b"\n## ", at + 4)
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 6))))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
        assert headings_in(chunks) == want, (data, chunks)


def test_a_file_copied_by_the_kernel_is_the_file(tmp_path: Path) -> None:
    from qem_edit.system.files import write_atomic

    source = tmp_path / "source"
    source.write_bytes(os.urandom(3 << 20) + b"end")
    target = tmp_path / "target"
    target.write_bytes(b"old")
    write_atomic(target, source, mode=0o600)
    assert target.read_bytes() == source.read_bytes() and (target.stat().st_mode & 0o777) == 0o600
    with pytest.raises(FileNotFoundError):
        write_atomic(target, tmp_path / "missing")
    assert target.read_bytes() == source.read_bytes()


def vanish(root: Path, note_id: str) -> None:
    """Take a note's files out of the log, as a `git reset` or a switch of branch does."""
    gone = [p for p in (store_path(root)).rglob("*") if p.is_file() and p.suffix != ".db" and "checkouts" not in p.parts
            and "index" not in p.name and (note_id in p.name or note_id.encode() in p.read_bytes())]
    assert gone and not any("packs" in p.parts for p in gone), gone
    for path in gone:
        path.unlink()


@pytest.mark.parametrize("edited", [False, True])
def test_a_note_gone_from_the_log_since_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: bool) -> None:
    """A note the base shows, gone from the log since (a reset, a switch of branch): the
    check-in read through the item log plans what the whole rendering plans, and the base
    made again from the old one drops its item, as rendering it whole does."""
    from qem_edit.writes.kept_edits import render_base

    rng = random.Random(21)
    root = tmp_path / "ws"
    root.mkdir()
    made = spy_plans(monkeypatch)
    with seeded_store(root, rng, 30) as store:
        checkout = new_checkout(store, workspace(root), Selection())
        since = checkout.as_base()
        victim = add(store, "a note a reset takes away", "gotcha", at=None)  # after the checkout: not in its base
        victims = [victim, *(n.id for n in rng.sample(store.notes(), 3))]
    for note_id in victims:
        vanish(root, note_id)
    if edited:
        checkout.file.write_text(edit(checkout.file.read_text("utf-8"), rng), "utf-8")
    with Store.open(store_path(root)) as store:
        assert all(n not in {m.id for m in store.notes()} for n in victims)
        read_log, whole, used = both(store, Source(checkout.file, workspace(root), checkout))
        render_base(store, Selection(), tmp_path / "patched.md", since=since)
        render_base(store, Selection(), tmp_path / "whole.md")
    assert used and read_log == whole
    assert made and made[0] is True
    assert (tmp_path / "patched.md").read_bytes() == (tmp_path / "whole.md").read_bytes()

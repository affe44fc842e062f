"""Every clone renders the same bytes for the same commit, however it got there: a clone
that caught up in place (a pull, a revert, a rebase dropping a commit, a reset back and
forth) and a fresh clone of that commit export byte-identical MEMORY.md, equal to a fresh
index's; and a property test of the incremental index against a fresh build."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from builders import add, emit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_git import Clone, Team, team  # noqa: F401  (the fixture)

from qem_edit.storage.index import ITEM
from qem_edit.storage.logtree import EVENTS, PACKS, TEXTS
from qem_edit.storage.store import Store


def exported(clone: Clone) -> bytes:
    return clone.qem("export", "--stdout").stdout.encode()


def fresh_render(clone: Clone) -> bytes:
    """What a fresh index of the clone's log renders (the index rebuilt from nothing)."""
    for path in (clone.path / ".qem").glob("index.db*"):
        path.unlink()
    return exported(clone)


def superseded_later(team: Team) -> tuple[Clone, Clone, str, str]:
    """A commit creating a note, then a commit superseding it; two clones at the second,
    both having rendered it (their indexes caught up). Returns the clones and both commits."""
    founder = team.founded("the base note")
    note = founder.add("a note that will be superseded", "gotcha")
    founder.qem("export")
    created = founder.publish("create the note")
    founder.qem("supersede", note, "its successor", "-m", "better")
    founder.qem("export")
    superseded = founder.publish("supersede it")
    other = team.clone("other")
    exported(other)
    return founder, other, created, superseded


def settled(clone: Clone, *args: str) -> None:
    """A git command that replays commits (revert, rebase), each step that stopped on
    MEMORY.md settled by `qem export` as a person would."""
    done = clone.git(*args, ok=False)
    verb = args[-3] if args[0] == "-c" else args[0]
    while done.returncode != 0:
        clone.settle_merge(done)
        done = clone.git("-c", "core.editor=true", verb, "--continue", ok=False)


def same_everywhere(team: Team, caught_up: Clone, name: str) -> bytes:
    """The caught-up clone's export equals a fresh clone's at the same commit, and a fresh
    index's."""
    caught_up.git("push", "-q", "-f", "origin", "HEAD:main")
    fresh = team.clone(name)
    assert fresh.head() == caught_up.head()
    mine = exported(caught_up)
    assert mine == exported(fresh), "a caught-up clone and a fresh clone render one commit differently"
    assert mine == fresh_render(caught_up)
    return mine


def test_a_revert_of_a_superseded_notes_creation(team):
    founder, other, created, _ = superseded_later(team)
    settled(founder, "revert", "--no-edit", created)
    view = same_everywhere(team, founder, "fresh")
    other.pull()
    assert exported(other) == view


def test_a_rebase_dropping_the_creation(team):
    founder, other, created, _ = superseded_later(team)
    settled(founder, "-c", "sequence.editor=sed -i '1s/^pick/drop/'", "rebase", "-i", f"{created}~1")
    view = same_everywhere(team, founder, "fresh")
    other.git("fetch", "-q", "origin")  # the rewritten main, taken as a teammate takes it
    other.git("reset", "-q", "--hard", "origin/main")
    assert exported(other) == view


def test_a_reset_back_and_forth(team):
    founder, other, created, superseded = superseded_later(team)
    settled(founder, "revert", "--no-edit", created)
    reverted = founder.head()
    founder.git("push", "-q", "origin", "HEAD:refs/heads/reverted")
    other.git("fetch", "-q", "origin")
    for rev in (superseded, reverted, superseded, f"{created}~1", reverted):
        other.git("reset", "-q", "--hard", rev)
        mine = exported(other)
        probe = team.clone(f"probe-{rev[:7]}-{len(list(team.root.iterdir()))}")
        probe.git("reset", "-q", "--hard", rev)
        assert mine == exported(probe), f"at {rev[:7]} the caught-up clone renders otherwise"
        shutil.rmtree(probe.path)



# -- the incremental index against a fresh build, over random removals and additions --------------

_TEMPLATE: dict[str, bytes] = {}


def linked_log() -> dict[str, bytes]:
    """A small log whose items point at each other (successors, a chain, a fork, a
    dispute), with one-character short ids so that neighbours lengthen each other's, its
    events both loose and packed: its files by name."""
    if not _TEMPLATE:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder) / ".qem"
            with Store.open(root, create=True) as s:
                notes = [add(s, f"note {i}", kind=("gotcha", "directive", "task")[i % 3]) for i in range(8)]
                second = add(s, "successor of 0", supersedes=notes[0])
                add(s, "successor of the successor", supersedes=second)
                s.write(lambda tx: tx.dispute(notes[2], notes[3], "me", "they disagree"))
                emit(s, notes[4], "revoked")
            other = Path(folder) / "other" / ".qem"
            shutil.copytree(root, other, ignore=shutil.ignore_patterns("index.db*"))
            with Store.open(root) as s, Store.open(other) as t:
                add(s, "one successor of 1", supersedes=notes[1])
                add(t, "another successor of 1", supersedes=notes[1])  # a fork, once merged
                t.pack()  # the same events loose here and packed there: a sync that streams packs
            _TEMPLATE["config.toml"] = (root / "config.toml").read_bytes()
            for place in (root, other):
                for folder_name in (EVENTS, TEXTS, PACKS):
                    for path in sorted((place / folder_name).glob("*")):
                        _TEMPLATE[f"{folder_name}/{path.name}"] = path.read_bytes()
    return _TEMPLATE


def _place(root: Path, files: dict[str, bytes], present: set[str]) -> None:
    (root / EVENTS).mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = root / name
        if name in present and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        elif name not in present and path.exists():
            path.unlink()


def _view(root: Path) -> tuple[list, list]:
    with Store.open(root) as s:
        notes = s.conn.execute("SELECT id, short, state, superseded_by FROM notes ORDER BY id").fetchall()
        items = s.conn.execute(f"SELECT id, {ITEM} FROM items ORDER BY id").fetchall()
    return notes, items


@pytest.fixture
def one_character_shorts(monkeypatch):
    monkeypatch.setenv("QEM_SHORT_LENGTH", "1")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_the_incremental_index_renders_what_a_fresh_one_does(one_character_shorts, data):
    files = linked_log()
    names = sorted(files)
    with tempfile.TemporaryDirectory() as folder:
        kept, fresh = Path(folder) / "kept" / ".qem", Path(folder) / "fresh" / ".qem"
        present = set(names)
        _place(kept, files, present)
        _view(kept)
        for _ in range(data.draw(st.integers(1, 5), label="steps")):
            present = {"config.toml", *data.draw(st.lists(st.sampled_from(names), unique=True), label="present")}
            _place(kept, files, present)
            shutil.rmtree(fresh.parent, ignore_errors=True)
            _place(fresh, files, present)
            assert _view(kept) == _view(fresh), f"after keeping {sorted(present)}"

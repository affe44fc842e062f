"""Git's rename detection meets the log: a merge that stops on log files is settled by
`qem export`, with each file as its name says, and loses nothing.

Git pairs a deleted file with an added one of similar bytes.  Packing one loose event
makes a pack with exactly its bytes (an exact rename); a text pack written again without a
forgotten text is most of the old pack (a rename).  When the other side of a merge deleted
the same file (it packed it too) or "renamed" it as well (it forgot another text of the
pack), the merge stops on `.qem/`, and in the second case git writes both sides' bytes,
merged, into both new packs: files their names no longer describe.
"""

from __future__ import annotations

import shutil

import pytest
from test_git import team  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def stopped_merge(clone, branch: str) -> list[str]:
    done = clone.git("merge", "--no-edit", "-q", branch, ok=False)
    assert done.returncode != 0, "the scenario needs the merge to stop"
    return clone.conflicted()


def merged_and_cloned(team, bob) -> None:  # type: ignore[no-untyped-def]
    """Bob finishes the settled merge and pushes; a fresh clone holds both notes."""
    bob.git("add", "MEMORY.md")
    bob.git("commit", "-q", "--no-edit")
    bob.check()
    bob.git("push", "-q", "origin", "main")
    fresh = team.clone("fresh")
    fresh.check()
    assert sorted(n["text"] for n in fresh.notes()) == ["bob's own note", "the lock order is A then B"]


def test_packs_of_one_file_on_two_branches_merge_after_export(team):  # noqa: F811
    founder = team.founded("the lock order is A then B")
    ann, bob = team.clone("ann"), team.clone("bob")
    ann.qem("pack")  # a pack of the one event: its bytes, under a new name
    ann.publish("ann packs")
    bob.add("bob's own note")
    bob.qem("pack")  # bob packs the same event with his own
    bob.commit("bob packs")
    bob.git("fetch", "-q", "origin")
    conflicted = stopped_merge(bob, "origin/main")
    assert any(path.startswith(".qem/") for path in conflicted), conflicted

    said = bob.qem("export")
    assert "settled .qem/" in said.stderr + said.stdout
    assert bob.conflicted() in ([], ["MEMORY.md"])
    merged_and_cloned(team, bob)
    del founder


def test_a_branch_s_new_notes_moved_by_directory_rename_detection_are_put_back(team):  # noqa: F811
    """Ann packs the one loose event and text (exact renames out of events/ and texts/ into
    packs/), so git takes events/ and texts/ for folders renamed to packs/ and moves Bob's
    new note's files there: `packs/<id>`, a name no log file has.  `qem export` puts
    each back where its name belongs."""
    founder = team.founded("the lock order is A then B")
    ann, bob = team.clone("ann"), team.clone("bob")
    ann.qem("pack")
    ann.publish("ann packs")
    bob.add("bob's own note")
    bob.commit("bob's note")
    bob.git("fetch", "-q", "origin")
    done = bob.git("merge", "--no-edit", "-q", "origin/main", ok=False)
    moved = [p for p in bob.conflicted() if p.startswith(".qem/packs/") and not p.endswith(".jsonl")]
    assert done.returncode != 0 and moved, (bob.conflicted(), done.stdout)

    said = bob.qem("export")
    assert bob.conflicted() in ([], ["MEMORY.md"]), bob.conflicted()
    assert all(not (bob.path / p).exists() for p in moved), "a misplaced file was left"
    assert "settled" in said.stderr + said.stdout
    merged_and_cloned(team, bob)
    del founder


def test_forgets_on_two_branches_from_one_text_pack(team):  # noqa: F811
    founder = team.founded("alpha fact", "beta fact", "gamma fact")
    founder.qem("pack")
    founder.publish("packed")
    base_packs = {p.name for p in (founder.path / ".qem" / "packs").iterdir() if p.name.startswith("t-")}
    ann, bob = team.clone("ann"), team.clone("bob")
    ann.qem("forget", ann.texts_short("alpha fact"), "-m", "a secret", "--yes")
    ann.publish("ann forgets alpha")
    bob.qem("forget", bob.texts_short("beta fact"), "-m", "a secret", "--yes")
    bob.commit("bob forgets beta")
    bob.git("fetch", "-q", "origin")
    conflicted = stopped_merge(bob, "origin/main")
    assert any(path.startswith(".qem/packs/") for path in conflicted), conflicted

    bob.qem("export")
    assert bob.conflicted() in ([], ["MEMORY.md"])
    for pack in (bob.path / ".qem" / "packs").iterdir():  # each file is what its name says
        assert b"<<<<<<<" not in pack.read_bytes()
    bob.git("add", "MEMORY.md")
    bob.git("commit", "-q", "--no-edit")
    merged = bob.git("ls-tree", "-r", "--name-only", "HEAD", "--", ".qem/packs").stdout.split()
    assert not [p for p in merged if p.rpartition("/")[2] in base_packs], "the pack both sides replaced came back"
    bob.qem("pack")  # the next write removes the forgotten texts the other side's pack still held
    bob.qem("export")
    bob.commit("the forgotten texts gone")
    bob.git("push", "-q", "origin", "main")
    fresh = team.clone("fresh")
    fresh.check()
    texts = {n["text"] for n in fresh.notes()}
    assert "gamma fact" in texts and "alpha fact" not in texts and "beta fact" not in texts
    blob = fresh.git("grep", "-c", "alpha fact", "--", ".qem", ok=False)
    assert blob.returncode == 1, blob.stdout  # no file of the log holds a forgotten text


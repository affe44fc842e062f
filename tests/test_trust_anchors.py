"""Anchors read what is committed: reinstating a note over an unstaged edit of its anchored
file confirms it against git's index (what the next commit carries), not the work tree, so
a fresh clone reports no drift nobody made.  The same through the CLI, a check-in and the
MCP `reinstate` tool (the real client)."""

from __future__ import annotations

import json
import re

import anyio
from test_git import Clone, Team, team  # noqa: F401  (the fixture)
from test_mcp import ok, session


def flagged_note(team: Team) -> tuple[Clone, str]:
    """A founder whose note anchored to src/lock.py is flagged stale, all committed; then an
    edit of src/lock.py left unstaged."""
    founder = team.founded()
    (founder.path / "src").mkdir()
    (founder.path / "src" / "lock.py").write_text("LOCK = 1\n", "utf-8")
    founder.git("add", "src/lock.py")
    note = founder.qem("add", "The lock is taken before the cache", "-k", "finding",
                       "--anchor", "src/lock.py").stdout.strip()
    founder.qem("flag-stale", note, "-m", "to look at again")
    founder.publish("lock and its note")
    (founder.path / "src" / "lock.py").write_text("LOCK = 2  # trying something\n", "utf-8")
    return founder, note


def no_drift_in_a_fresh_clone(team: Team, founder: Clone, name: str) -> None:
    """What the founder committed (qem staged its own files; the edit stays unstaged) is
    pushed; a fresh clone judges every anchor against its tree: nothing drifted."""
    founder.git("commit", "-q", "-m", "reinstated")
    founder.git("push", "-q", "origin", "main")
    assert founder.git("status", "--porcelain").stdout.strip() == "M src/lock.py"
    fresh = team.clone(name)
    checked = fresh.qem("anchors", "check", "--json", code=None)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["notes"] == []
    fresh.qem("verify", "--fail-on-drift")


def test_reinstating_over_an_unstaged_edit_confirms_what_is_staged(team: Team) -> None:
    founder, note = flagged_note(team)
    done = founder.qem("reinstate", note, "-m", "still true")
    assert "anchor src/lock.py: changed in the work tree and not staged" in done.stderr
    assert "git add src/lock.py" in done.stderr
    no_drift_in_a_fresh_clone(team, founder, "fresh")


def test_reinstating_after_staging_the_edit_confirms_the_edit(team: Team) -> None:
    """With the edit staged, the index holds it: the note is confirmed against it, and a
    commit carrying the edit leaves a fresh clone with no drift."""
    founder, note = flagged_note(team)
    founder.git("add", "src/lock.py")
    done = founder.qem("reinstate", note, "-m", "still true")
    assert "not staged" not in done.stderr
    founder.git("commit", "-q", "-m", "the edit and the note")
    founder.git("push", "-q", "origin", "main")
    fresh = team.clone("fresh")
    assert json.loads(fresh.qem("anchors", "check", "--json").stdout)["notes"] == []


def test_the_mcp_reinstate_tool_confirms_what_is_staged(team: Team) -> None:
    founder, note = flagged_note(team)

    async def script() -> str:
        async with session(founder.path) as s:
            return (await ok(s, "reinstate", id=note, reason="still true")).content[0].text

    said = anyio.run(script)
    assert "changed in the work tree and not staged" in said
    no_drift_in_a_fresh_clone(team, founder, "fresh")


def test_a_check_in_that_removes_the_stale_marker_confirms_what_is_staged(team: Team) -> None:
    founder, note = flagged_note(team)
    memory = founder.path / "MEMORY.md"
    text = memory.read_text("utf-8")
    edited = re.sub(r" · STALE \d{4}-\d\d-\d\d \(to look at again\)", "", text)
    assert edited != text
    memory.write_text(edited, "utf-8")
    founder.qem("checkin", "--path", "MEMORY.md", "-m", "still true", "--yes", code=None)
    assert json.loads(founder.qem("show", note, "--json").stdout)["state"] == "active"
    founder.git("add", ".qem", "MEMORY.md")
    no_drift_in_a_fresh_clone(team, founder, "fresh")


def test_a_move_git_does_not_hold_yet_is_not_re_anchored(team: Team) -> None:
    """`mv` (not `git mv`) of an anchored file, then `qem anchors check --flag`: the move is
    in the work tree only, so the note is not re-anchored to a path no commit holds (a
    fresh clone would find it gone); the command says to stage the move.  Once staged, the
    same command re-anchors it, and a fresh clone sees no drift."""
    founder = team.founded()
    (founder.path / "src").mkdir()
    (founder.path / "src" / "lock.py").write_text("LOCK = 1\n", "utf-8")
    founder.git("add", "src/lock.py")
    note = founder.qem("add", "The lock is taken before the cache", "-k", "finding",
                       "--anchor", "src/lock.py").stdout.strip()
    founder.publish("lock and its note")
    (founder.path / "src" / "lock.py").rename(founder.path / "src" / "locking.py")
    held = founder.qem("anchors", "check", "--flag", code=1)
    assert "src/lock.py moved to src/locking.py in the work tree only" in held.stderr, held.stderr
    assert "git add -A src/lock.py src/locking.py" in held.stderr
    anchored = json.loads(founder.qem("show", note, "--json").stdout)["anchors"]
    assert [a["path"] for a in anchored] == ["src/lock.py"]
    founder.git("commit", "-q", "-m", "what qem staged", ok=False)
    founder.git("push", "-q", "origin", "main")
    assert json.loads(team.clone("early").qem("anchors", "check", "--json").stdout)["notes"] == []
    founder.git("add", "-A", "src")
    moved = founder.qem("anchors", "check", "--flag", code=1)
    assert "re-anchored" in moved.stdout, moved.stdout + moved.stderr
    assert [a["path"] for a in json.loads(founder.qem("show", note, "--json").stdout)["anchors"]] == ["src/locking.py"]
    founder.git("commit", "-q", "-m", "the move and the note")
    founder.git("push", "-q", "origin", "main")
    assert json.loads(team.clone("fresh").qem("anchors", "check", "--json").stdout)["notes"] == []

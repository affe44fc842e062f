"""A removal is a change a reviewer cannot miss: a `git rm` of a note's log files, a
`git revert` of the commit that added it, named by `qem diff` (every format, first) and by
`qem verify` (against HEAD before a commit, against `--base REV` in CI), a protected kind's
removal failing it; packing and forgetting are not removals.  And `qem diff A..B`, `A...B`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from builders import pushed_feature
from conftest import run_qem
from test_diff import REPO, diff, diff_json, github_html
from test_git import Clone, Team, team  # noqa: F401  (the fixture)


def full_id(clone: Clone, text: str) -> str:
    found = [row["id"] for row in clone.notes() if row["text"] == text]
    assert len(found) == 1, found
    return found[0]


def files_of(clone: Clone, note: str) -> list[str]:
    """The loose log files holding note `note`'s events and text."""
    events = [e["id"] for e in json.loads(clone.qem("log", note, "--json").stdout)]
    return [f".qem/events/{e}" for e in events] + [f".qem/texts/{note}"]


def branch_with(team: Team) -> tuple[Clone, str, str]:
    """Main holding a directive and a gotcha (with a revocation); a clone on a branch
    `work`. Returns it and the two notes' ids."""
    founder = team.founded("shared fact")
    founder.qem("add", "Never push straight to main", "-k", "directive", "-p", "high")
    founder.add("the lock is flaky", "gotcha")
    founder.qem("revoke", founder.texts_short("the lock is flaky"), "-m", "fixed upstream")
    founder.qem("export")
    founder.publish("rules")
    ann = team.clone("ann")
    ann.git("switch", "-q", "-c", "work")
    return ann, full_id(ann, "Never push straight to main"), full_id(ann, "the lock is flaky")


def removed_by_git_rm(clone: Clone, note: str) -> None:
    clone.git("rm", "-q", *files_of(clone, note))
    refused = clone.qem("export", code=3)  # MEMORY.md shows a note the log lacks: never dropped unasked
    assert "--force" in refused.stderr
    clone.qem("export", "--force")  # the line dropped deliberately, as the refusal says
    clone.git("add", "MEMORY.md")


def test_git_rm_of_a_directive_fails_verify_before_and_after_the_commit(team):
    ann, directive, _ = branch_with(team)
    removed_by_git_rm(ann, directive)
    # a pre-commit hook: the staged removal against HEAD
    done = ann.qem("verify", code=1)
    assert f"removed: note {directive[:12]} (directive: 'Never push straight to main')" in done.stdout
    assert "1 event (created) that HEAD holds is not in this log (the note is gone)" in done.stdout
    assert "-- .qem/events/" in done.stdout and f".qem/texts/{directive}" in done.stdout
    ann.git("commit", "-q", "-m", "drop a rule")
    ann.qem("verify")  # HEAD itself lacks it now: only a base says it was removed
    ann.git("commit", "-q", "--allow-empty", "-m", "more work")
    done = ann.qem("verify", "--base", "origin/main", code=1)
    assert f"removed: note {directive[:12]} (directive" in done.stdout
    assert "that the merge base of origin/main and HEAD" in done.stdout
    assert json.loads(ann.qem("verify", "--base", "origin/main", "--json", code=1).stdout)["ok"] is False


def test_an_unprotected_removal_is_named_and_does_not_fail(team):
    ann, directive, gotcha = branch_with(team)
    removed_by_git_rm(ann, gotcha)
    ann.git("commit", "-q", "-m", "drop a gotcha")
    done = ann.qem("verify", "--base", "origin/main")
    assert f"note: removed: note {gotcha[:12]} (gotcha: 'the lock is flaky'): 2 events (created, revoked)" in done.stdout
    # protecting the kind makes the same removal fail
    (ann.path / ".qem" / "config.toml").write_text(
        (ann.path / ".qem" / "config.toml").read_text("utf-8") + '\n[protect]\nkinds = ["gotcha"]\n', "utf-8")
    assert "removed: note" in ann.qem("verify", "--base", "origin/main", code=1).stdout


def test_verify_base_names_what_it_cannot_judge(team):
    ann, _, _ = branch_with(team)
    for args, words in ((("--base", "nope"), "--base nope: 'nope' is not a commit"),):
        done = ann.qem("verify", *args, code=2)
        assert words in done.stderr and "Traceback" not in done.stderr


def test_a_revert_of_the_commit_that_added_a_note_is_headlined(team):
    founder = team.founded("shared fact")
    founder.qem("add", "Always run the linter", "-k", "directive")
    founder.qem("export")
    added = founder.publish("a rule")
    ann = team.clone("ann")
    ann.git("switch", "-q", "-c", "undo")
    done = ann.git("revert", "--no-edit", added, ok=False)
    ann.settle_merge(done)
    if done.returncode:
        ann.git("-c", "core.editor=true", "revert", "--continue")
    short = ann.qem("diff", "main", "HEAD", "--format", "json", code=1)
    data = json.loads(short.stdout)
    assert [(r["kind"], r["text"], r["whole"]) for r in data["removed"]] == [("directive", "Always run the linter", True)]
    assert data["changes"] == []
    markdown = diff(ann, "main", "HEAD", "--format", "markdown")
    lines = markdown.splitlines()
    assert lines[2].startswith("**1 memory event REMOVED, from 1 note: \\#") and "directive" in lines[2]
    assert "<strong>1 memory event REMOVED" in github_html(markdown)
    assert "#### Removed (1)" in markdown and "Always run the linter" in markdown
    text = diff(ann, "main", "HEAD")
    assert text.splitlines()[0].startswith("1 memory event REMOVED") and "\nremoved (1)\n" in text
    assert diff(ann, "main", "HEAD", "--stat").splitlines()[0].startswith("1 memory event REMOVED")
    assert diff(ann, "main", "HEAD", "--stat", "--format", "markdown").splitlines()[2].startswith("**1 memory event")
    # the other way round the note is learned, not removed
    assert diff_json(ann, "HEAD", "main")["removed"] == []
    # not a removal: main's own events since the branch left it
    founder.add("main learned more")
    founder.publish("more")
    ann.git("fetch", "-q")
    moved = diff_json(ann, "origin/main", "HEAD")
    assert [r["text"] for r in moved["removed"]] == ["Always run the linter"] and len(moved["missing"]) == 2
    assert "written there since" in diff(ann, "origin/main", "HEAD")


def test_packing_and_forgetting_are_not_removals(team):
    ann, directive, gotcha = branch_with(team)
    ann.qem("pack")
    assert not list((ann.path / ".qem" / "events").iterdir())
    ann.qem("forget", ann.texts_short("shared fact"), "-m", "a secret", "--yes")
    ann.qem("export")
    for done in (ann.qem("verify"), ann.qem("diff", code=1)):
        assert "removed" not in done.stdout.lower(), done.stdout
    ann.commit("packed and forgot")
    done = ann.qem("verify", "--base", "origin/main")
    assert "removed" not in done.stdout, done.stdout
    data = diff_json(ann, "origin/main", "HEAD")
    assert data["removed"] == [] and data["missing"] == []
    assert [c["group"] for c in data["changes"]] == ["forgotten"]


def test_a_range_is_read_as_git_reads_it(team):
    founder = team.founded("first")
    founder.add("second")
    founder.publish("two")
    founder.git("switch", "-q", "-c", "side", "HEAD~1")
    founder.add("on the side")
    founder.commit("side")
    as_two = diff(founder, "main", "side")
    assert diff(founder, "main..side") == as_two
    assert diff(founder, "HEAD~1..HEAD") == diff(founder, "HEAD~1", "HEAD")
    assert diff(founder, "main..") == diff(founder, "main", "HEAD")
    # A...B: from the merge base, so main's own note is neither learned nor removed
    data = diff_json(founder, "main...side")
    assert [c["text"] for c in data["changes"]] == ["on the side"] and data["missing"] == []
    assert data["from"]["commit"] == founder.git("merge-base", "main", "side").stdout.strip()
    for args, words in ((("main..side", "HEAD"), "a range (main..side) or two revisions"),
                        (("nope..HEAD",), "'nope' is not a git revision")):
        done = founder.qem("diff", *args, code=2)
        assert words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_readme_verify_step_fails_a_branch_that_removed_a_directive(team):
    step = re.search(r"- run: (qem verify --base .*)\n", (REPO / "README.md").read_text("utf-8"))
    assert step, "README shows no CI step running qem verify --base"
    ann, directive, _ = branch_with(team)
    removed_by_git_rm(ann, directive)
    ann.git("commit", "-q", "-m", "drop a rule")
    ann.git("commit", "-q", "--allow-empty", "-m", "then more")
    ann.git("push", "-q", "origin", "work")
    checkout = team.root / "ci"  # actions/checkout with fetch-depth: 0
    subprocess.run(["git", "clone", "-q", "--branch", "work", f"file://{team.origin}", str(checkout)], check=True,
                   env=team.git_env, capture_output=True)
    env = dict(team.git_env, GITHUB_BASE_REF="main",
               PATH=os.pathsep.join([str(os.path.dirname(sys.executable)), os.environ["PATH"]]))
    done = subprocess.run(["bash", "-ec", step[1]], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and f"removed: note {directive[:12]} (directive" in done.stdout, done.stdout + done.stderr


def test_a_shallow_clone_that_cannot_tell_says_so(team):
    founder = pushed_feature(team)
    founder.git("switch", "-q", "main")
    founder.add("main learned this meanwhile")
    founder.publish("main moved on")
    # with the history, main's own note is no removal
    founder.git("fetch", "-q")
    full = diff_json(founder, "origin/main", "feature")
    assert full["removed"] == [] and len(full["missing"]) == 1 and full["removed_unsure"] is False
    # a shallow checkout of the branch, main fetched at depth 1: no merge base to tell
    checkout = team.root / "ci"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{team.origin}", str(checkout)],
                   check=True, env=team.git_env, capture_output=True)
    ci = Clone(team, checkout, "ci")
    ci.git("fetch", "-q", "--depth=1", "origin", "main:refs/remotes/origin/main")
    done = ci.qem("diff", "origin/main", "HEAD", code=1)
    assert done.stdout.startswith("1 memory event REMOVED (or written on origin/main since: no merge base here")
    assert "have no merge base this clone holds" in done.stderr and "--unshallow" in done.stderr
    assert diff_json(ci, "origin/main", "HEAD")["removed_unsure"] is True


def test_the_verify_hook_stops_a_commit_that_removes_a_directive(tmp_path):
    """The real pre-commit framework with the manifest's qem-verify hook: a staged `git rm`
    of a directive's files is refused before it is committed; a gotcha's passes (and
    `verify --base` names it)."""
    pytest.importorskip("pre_commit")
    from test_precommit import git, git_env, local_hooks, pre_commit, project

    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    proj = project(tmp_path, local_hooks("qem-verify"), env)
    assert run_qem("add", "the lock is flaky", "--kind", "gotcha", cwd=proj).returncode == 0
    assert run_qem("export", cwd=proj).returncode == 0
    assert pre_commit("install", cwd=proj, env=env).returncode == 0
    git("add", "-A", cwd=proj, env=env)
    git("commit", "-q", "-m", "memory", cwd=proj, env=env)
    notes = {n["kind"]: n["id"] for n in json.loads(run_qem("list", "--json", cwd=proj).stdout)}

    def remove(note: str) -> subprocess.CompletedProcess:
        events = [e["id"] for e in json.loads(run_qem("log", note, "--json", cwd=proj).stdout)]
        git("rm", "-q", f".qem/texts/{note}", *(f".qem/events/{e}" for e in events), cwd=proj, env=env)
        assert run_qem("export", cwd=proj).returncode == 3  # the line is never dropped unasked
        assert run_qem("export", "--force", cwd=proj).returncode == 0
        git("add", "MEMORY.md", cwd=proj, env=env)
        return git("commit", "-m", "tidy", cwd=proj, env=env, check=False)

    refused = remove(notes["directive"])
    assert refused.returncode != 0 and f"removed: note {notes['directive'][:12]} (directive" in refused.stderr
    assert git("rev-list", "--count", "HEAD", cwd=proj, env=env).stdout.strip() == "1"
    git("reset", "-q", "--hard", cwd=proj, env=env)
    passed = remove(notes["gotcha"])  # pre-commit shows a passing hook's output only with --verbose
    assert passed.returncode == 0, passed.stdout + passed.stderr
    named = run_qem("verify", "--base", "HEAD~1", cwd=proj)
    assert named.returncode == 0 and f"note: removed: note {notes['gotcha'][:12]} (gotcha" in named.stdout

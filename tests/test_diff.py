"""`qem diff` over real repositories: what memory learned between two revisions, as
events, through branches, merges, a rebase and a shallow clone; its markdown read by
GitHub's own parser (cmarkgfm); and the README's CI step run as written."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from test_git import Clone, Team, team  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parent.parent


def diff(clone: Clone, *args: str, code: int | None = 1) -> str:
    return clone.qem("diff", *args, code=code).stdout


def diff_json(clone: Clone, *args: str, code: int | None = 1) -> dict:
    return json.loads(diff(clone, *args, "--format", "json", code=code))


def github_html(markdown: str) -> str:
    """What GitHub shows for a comment: GFM, with the raw HTML it allows (details)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


def short_of(clone: Clone, text: str) -> str:
    return clone.texts_short(text)


def test_no_memory_yet_is_no_change(team):
    first = team.clone("first")
    (first.path / "README").write_text("a project\n", "utf-8")
    # before the first commit: HEAD names nothing yet, and the memory is empty on both sides
    done = first.qem("diff", code=0)
    assert "no memory changes" in done.stdout and "no commit yet" in done.stderr
    first.commit("start")
    assert "no memory changes" in diff(first, code=0)
    assert diff_json(first, "HEAD", "HEAD", code=0)["changed"] is False
    assert not (first.path / ".qem").exists()  # a read: nothing was created
    first.add("the first note")
    data = diff_json(first)
    assert [c["group"] for c in data["changes"]] == ["created"] and data["changes"][0]["text"] == "the first note"


def lived(team: Team) -> tuple[Clone, str, dict[str, str]]:
    """A memory that went through every kind of change since its last commit; the commit
    before them, and the notes' short ids by name."""
    founder = team.founded("cache is warm", "lock before write", "old doc link", "temp flag",
                           "api key is hunter2", "ci has two cores", "we use tabs")
    base = founder.head()
    s = {name: short_of(founder, text) for name, text in (
        ("cache", "cache is warm"), ("lock", "lock before write"), ("doc", "old doc link"),
        ("flag", "temp flag"), ("secret", "api key is hunter2"), ("ci", "ci has two cores"),
        ("tabs", "we use tabs"))}
    founder.team.monkeypatch.setenv("QEM_ACTOR", "alice")
    founder.qem("add", "Run the tests inside .venv", "-k", "directive", "--actor", "alice")
    founder.qem("supersede", s["lock"], "lock after write", "-m", "measured on the staging box")
    founder.qem("revoke", s["cache"], "-m", "the cache is cold after deploys")
    founder.qem("flag-stale", s["doc"], "-m", "docs moved")
    founder.qem("reinstate", s["doc"], "-m", "docs are back")
    founder.qem("expire", s["flag"], "-m", "sprint over")
    founder.qem("flag-stale", s["secret"], "-m", "rotated?")  # its changes are in the diff: never its text
    founder.qem("forget", s["secret"], "-m", "a credential", "--yes")
    founder.qem("promote", s["ci"], "-m", "I said this")
    dispute = founder.qem("dispute", s["ci"], s["tabs"], "-m", "they disagree").stdout.strip()
    founder.qem("rule", dispute, "--keep", s["ci"], "-m", "ci wins")
    return founder, base, s


def test_every_kind_of_change_grouped_with_actor_and_reason(team):
    founder, base, s = lived(team)
    text = diff(founder)  # HEAD against the working tree
    headings = [line.split(" (")[0] for line in text.splitlines() if line and not line.startswith(" ")][1:]
    assert headings == ["created", "superseded", "revoked", "flagged stale", "reinstated", "promoted", "expired",
                        "forgotten", "disputes opened", "disputes ruled"]
    assert "Run the tests inside .venv" in text and "\ncreated (1)\n" in text  # a successor shows as such
    assert f"#{s['lock']} → #" in text and "- lock before write" in text and "+ lock after write" in text
    assert "by alice" in text and ": measured on the staging box" in text
    assert "the cache is cold after deploys" in text and f"#{s['cache']} finding" in text
    assert f"#{s['ci']} and #{s['tabs']}" in text and f"#{s['ci']} stands" in text
    assert "provenance agent → human" in text
    # committed, the same changes are between two revisions
    head = founder.commit("a day of memory")
    assert diff(founder, base, head) == text.replace("HEAD → the working tree", f"{base} → {head}")
    assert diff(founder, base) == text.replace("HEAD → the working tree", f"{base} → the working tree")
    assert "no memory changes" in diff(founder, code=0)


def test_a_forgotten_text_is_never_shown(team):
    founder, base, s = lived(team)
    founder.commit("forgot")
    for fmt in ("text", "markdown", "json"):
        out = diff(founder, base, "HEAD", "--format", fmt)
        assert "hunter2" not in out, fmt
        # the other way round the old revision still holds the text; it is not shown either
        back = diff(founder, "HEAD", base, "--format", fmt)
        assert "hunter2" not in back, fmt
    forgotten = [c for c in diff_json(founder, base, "HEAD")["changes"] if c["group"] == "forgotten"]
    assert len(forgotten) == 1 and forgotten[0]["text"] is None and forgotten[0]["short"] == s["secret"]


def test_stat_counts_per_kind_and_event_type(team):
    founder, base, s = lived(team)
    stat = diff(founder, "--stat")
    rows = dict(line.split(None, 1) for line in stat.splitlines()[:-1])
    assert rows["directive"] == "1 created"
    assert rows["finding"] == ("1 created, 1 superseded, 2 revoked, 2 stale_flagged, 1 reinstated, 1 expired,"
                               " 1 promoted, 1 forgotten, 2 disputed, 2 ruled")
    assert stat.splitlines()[-1].startswith("15 memory events (HEAD → the working tree)")
    data = diff_json(founder, "--stat")
    assert data["stat"]["finding"]["revoked"] == 2 and data["counts"]["created"] == 2
    table = github_html(diff(founder, "--stat", "--format", "markdown"))
    assert "<table>" in table and "<td>directive</td>" in table


def test_exit_codes_and_bad_revisions(team):
    founder = team.founded("one note")
    before = sorted(p.name for p in (founder.path / ".qem" / "events").iterdir())
    for args, words in ((("nope",), "'nope' is not a git revision"),
                        (("HEAD", "no-such-branch"), "'no-such-branch'"),
                        (("HEAD", "HEAD", "HEAD"), "at most two revisions"),
                        (("--format", "xml"), "unknown format 'xml'"),
                        (("HEAD^{tree}",), "not a git revision")):
        done = founder.qem("diff", *args, code=2)
        assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in (founder.path / ".qem" / "events").iterdir()) == before
    outside = team.root / "plain"
    outside.mkdir()
    team.monkeypatch.chdir(outside)
    from qem_edit import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["diff", "-w", str(outside)])
    assert exit_.value.code == 2


def test_a_branch_and_its_merge(team):
    founder = team.founded("shared fact")
    ann, bob = team.clone("ann"), team.clone("bob")
    ann.git("switch", "-q", "-c", "feature")
    ann.add("ann learned the cache is cold")
    ann.qem("revoke", short_of(ann, "shared fact"), "-m", "no longer true")
    ann.commit("ann's work")
    ann.git("push", "-q", "origin", "feature")
    bob.add("bob learned ci is slow")
    bob.publish("bob's work")
    ann.git("fetch", "-q")
    # what the feature branch teaches main: its events only, whatever main did meanwhile
    branch = diff_json(ann, "origin/main", "feature")
    assert [(c["group"], c["text"]) for c in branch["changes"]] == [
        ("created", "ann learned the cache is cold"), ("revoked", "shared fact")]
    assert len(branch["missing"]) == 1  # bob's note: on main, not on the branch
    assert "qem diff feature origin/main" in diff(ann, "origin/main", "feature")
    # merged, main holds both; from main before the merge, the merge adds ann's events
    ann.git("switch", "-q", "main")
    ann.pull()
    before = ann.head()
    ann.merge("feature")
    merged = diff_json(ann, before, "HEAD")
    assert [c["text"] for c in merged["changes"]] == ["ann learned the cache is cold", "shared fact"]
    assert merged["missing"] == []
    assert diff_json(ann, "feature", "HEAD")["changes"][0]["text"] == "bob learned ci is slow"


def test_a_rebase_keeps_what_the_branch_teaches(team):
    founder = team.founded("shared fact")
    ann, bob = team.clone("ann"), team.clone("bob")
    ann.git("switch", "-q", "-c", "feature")
    ann.add("ann one")
    ann.commit("one")
    ann.add("ann two", kind="task")
    ann.commit("two")
    bob.add("bob one")
    bob.publish("bob")
    ann.git("fetch", "-q")
    taught = diff_json(ann, "origin/main", "HEAD")
    ann.rebase("origin/main")
    rebased = diff_json(ann, "origin/main", "HEAD")
    assert rebased["changes"] == taught["changes"]  # the same events, by id
    assert rebased["missing"] == [] and len(taught["missing"]) == 1
    assert [c["text"] for c in rebased["changes"]] == ["ann one", "ann two"]


def test_a_shallow_clone_says_what_it_cannot_see(team):
    founder = team.founded("first fact")
    founder.add("second fact")
    founder.publish("second")
    founder.add("third fact")
    founder.publish("third")
    shallow = team.root / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{team.origin}", str(shallow)], check=True,
                   env=team.git_env, capture_output=True)
    clone = Clone(team, shallow, "ci")
    assert clone.git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    assert "no memory changes" in diff(clone, code=0)
    clone.add("ci's note")
    assert [c["text"] for c in diff_json(clone)["changes"]] == ["ci's note"]
    done = clone.qem("diff", "HEAD~1", code=2)
    assert "'HEAD~1' is not a revision this clone holds: it is a shallow clone" in done.stderr
    assert clone.head()[:10] in done.stderr and "git fetch --deepen" in done.stderr
    # deepened by one commit, the older revision is seen, whole
    clone.git("fetch", "-q", "--deepen=1")
    assert [c["text"] for c in diff_json(clone, "HEAD~1", "HEAD")["changes"]] == ["third fact"]


HOSTILE = ("<script>alert(1)</script> & <b>bold</b>", "- not a list", "| not | a table |",
           "1. not a numbered list", "===", "[a link](https://example.invalid) and ![img](x.png) @someone")
LONG = "A long note\n\n```python\nprint('fenced')\n```\n\n<details>not closed\n" + "x" * 150


def test_markdown_is_a_pull_request_comment_github_reads(team):
    founder = team.founded("shared fact")
    for text in HOSTILE:
        founder.qem("add", "-", "-k", "finding", stdin=text)
    founder.qem("add", LONG, "-k", "gotcha")
    founder.qem("revoke", short_of(founder, "shared fact"), "-m", "*not* <i>true</i>")
    markdown = diff(founder, "--format", "markdown")
    page = github_html(markdown)
    assert page.startswith("<h3>Memory changes: HEAD → the working tree</h3>")
    assert re.findall(r"<h4>(.*?)</h4>", page) == ["Created (7)", "Revoked (1)"]
    # one list item per change, and nothing a note says turns into markup
    assert page.count("<li>") == 8 and "<table>" not in page and "<ol>" not in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert ">a link</a>" not in page and "<img" not in page and "<h1>" not in page and "<i>" not in page
    assert "[a link](" in page  # as written (GitHub still links a bare URL, as in any comment)
    for text in HOSTILE[1:4]:
        assert text in page
    assert "by founder at " in page and ": *not* &lt;i&gt;true&lt;/i&gt;" in page
    # the long note is folded, whole, in a code block
    [folded] = re.findall(r"<details><summary>(.*?)</summary>(.*?)</details>", page, re.S)
    assert folded[0] == "A long note…"
    block = re.search(r"<pre lang=\"text\"><code>(.*?)</code></pre>", folded[1], re.S)[1]
    assert html.unescape(block) == LONG + "\n" and "<details>not" not in block


def _readme_ci_step() -> str:
    """The script of README's CI step that posts the memory summary."""
    readme = (REPO / "README.md").read_text("utf-8")
    block = re.search(r"```yaml\n(.*?qem diff.*?)```", readme, re.S)
    assert block, "README shows no CI step running qem diff"
    script = block[1].split("run: |\n", 1)[1]
    return "\n".join(line.strip() for line in script.splitlines())


def run_ci_step(team: Team, checkout: Path) -> subprocess.CompletedProcess:
    """The step as a runner would: bash -e, qem on the PATH, and a `gh` that keeps the
    comment it would post (GitHub itself is not here)."""
    tools = team.root / "tools"
    tools.mkdir(exist_ok=True)
    gh = tools / "gh"
    gh.write_text('#!/bin/sh\n[ "$1 $2 $3 $4" = "pr comment $PR --body-file" ] && cp "$5" posted.md\n', "utf-8")
    gh.chmod(0o755)
    path = os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = dict(team.git_env, GITHUB_BASE_REF="main", PR="7", GH_TOKEN="-", PATH=path)
    return subprocess.run(["bash", "-ec", _readme_ci_step()], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=120)


def ci_checkout(team: Team, branch: str) -> Path:
    """As CI checks a pull request out: shallow, that branch only."""
    checkout = team.root / f"ci-{branch}"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", branch, f"file://{team.origin}", str(checkout)],
                   check=True, env=team.git_env, capture_output=True)
    return checkout


def test_the_readme_ci_step_runs(team):
    founder = team.founded("shared fact")
    founder.git("switch", "-q", "-c", "feature")
    founder.add("the branch learned this")
    founder.commit("learned")
    founder.git("push", "-q", "origin", "feature")
    founder.git("switch", "-q", "-c", "quiet", "main")
    (founder.path / "code.py").write_text("print()\n", "utf-8")
    founder.commit("code only")
    founder.git("push", "-q", "origin", "quiet")
    checkout = ci_checkout(team, "feature")
    done = run_ci_step(team, checkout)
    assert done.returncode == 0, done.stderr
    page = github_html((checkout / "posted.md").read_text("utf-8"))
    assert "the branch learned this" in page and "<h4>Created (1)</h4>" in page
    assert "shared fact" not in page  # main's note was there before the branch
    # a pull request that teaches memory nothing gets no comment
    quiet = ci_checkout(team, "quiet")
    assert run_ci_step(team, quiet).returncode == 0 and not (quiet / "posted.md").exists()

"""`qem diff` over real repositories: what memory learned between two revisions, as
events, through branches, merges, a rebase and a shallow clone; its markdown read by
GitHub's own parser (cmarkgfm); and the README's CI step run as written."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from builders import pushed_feature
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


def test_every_event_type_has_one_heading():
    """A diff groups its changes by vocabulary.READING_ORDER: a move missing from it would never be
    shown.  The stale flags a code change caused are a group of their own, before the others."""
    from qem_edit.base.vocabulary import EVENT_TYPES
    from qem_edit.reads.diff import DRIFTED
    from qem_edit.reads.diff_text import GROUPS

    groups = [group for group, _ in GROUPS]
    assert sorted(groups) == sorted([*EVENT_TYPES, DRIFTED])
    assert groups.index(DRIFTED) + 1 == groups.index("stale_flagged")


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
    from qem_edit.shells import cli

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


FAKE_GH = r"""
import json, os, subprocess, sys
from pathlib import Path

# `gh api` as the README's step calls it, against one pull request's comments kept in a
# file: GET a list (--paginate, --jq run by jq itself), POST a new one, PATCH one by id.
state = Path(os.environ["FAKE_GH_STATE"])
comments = json.loads(state.read_text()) if state.exists() else []
args = sys.argv[1:]
assert args[0] == "api", args
method, path, body, jq = "GET", None, None, None
i = 1
while i < len(args):
    if args[i] == "-X":
        method, i = args[i + 1], i + 2
    elif args[i] == "-F":
        key, value = args[i + 1].split("=", 1)
        assert key == "body" and value.startswith("@"), args
        body, i = Path(value[1:]).read_text(), i + 2
        method = "POST" if method == "GET" else method
    elif args[i] == "--jq":
        jq, i = args[i + 1], i + 2
    elif args[i] == "--paginate":
        i += 1
    else:
        path, i = args[i], i + 1
repo, pr = os.environ["GITHUB_REPOSITORY"], os.environ["PR"]
if method == "GET":
    assert path == f"repos/{repo}/issues/{pr}/comments", path
    out = json.dumps(comments)
    if jq:
        out = subprocess.run(["jq", "-r", jq], input=out, capture_output=True, text=True, check=True).stdout
    sys.stdout.write(out)
elif method == "POST":
    assert path == f"repos/{repo}/issues/{pr}/comments", path
    comments.append({"id": 1000 + len(comments), "body": body})
elif method == "PATCH":
    (found,) = [c for c in comments if path == f"repos/{repo}/issues/comments/{c['id']}"]
    found["body"] = body
state.write_text(json.dumps(comments))
"""


NEEDS_JQ = pytest.mark.skipif(shutil.which("jq") is None, reason="the fake gh runs --jq through jq")


def run_ci_step(team: Team, checkout: Path) -> subprocess.CompletedProcess:
    """The step as a runner would: bash -e, qem on the PATH, and a `gh` that keeps the
    pull request's comments in a file (GitHub itself is not here)."""
    tools = team.root / "tools"
    tools.mkdir(exist_ok=True)
    gh = tools / "gh"
    gh.write_text(f"#!{sys.executable}\n{FAKE_GH}", "utf-8")
    gh.chmod(0o755)
    path = os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = dict(team.git_env, GITHUB_BASE_REF="main", PR="7", GH_TOKEN="-", PATH=path, GITHUB_REPOSITORY="team/project",
               FAKE_GH_STATE=str(team.root / f"comments-{checkout.name.split('-', 1)[1].split('.')[0]}.json"))
    return subprocess.run(["bash", "-ec", _readme_ci_step()], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=300)


def posted(team: Team, branch: str) -> list[str]:
    """The comments on `branch`'s pull request (each CI run of it keeps them in one file)."""
    state = team.root / f"comments-{branch}.json"
    return [c["body"] for c in json.loads(state.read_text())] if state.exists() else []


def ci_checkout(team: Team, branch: str) -> Path:
    """As CI checks a pull request out: shallow, that branch only."""
    checkout = team.root / f"ci-{branch}"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", branch, f"file://{team.origin}", str(checkout)],
                   check=True, env=team.git_env, capture_output=True)
    return checkout


@NEEDS_JQ
def test_the_readme_ci_step_runs(team):
    founder = pushed_feature(team)
    founder.git("switch", "-q", "-c", "quiet", "main")
    (founder.path / "code.py").write_text("print()\n", "utf-8")
    founder.commit("code only")
    founder.git("push", "-q", "origin", "quiet")
    checkout = ci_checkout(team, "feature")
    done = run_ci_step(team, checkout)
    assert done.returncode == 0, done.stderr
    (comment,) = posted(team, "feature")
    page = github_html(comment)
    assert "the branch learned this" in page and "<h4>Created (1)</h4>" in page
    assert "shared fact" not in page  # main's note was there before the branch
    # a pull request that teaches memory nothing gets no comment
    quiet = ci_checkout(team, "quiet")
    assert run_ci_step(team, quiet).returncode == 0 and posted(team, "quiet") == []
    # the next push updates the one comment in place
    founder.git("switch", "-q", "feature")
    founder.add("and then this")
    founder.commit("learned more")
    founder.git("push", "-q", "origin", "feature")
    shutil.rmtree(checkout)
    assert run_ci_step(team, ci_checkout(team, "feature")).returncode == 0
    (comment,) = posted(team, "feature")
    assert "and then this" in comment and "the branch learned this" in comment


@NEEDS_JQ
def test_the_readme_ci_step_keeps_a_big_change_under_the_comment_limit(team):
    """A pull request that loads the 749-note corpus (some 215,000 characters of markdown):
    the comment stays under GitHub's 65,536 characters, cut at a change, and its last line
    says how many changes were left out and the command that lists them all."""
    from conftest import CORPUS

    founder = team.founded("shared fact")
    founder.git("switch", "-q", "-c", "big")
    founder.qem("load", str(CORPUS))
    founder.qem("export")
    founder.commit("the corpus")
    founder.git("push", "-q", "origin", "big")
    whole = founder.qem("diff", "origin/main", "HEAD", "--format", "markdown", code=1).stdout
    assert len(whole) > 200_000
    done = run_ci_step(team, ci_checkout(team, "big"))
    assert done.returncode == 0, done.stderr
    (comment,) = posted(team, "big")
    assert len(comment) <= 65_536 and comment.startswith("<!-- qem diff -->\n")
    last = comment.rstrip("\n").split("\n")[-1]
    match = re.fullmatch(r"\*\*… ([\d,]+) more changes not shown here \(the comment's size limit\);"
                         r" `qem diff origin/main HEAD` lists every one\.\*\*", last)
    assert match, last
    page = github_html(comment)
    shown = page.count("<li>")
    assert shown + int(match[1].replace(",", "")) == whole.count("\n- **")  # every change shown or counted
    assert comment.split("\n", 1)[1].startswith(whole[:1000])  # cut at a change: what is shown is the whole's start


@pytest.mark.parametrize("limit", [700, 900, 1200, 2000, 4000])
def test_max_chars_cuts_the_markdown_at_a_change_and_says_what_is_left_out(team, limit):
    founder, base, s = lived(team)
    founder.qem("add", "A long note\n" + "with a second line " * 20, "-k", "gotcha")
    whole = diff(founder, base, "--format", "markdown")
    cut = diff(founder, base, "--format", "markdown", "--max-chars", str(limit))
    if len(whole) + 1 <= limit:
        assert cut == whole
        return
    assert len(cut) <= limit
    body, last = cut.rstrip("\n").rsplit("\n\n", 1)
    left = int(re.fullmatch(r"\*\*… (\d+) more changes? not shown here \(the comment's size limit\);"
                            rf" `qem diff {base}` lists every one\.\*\*", last)[1])
    assert whole.startswith(body)  # the changes shown are the whole's, in order, each whole
    items = whole.count("\n- **")
    assert body.count("\n- **") + left == items and left > 0
    assert whole[len(body):].startswith("\n\n#### ") or whole[len(body):].startswith("\n- **")
    page = github_html(cut)
    assert page.count("<details>") == page.count("</details>") and page.rstrip().endswith("</strong></p>")


def test_max_chars_is_for_markdown_and_a_number(team):
    founder, base, s = lived(team)
    for args in (("--max-chars", "-5", "--format", "markdown"), ("--max-chars", "100")):
        done = founder.qem("diff", base, *args, code=2)
        assert "--max-chars" in done.stderr and done.stdout == ""

"""`qem diff` and the code a change edits, over real repositories: the stale flags a code
change caused (a `stale_flagged` event whose data carries `drift`) in a group of their own,
and the notes in force anchored to the paths the code diff touches ("memory about the code
this change edits"), listed whether or not memory changed; in text, in markdown read by
GitHub's own parser (cmarkgfm), and in JSON."""

from __future__ import annotations

import json
import os
import re

from builders import planted_created
from test_diff import diff, diff_json, github_html
from test_git import Clone, Team, team  # noqa: F401  (the fixture)

from qem_edit.base.decisions import Draft
from qem_edit.base.replay import Event
from qem_edit.base.stored_form import drift_of
from qem_edit.reads.diff import DRIFTED, changes_of
from qem_edit.storage.store import Store
from qem_edit.system.anchors import blob_oid

LOCK = "the workspace lock must be released before the daemon restarts"
SRC = "src holds the daemon and nothing else"
SRCX = "srcx is the experiments folder"
UTIL = "util.py has no state"
MIRROR = "MEMORY.md is rendered, never edited by hand"


def anchored_team(team: Team) -> tuple[Clone, dict[str, str]]:
    """A memory on main with notes anchored to a file (src/lock.py), a folder (src), a
    folder beside it whose name starts the same (srcx), another file (src/util.py) and
    MEMORY.md; pushed.  Returns the clone and the notes' short ids by name."""
    founder = team.founded("shared fact")
    for path, text in (("src/lock.py", "LOCK = 1\n"), ("src/util.py", "X = 1\n"), ("srcx/other.py", "Y = 1\n")):
        (founder.path / path).parent.mkdir(exist_ok=True)
        (founder.path / path).write_text(text, "utf-8")
    s = {}
    for name, text, kind, anchor in (("lock", LOCK, "gotcha", "src/lock.py"), ("src", SRC, "decision", "src"),
                                     ("srcx", SRCX, "reference", "srcx"), ("util", UTIL, "finding", "src/util.py")):
        s[name] = founder.qem("add", text, "-k", kind, "--anchor", anchor).stdout.strip()
    # a note anchored to MEMORY.md, which no write makes (the rendering is refused as an
    # anchor) but a clone of an older qem may bring: planted as its writer named it
    mirror = {"path": "MEMORY.md", "oid": blob_oid((founder.path / "MEMORY.md").read_bytes())}
    planted = planted_created(founder.path / ".qem", MIRROR, "directive", anchors=[mirror]).split("/")[1]
    founder.qem("export")
    s["mirror"] = next(n["short"] for n in json.loads(founder.qem("list", "--json").stdout) if n["id"] == planted)
    founder.publish("code and memory about it")
    return founder, s


def flag_drift(clone: Clone, short: str, drift: list[dict], reason: str) -> Event:
    """A stale flag as the anchors check writes one, through the store's own write (a
    Draft recorded in a Transaction); MEMORY.md rendered again."""
    with Store.open(clone.path / ".qem") as store:
        note = store.resolve(short)
        event = store.write(lambda tx: tx.record([Draft(note, "stale_flagged", reason, {"drift": drift})], "hook")[0])
    clone.qem("export")
    return event


def oid(clone: Clone, rev: str, path: str) -> str:
    return clone.git("rev-parse", f"{rev}:{path}").stdout.strip()


def drifted_feature(team: Team) -> tuple[Clone, dict[str, str], str, str]:
    """A branch `feature` that rewrites src/lock.py and flags its note for the drift, and
    flags `shared fact` stale by hand; the object ids of src/lock.py before and after."""
    founder, s = anchored_team(team)
    founder.git("switch", "-q", "-c", "feature")
    (founder.path / "src" / "lock.py").write_text("LOCK = 2  # released after restart\n", "utf-8")
    founder.commit("the lock moves")
    was, now = oid(founder, "main", "src/lock.py"), oid(founder, "feature", "src/lock.py")
    flag_drift(founder, s["lock"], [{"path": "src/lock.py", "was": was, "now": now}],
               f"anchor src/lock.py changed ({was[:12]} → {now[:12]})")
    founder.qem("flag-stale", founder.texts_short("shared fact"), "-m", "nobody remembers why")
    founder.commit("memory of the move")
    return founder, s, was, now


def test_a_branch_that_moves_anchored_code_shows_both_lists_in_markdown(team):
    founder, s, was, now = drifted_feature(team)
    markdown = diff(founder, "main..feature", "--format", "markdown")
    page = github_html(markdown)
    assert re.findall(r"<h4>(.*?)</h4>", page) == [
        "Made stale by drift (1)", "Flagged stale (1)", "Memory about the code this change edits (2)"]
    drift, plain, about = re.split(r"<h4>.*?</h4>", page)[1:]
    assert LOCK in drift and f"anchor src/lock.py: changed {was[:12]} → {now[:12]}" in drift
    assert f"#{s['lock']} gotcha" in drift and "by hook at " in drift
    assert "shared fact" in plain and "nobody remembers why" in plain and "src/lock.py" not in plain
    # the file's note and the folder's; not srcx's (a name that starts the same), util's or MEMORY.md's
    assert about.count("<li>") == 2
    assert f"#{s['lock']} gotcha (flagged stale)" in about and "anchored to src/lock.py" in about
    assert f"#{s['src']} decision" in about and "anchored to src/ (src/lock.py)" in about
    assert SRCX not in page and UTIL not in page and MIRROR not in page
    summary = page.split("</h3>", 1)[1]
    assert "2 memory events (main → feature): 2 stale_flagged (1 by drift)" in summary
    assert "2 notes in force are about the code this change edits" in summary
    # the text says the same
    text = diff(founder, "main..feature")
    headings = [line for line in text.splitlines() if line and not line.startswith(" ")][1:]
    assert headings == ["made stale by drift (1)", "flagged stale (1)", "memory about the code this change edits (2)"]
    assert f"    anchor src/lock.py: changed {was[:12]} → {now[:12]}\n" in text
    assert f"  #{s['src']} decision\n    {SRC}\n    anchored to src/ (src/lock.py)" in text


def test_the_json_carries_both_lists(team):
    founder, s, was, now = drifted_feature(team)
    data = diff_json(founder, "main", "feature")
    drifted = [c for c in data["changes"] if c["group"] == DRIFTED]
    assert [c["short"] for c in drifted] == [s["lock"]] and drifted[0]["text"] == LOCK
    assert drifted[0]["drift"] == [{"path": "src/lock.py", "was": was, "now": now}]
    [plain] = [c for c in data["changes"] if c["group"] == "stale_flagged"]
    assert plain["drift"] is None and plain["text"] == "shared fact"
    assert data["counts"] == {"stale_flagged": 2}  # counted by event type, as ever
    assert [a["short"] for a in data["anchored"]] == [s["lock"], s["src"]]  # in the projection's order
    lock, src = data["anchored"]
    assert set(lock) == {"note", "short", "kind", "state", "text", "anchors"}
    assert (lock["kind"], lock["state"], lock["text"]) == ("gotcha", "stale", LOCK)
    assert lock["anchors"] == [{"path": "src/lock.py", "oid": was, "touched": ["src/lock.py"]}]
    assert src["state"] == "active" and src["anchors"][0]["path"] == "src"
    assert src["anchors"][0]["touched"] == ["src/lock.py"]
    # --stat counts them too
    stat = diff(founder, "main", "feature", "--stat")
    assert stat.splitlines()[-1] == ("2 memory events (main → feature): 2 stale_flagged (1 by drift);"
                                     " 2 notes in force are about the code this change edits")


def test_a_code_only_change_lists_the_notes_about_it(team):
    founder, s = anchored_team(team)
    # the work tree: srcx changed, nothing under src; a folder named like src is not src
    (founder.path / "srcx" / "other.py").write_text("Y = 2\n", "utf-8")
    done = founder.qem("diff", code=0)
    assert done.stdout.splitlines()[0] == ("no memory changes (HEAD → the working tree), but 1 note in force is"
                                           " about the code this change edits")
    assert f"#{s['srcx']} reference\n    {SRCX}\n    anchored to srcx/ (srcx/other.py)" in done.stdout
    assert SRC not in done.stdout and LOCK not in done.stdout
    # a new file under src, not yet added, and a rename: the folder by a file under it, the
    # renamed file's note by its old path
    (founder.path / "src" / "deep").mkdir()
    (founder.path / "src" / "deep" / "new.py").write_text("Z = 1\n", "utf-8")
    founder.git("mv", "src/util.py", "src/helpers.py")
    data = diff_json(founder, code=0)
    assert data["changed"] is False and data["changes"] == []
    touched = {a["short"]: a["anchors"] for a in data["anchored"]}
    assert set(touched) == {s["src"], s["srcx"], s["util"]}
    assert touched[s["src"]][0]["touched"] == ["src/deep/new.py", "src/helpers.py", "src/util.py"]
    assert touched[s["util"]][0]["touched"] == ["src/util.py"]
    # committed on a branch: the same, between two revisions, and in a pull request's markdown
    founder.git("switch", "-q", "-c", "code")
    founder.commit("code only")
    assert diff_json(founder, "main...code", code=0)["anchored"] == data["anchored"]
    page = github_html(diff(founder, "main", "code", "--format", "markdown", code=0))
    assert re.findall(r"<h4>(.*?)</h4>", page) == ["Memory about the code this change edits (3)"]
    assert "no memory changes (main → code), but 3 notes in force are about the code this change edits" in page
    assert "anchored to src/ (src/deep/new.py, src/helpers.py, src/util.py)" in page
    # nothing touched that a note is about: as before
    assert diff(founder, "code", "code", code=0).rstrip("\n") == "no memory changes (code → code)"


def test_a_file_whose_name_is_not_utf8_is_named_with_its_bytes_escaped(team):
    """git names a file by its bytes; one whose name is not UTF-8, under an anchored folder,
    is listed with those bytes escaped, and every format prints UTF-8 (JSON that parses):
    the raw byte reached the output before."""
    founder, s = anchored_team(team)
    (founder.path / "src" / os.fsdecode(b"caf\xe9.py")).write_text("Z = 1\n", "utf-8")
    touched = {a["short"]: a["anchors"] for a in diff_json(founder, code=0)["anchored"]}
    assert touched[s["src"]][0]["touched"] == ["src/caf\\xe9.py"]
    assert "anchored to src/ (src/caf\\xe9.py)" in diff(founder, code=0)
    assert "anchored to src/ (src/caf\\xe9.py)" in github_html(diff(founder, "--format", "markdown", code=0))


def test_memory_s_own_files_are_not_code(team):
    founder, s = anchored_team(team)
    founder.add("a new fact")  # changes .qem/ and MEMORY.md, both anchored to by nobody but the mirror's note
    data = diff_json(founder)
    assert MIRROR not in str(data["anchored"]) and data["anchored"] == []
    assert "about the code" not in diff(founder)


def test_a_note_out_of_force_is_not_listed(team):
    founder, s = anchored_team(team)
    founder.qem("revoke", s["lock"], "-m", "the lock is gone")
    founder.qem("supersede", s["src"], "src holds the daemon and its lock", "-m", "it grew")
    (founder.path / "src" / "lock.py").write_text("LOCK = 4\n", "utf-8")
    anchored = diff_json(founder)["anchored"]
    # the revoked note is not, the superseded one is not, its successor (the anchors kept) is
    assert [(a["kind"], a["text"]) for a in anchored] == [("decision", "src holds the daemon and its lock")]


def test_a_deleted_anchor_and_a_folder_of_many(team):
    founder, s = anchored_team(team)
    for n in range(5):
        (founder.path / "src" / f"m{n}.py").write_text("\n", "utf-8")
    was = oid(founder, "HEAD", "src/lock.py")
    (founder.path / "src" / "lock.py").unlink()
    flag_drift(founder, s["lock"], [{"path": "src/lock.py", "was": was, "now": None}], "anchor src/lock.py deleted")
    text = diff(founder)
    assert f"    anchor src/lock.py: deleted (was {was[:12]})" in text
    assert "anchored to src/ (src/lock.py, src/m0.py, src/m1.py and 3 more)" in text
    assert diff_json(founder)["changes"][0]["drift"] == [{"path": "src/lock.py", "was": was, "now": None}]


def test_a_cut_comment_counts_the_notes_about_the_code_it_left_out(team):
    founder, s = anchored_team(team)
    (founder.path / "src" / "lock.py").write_text("LOCK = 3\n", "utf-8")
    founder.add("a fact of this change")
    whole = diff(founder, "--format", "markdown")
    cut = diff(founder, "--format", "markdown", "--max-chars", str(len(whole) - 10))
    body, last = cut.rstrip("\n").rsplit("\n\n", 1)
    left = re.fullmatch(r"\*\*… (\d) more notes? about the code not shown here \(the comment's size limit\);"
                        r" `qem diff HEAD` lists every one\.\*\*", last)
    assert left, last
    assert "a fact of this change" in body and whole.startswith(body)
    assert body.count("\n- **") + int(left[1]) == whole.count("\n- **") == 3


# -- which stale flags are drift: the data's shape, without a repository ----------------------


OID_A, OID_B = "a" * 40, "b" * 64


def flag(data: dict) -> Event:
    return Event("e" * 26, "n" * 26, "stale_flagged", "2026-07-27T10:00:00Z", "hook", "drifted", data=data)


def test_only_a_well_formed_drift_makes_a_drift_flag():
    good = {"drift": [{"path": "src/a.py", "was": OID_A, "now": OID_B}, {"path": "b", "was": OID_B, "now": None}]}
    assert drift_of(good) == (("src/a.py", OID_A, OID_B), ("b", OID_B, None))
    assert [c.group for c in changes_of([flag(good)], {})] == [DRIFTED]
    for bad in ({}, {"drift": []}, {"drift": "src/a.py"}, {"drift": [{"path": "src/a.py", "was": OID_A}]},
                {"drift": [{"path": "../out", "was": OID_A, "now": None}]},
                {"drift": [{"path": "a", "was": OID_A.upper(), "now": None}]},
                {"drift": [{"path": "a", "was": OID_A, "now": "b" * 12}]},
                {"drift": [good["drift"][0], "a"]}):
        assert drift_of(bad) == (), bad
        assert [c.group for c in changes_of([flag(bad)], {})] == ["stale_flagged"], bad

"""MEMORY.md's `answered by #ID` on a request: derived from the log (the answers that speak
for it, qem_edit.base.owing.answering), like `SUPERSEDED by` and `DISPUTED`, though an answer is
an event of another note.  The index renders the request's cached item again whenever an
answer lands, goes, changes state or arrives from another clone, so the file stays what a
fresh clone renders from the log alone, and `qem export --check` holds on both sides of a
merge."""

from __future__ import annotations

from pathlib import Path

from builders import store_path
from test_git import Clone, same_view, team  # noqa: F401  (the fixture)

from qem_edit.storage.store import Store


def _line(clone: Clone, short: str) -> str:
    """The item line of note `short` in the clone's MEMORY.md."""
    found = [line for line in clone.memory_md().decode().splitlines() if line.startswith(f"- [#{short}] ")]
    assert len(found) == 1, found
    return found[0]


def _fresh(team, name: str) -> bytes:  # type: ignore[no-untyped-def]
    fresh = team.clone(name)
    fresh.qem("export", "--check")
    return fresh.memory_md()


def test_an_answer_from_another_clone_shows_on_the_request_after_a_merge_and_a_fresh_clone_agrees(team) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Send the report", "-k", "task", "--to", "mate", "--due", "2030-01-05").stdout.strip()
    founder.qem("export")
    founder.publish("a request")
    mate = team.clone("mate")
    answer = mate.qem("answer", request, "Sent it: docs/report.md").stdout.strip()
    assert _line(mate, request).endswith(f"· to mate · due 2030-01-05 · answered by #{answer} · Send the report")
    mate.publish("the answer")
    # meanwhile the founder writes on: the two branches meet in a merge
    founder.add("the tests need a display")
    founder.commit("a finding")
    assert "answered by" not in _line(founder, request)
    founder.pull()
    founder.check()  # verify, and `qem export --check`: the merged MEMORY.md renders the merged log
    assert f"answered by #{answer}" in _line(founder, request)
    founder.git("push", "-q", "origin", "main")
    mate.pull()
    view = same_view(founder, mate)
    assert _fresh(team, "fresh") == view


def test_both_branches_change_the_request_s_line_and_the_merge_settles_on_the_merged_log(team) -> None:  # noqa: F811
    """One branch answers the request, the other flags it stale: git conflicts on its line in
    MEMORY.md, and `qem export` settles it from the merged log, the same on either side."""
    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Send the report", "-k", "task", "--to", "mate", "--due", "2030-01-05").stdout.strip()
    founder.qem("export")
    founder.publish("a request")
    mate = team.clone("mate")
    answer = mate.qem("answer", request, "Sent it").stdout.strip()
    mate.publish("the answer")
    founder.qem("flag-stale", request, "-m", "the report format changed")
    founder.commit("stale")
    founder.git("fetch", "-q", "origin")
    done = founder.git("merge", "--no-edit", "-q", "origin/main", ok=False)
    assert done.returncode != 0 and founder.conflicted() == ["MEMORY.md"]  # the one line both changed
    founder.settle_merge(done)  # `qem export`: the merged log rendered
    founder.git("commit", "-q", "--no-edit")
    founder.check()
    line = _line(founder, request)
    assert "· STALE " in line and line.endswith(f"· answered by #{answer} · Send the report")
    founder.git("push", "-q", "origin", "main")
    mate.pull()
    assert same_view(founder, mate) == _fresh(team, "fresh")


def test_the_marker_follows_the_answers_revoked_superseded_forgotten_and_two_in_force(team) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Review the plan", "-k", "task", "--to", "mate").stdout.strip()
    first = founder.qem("answer", request, "Looks fine").stdout.strip()
    founder.qem("export")
    founder.publish("a request, answered")
    mate = team.clone("mate")
    # the answer replaced: its successor carries the pointer, and speaks
    successor = mate.qem("supersede", first, "Looks fine, one nit in section 2").stdout.strip()
    assert _line(mate, request).split(" · ")[-2] == f"answered by #{successor}"
    # a second answer in force, on the other clone: two speak (status says unknown)
    other = founder.qem("answer", request, "Not fine: the budget is wrong").stdout.strip()
    founder.commit("a second answer")
    mate.publish("the answer superseded")
    founder.pull()
    founder.check()
    both = sorted([successor, other], key=lambda s: next(n for n in founder.notes() if n["short"] == s)["created_at"] + s)
    assert f"answered by #{both[0]}, #{both[1]}" in _line(founder, request)
    assert "answered: unknown" in founder.qem("status", request).stdout
    founder.git("push", "-q", "origin", "main")
    assert _fresh(team, "fresh1") == founder.memory_md()
    # revoked: it answers nothing; forgotten: likewise, and its text goes
    founder.qem("revoke", other, "-m", "the budget was right")
    assert _line(founder, request).split(" · ")[-2] == f"answered by #{successor}"
    founder.qem("forget", successor, "-m", "held a name", "--yes")
    # the chain's note in force is gone: the answer it replaced stands again, as status says
    assert _line(founder, request).split(" · ")[-2] == f"answered by #{first}"
    assert f"answered: yes (answered by #{first} " in founder.qem("status", request).stdout
    founder.check()
    founder.publish("withdrawn")
    assert _fresh(team, "fresh2") == founder.memory_md()
    mate.pull()
    mate.qem("export", "--check")
    assert _line(mate, request) == _line(founder, request)
    # the last answer forgotten on the other side: nothing answers it, and the line says nothing
    mate.qem("forget", first, "-m", "withdrawn", "--yes")
    assert "answered by" not in _line(mate, request)
    mate.publish("forgotten")
    founder.pull()
    founder.check()
    assert "answered by" not in _line(founder, request)
    assert _fresh(team, "fresh3") == founder.memory_md()


def test_the_marker_is_read_and_ignored_on_check_in_and_a_text_like_it_is_escaped(qem, ws: Path) -> None:
    request = qem("add", "Send the report", "-k", "task", "--to", "bob").stdout.strip()
    answer = qem("answer", request, "answered by #zz · a text that reads like the marker").stdout.strip()
    qem("export")
    md = (ws / "MEMORY.md").read_text("utf-8")
    assert f"answers #{request} · \\answered by #zz · a text" in md
    # deleting the derived marker (or writing one) changes nothing: it is the log's to say
    edited = md.replace(f" · answered by #{answer}", "")
    assert edited != md
    (ws / "MEMORY.md").write_text(edited, "utf-8")
    events = sorted(p.name for p in (store_path(ws) / "events").iterdir())
    done = qem("checkin", "--yes", "-m", "tidy")
    assert "no changes; no event written" in done.stderr
    assert (ws / "MEMORY.md").read_text("utf-8") == md  # rendered again: `qem export --check` agrees
    assert sorted(p.name for p in (store_path(ws) / "events").iterdir()) == events
    with Store.open(store_path(ws)) as store:
        assert store.note(store.resolve(request)).state == "active"
        assert store.note(store.resolve(answer)).text.startswith("answered by #zz · ")
    qem("export", "--force")
    assert f"answered by #{answer} · Send the report" in (ws / "MEMORY.md").read_text("utf-8")

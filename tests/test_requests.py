"""Requests and answers in the record: `--to NAME` (who owes a note), `--due DATE|TIME` (its
deadline) and `--answers ID` / `qem answer ID` (a pointer to the request, never an edit of
it), taken the same by every way in: the command line (and its quick path), a check-in of
MEMORY.md (`to NAME · due DATE · answers #ID`, docs/FORMAT.md), MCP, `qem load`, and a
clone's log files, checked as a write is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import planted_created, store_path
from test_git import team  # noqa: F401  (the fixture)
from test_mcp import failed, ok, serve

from qem_edit.storage.store import Store


def _note(ws: Path, short: str) -> dict[str, Any]:
    with Store.open(store_path(ws)) as store:
        return store.note(store.resolve(short)).to_json()


def _log_files(ws: Path) -> list[str]:
    return sorted(p.name for p in (store_path(ws) / "events").iterdir()) if (store_path(ws) / "events").exists() else []


def test_add_records_who_owes_a_note_its_deadline_and_what_it_answers(qem, ws: Path) -> None:
    request = qem("add", "Send the migration report", "-k", "task", "--to", "alice", "--due", "2026-09-05").stdout.strip()
    timed = qem("add", "Review the lock order", "-k", "task", "--to", "session-2",
                "--due", "2026-09-02T14:00:00+02:00").stdout.strip()
    answer = qem("add", "Sent: docs/migration.md", "-k", "finding", "--answers", request).stdout.strip()
    by_command = qem("answer", request, "0 rows lost too").stdout.strip()
    assert _note(ws, request)["to"] == "alice" and _note(ws, request)["due"] == "2026-09-05T23:59:59Z"
    assert _note(ws, timed)["due"] == "2026-09-02T12:00:00Z"  # UTC, as --expires reads a time
    full = _note(ws, request)["id"]
    assert _note(ws, answer)["answers"] == full and _note(ws, by_command)["answers"] == full
    assert _note(ws, by_command)["kind"] == "finding"
    assert _note(ws, request)["state"] == "active" and _note(ws, request)["expires"] is None  # never edited
    shown = qem("show", answer).stdout
    assert f"answers #{request}" in shown
    assert "requested of alice, due 2026-09-05T23:59:59Z" in qem("show", request).stdout
    qem("export")
    memory = (ws / "MEMORY.md").read_text("utf-8")
    assert any(f"to alice · due 2026-09-05 · answered by #{a}, #{b} · Send the migration report" in memory
               for a, b in ((answer, by_command), (by_command, answer)))  # (two in force: the oldest first)
    assert f"to session-2 · due 2026-09-02T12:00:00Z · Review" in memory
    assert f"answers #{request} · Sent: docs/migration.md" in memory


@pytest.mark.parametrize("args, said", [
    (("--to", "two words"), "--to 'two words'"),
    (("--to", "a·b"), "--to"),
    (("--due", "next friday"), "--due='next friday' is not an ISO date"),
    (("--due", "2026-02-30"), "--due='2026-02-30'"),
    (("--answers", "zzzz"), "no note #zzzz"),
])
def test_a_bad_request_is_refused_naming_the_option_and_nothing_is_written(qem, ws: Path, args, said) -> None:
    qem("add", "first", "-k", "task")
    before = _log_files(ws)
    done = qem("add", "Send it", "-k", "task", *args)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert _log_files(ws) == before
    done = qem("answer", "zzzz", "an answer")
    assert done.returncode == 2 and "no note #zzzz" in done.stderr


def test_a_successor_of_a_request_is_the_request(qem, ws: Path) -> None:
    request = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05").stdout.strip()
    successor = qem("supersede", request, "Send the report, with the logs", "-m", "more asked").stdout.strip()
    assert (_note(ws, successor)["to"], _note(ws, successor)["due"]) == ("alice", "2026-09-05T23:59:59Z")


# -- MEMORY.md -------------------------------------------------------------------------------------


def _checked_in(qem, ws: Path, edit) -> Any:  # type: ignore[no-untyped-def]
    path = ws / "MEMORY.md"
    path.write_text(edit(path.read_text("utf-8")), "utf-8")
    return qem("checkin", "--path", str(path), "-m", "edit", "-y")


def test_a_check_in_reads_requests_and_answers_back(qem, ws: Path) -> None:
    request = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05").stdout.strip()
    qem("export")
    done = _checked_in(qem, ws, lambda t: t.replace(
        "## Gotchas\n", f"- to bob · due 2026-10-01T09:30:00Z · Rotate the token\n- answers #{request} · It is sent\n\n## Gotchas\n"))
    assert done.returncode == 0, done.stderr
    with Store.open(store_path(ws)) as store:
        made = {n.text: n for n in store.notes()}
        full = store.resolve(request)
    assert (made["Rotate the token"].to, made["Rotate the token"].due) == ("bob", "2026-10-01T09:30:00Z")
    assert made["It is sent"].answers == full
    # the file as exported reads back unchanged: no change, no new event
    qem("export")
    events = len(qem("log").stdout.splitlines())
    assert _checked_in(qem, ws, lambda t: t).returncode == 0
    assert len(qem("log").stdout.splitlines()) == events
    # changing who owes it supersedes the note, as a changed `expires` does
    done = _checked_in(qem, ws, lambda t: t.replace("to alice · due 2026-09-05", "to carol · due 2026-09-05"))
    assert done.returncode == 0, done.stderr
    with Store.open(store_path(ws)) as store:
        old = store.note(full)
        new = store.note(old.superseded_by)
    assert old.state == "superseded" and (new.to, new.due, new.text) == ("carol", "2026-09-05T23:59:59Z", "Send the report")


@pytest.mark.parametrize("line, said", [
    ("- due 2026-02-30 · Pay", "due 2026-02-30 is not a date"),
    ("- answers #zzzz · An answer to nothing", "`answers #zzzz`"),
    ("- to bob · to carol · Twice", "two `to` markers"),
])
def test_a_bad_marker_is_refused_on_its_line_and_nothing_is_written(qem, ws: Path, line: str, said: str) -> None:
    qem("add", "first", "-k", "task")
    qem("export")
    before = _log_files(ws)
    done = _checked_in(qem, ws, lambda t: t.replace("## Gotchas\n", f"{line}\n\n## Gotchas\n"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "line " in done.stderr and "Traceback" not in done.stderr
    assert _log_files(ws) == before


# -- MCP, load, another clone ------------------------------------------------------------------------


def test_mcp_add_takes_to_due_and_answers(qem, ws: Path) -> None:
    request = qem("add", "Send the report", "-k", "task", "--to", "alice").stdout.strip()

    async def script(s: Any) -> Any:
        asked = await ok(s, "add", text="Check the backups", kind="task", to="session-7", due="2026-11-01")
        answered = await ok(s, "add", text="The report is sent", kind="finding", answers=request)
        bad = await failed(s, "add", text="Late", kind="task", due="soon")
        status = await ok(s, "status", id=request)
        return asked.content[0].text, answered.content[0].text, bad, status.structured_content

    asked, answered, bad, status = serve(ws, script)
    with Store.open(store_path(ws)) as store:
        made = {n.text: n for n in store.notes()}
        full = store.resolve(request)
    assert (made["Check the backups"].to, made["Check the backups"].due) == ("session-7", "2026-11-01T23:59:59Z")
    assert made["The report is sent"].answers == full
    assert "due" in bad and "Late" not in made
    assert status["answered"]["answered"] == "yes" and status["answered"]["by"][0]["actor"] == "test-agent"


def test_mcp_owed_answers_what_qem_owed_answers_with_its_scope_and_schema(qem, ws: Path, monkeypatch) -> None:
    import jsonschema

    monkeypatch.setenv("QEM_NOW", "2026-09-07T12:00:00Z")  # (the server is started with it too)
    early = {"QEM_NOW": "2026-09-01T08:00:00Z"}
    late = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05", env=early).stdout.strip()
    qem("add", "Review the plan", "-k", "task", "--to", "bob", "--due", "2026-09-30", env=early)
    done = qem("add", "Rotate the token", "-k", "task", "--to", "alice", env=early).stdout.strip()
    qem("answer", done, "Rotated", env=early)
    calls = [({}, ()), ({"to": "alice"}, ("--to", "alice")), ({"late": True}, ("--late",)),
             ({"at": "2026-09-02"}, ("--at", "2026-09-02"))]

    async def script(s: Any) -> Any:
        schema = next(t for t in (await s.list_tools()).tools if t.name == "owed").output_schema
        results = [await ok(s, "owed", **arguments) for arguments, _ in calls]
        return schema, results, await failed(s, "owed", to="two words"), await failed(s, "owed", bogus=1)

    schema, results, bad_seat, bad_argument = serve(ws, script)
    for (arguments, argv), result in zip(calls, results):
        cli = json.loads(qem("owed", *argv, "--json").stdout)
        assert result.structured_content == cli, arguments
        assert json.loads(result.content[1].text) == result.structured_content
        assert result.content[0].text == qem("owed", *argv).stdout.rstrip("\n")
        jsonschema.validate(result.structured_content, schema)
    first = results[0].structured_content
    assert first["scope"]["complete"] is True and [o["short"] for o in first["owed"]][0] == late
    assert first["owed"][0]["late"] is True and first["owed"][0]["answered"] == "no"
    assert [o["short"] for o in results[2].structured_content["owed"]] == [late]
    assert "--to 'two words'" in bad_seat and "bogus" in bad_argument


def test_load_keeps_requests_and_refuses_a_bad_one(qem, ws: Path, tmp_path: Path) -> None:
    request = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05").stdout.strip()
    qem("answer", request, "Sent")
    dump = qem("dump").stdout
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "log.jsonl").write_text(dump, "utf-8")
    qem("load", str(tmp_path / "log.jsonl"), "-w", str(other))
    qem("export")
    assert qem("export", "--stdout", "-w", str(other)).stdout == (ws / "MEMORY.md").read_text("utf-8")
    assert "to alice · due 2026-09-05" in (ws / "MEMORY.md").read_text("utf-8")
    rows = [json.loads(line) for line in dump.splitlines()]
    for row in rows:
        if row.get("data", {}).get("to") == "alice":
            row["data"]["to"] = "two words"
    bad = "\n".join(json.dumps(r) for r in rows) + "\n"
    (tmp_path / "bad.jsonl").write_text(bad, "utf-8")
    third = tmp_path / "third"
    third.mkdir()
    done = qem("load", str(tmp_path / "bad.jsonl"), "-w", str(third))
    assert done.returncode == 2 and "seat" in done.stderr and "Traceback" not in done.stderr
    assert not (store_path(third) / "events").exists() or not any((store_path(third) / "events").iterdir())


def test_an_answer_arrives_from_another_clone_and_a_bad_request_file_is_set_aside(team) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Send the report", "-k", "task", "--to", "mate", "--due", "2026-09-05").stdout.strip()
    founder.qem("export")
    founder.publish("a request")
    mate = team.clone("mate")
    answer = mate.qem("answer", request, "Sent it", "-k", "finding").stdout.strip()
    mate.qem("export")
    mate.publish("the answer")
    assert "answered: no (owed by mate" in founder.qem("status", request).stdout
    assert founder.qem("owed", "--to", "mate").stdout.splitlines()[1] == "1 owed (--to mate), 1 late"
    founder.git("pull", "-q", "--no-rebase", "origin", "main")
    assert f"answered: yes (answered by #{answer} (mate" in founder.qem("status", request).stdout
    assert founder.qem("owed", "--to", "mate").stdout.splitlines()[1] == "0 owed (--to mate), 0 late"
    shown = founder.qem("show", answer).stdout
    assert f"answers #{request}" in shown
    assert f"answers #{request} · Sent it" in founder.memory_md().decode()
    # a hand-written request whose seat is no seat is set aside on read, as a write refuses it
    planted_created(founder.path / ".qem", "Owed by two words", "task", to="two words")
    planted_created(founder.path / ".qem", "Due whenever", "task", due="whenever")
    planted_created(founder.path / ".qem", "Answers nothing", "task", answers="not-an-id")
    listing = founder.qem("list").stdout
    assert "Owed by two words" not in listing and "Due whenever" not in listing and "Answers nothing" not in listing
    verify = founder.qem("verify", code=None)
    assert verify.returncode != 0
    said = verify.stdout + verify.stderr
    assert "seat" in said and "due 'whenever'" in said and "answers 'not-an-id'" in said
    fresh = team.clone("fresh")
    assert f"answers #{request} · Sent it" in fresh.memory_md().decode()
    fresh.qem("export", "--check")


# -- answered? -------------------------------------------------------------------------------------


def test_status_says_whether_a_request_is_answered_yes_no_unknown_or_not_owed(qem, ws: Path) -> None:
    later = {"QEM_NOW": "2026-09-07T12:00:00Z"}
    request = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05").stdout.strip()
    other = qem("add", "Review the plan", "-k", "task", "--to", "bob").stdout.strip()
    said = qem("status", request, env=later).stdout.splitlines()
    assert said[1] == f"#{request} answered: no (owed by alice, due 2026-09-05T23:59:59Z, late by 1d 12h)"
    first = qem("answer", request, "Sent", env={"QEM_ACTOR": "alice"}).stdout.strip()
    said = qem("status", request, "--json").stdout
    data = json.loads(said)["answered"]
    assert data["answered"] == "yes" and data["by"][0]["short"] == first and data["by"][0]["actor"] == "alice"
    assert f"#{first} answers #{request}, which is answered: yes" in qem("status", first).stdout
    second = qem("answer", request, "Not sent yet").stdout.strip()
    said = qem("status", request).stdout
    assert "answered: unknown (two answers in force may disagree" in said and f"#{second}" in said
    qem("revoke", second, "-m", "wrong")
    assert "answered: yes" in qem("status", request).stdout
    qem("revoke", request, "-m", "not needed")
    assert "answered: not owed (not owed: revoked" in qem("status", request).stdout
    # a log read in part: the unanswered request's answer may be in the file set aside
    (store_path(ws) / "events" / ("x" * 26)).write_text("{not json", "utf-8")
    said = qem("status", other).stdout
    assert "answered: unknown (no answer in the log read, which is incomplete (1 log file set aside" in said
    assert "owed by bob" in said
    # a note that is neither a request nor an answer has no second line
    plain = qem("add", "A finding", "-k", "finding").stdout.strip()
    assert len(qem("status", plain).stdout.splitlines()) == 1


# -- qem owed, and the same filters in qem query ----------------------------------------------------


def test_owed_lists_what_is_owed_by_whom_and_how_late_after_its_scope(qem, ws: Path) -> None:
    at, early = {"QEM_NOW": "2026-09-07T12:00:00Z"}, {"QEM_NOW": "2026-08-30T08:00:00Z"}
    report = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05", env=early).stdout.strip()
    review = qem("add", "Review the plan", "-k", "task", "--to", "bob", "--due", "2026-09-20", env=early).stdout.strip()
    keys = qem("add", "Hand over the keys", "-k", "task", "--to", "alice", env=early).stdout.strip()
    done = qem("add", "Rotate the token", "-k", "task", "--to", "bob", "--due", "2026-09-01", env=early).stdout.strip()
    qem("answer", done, "Rotated", env=at)
    lines = qem("owed", env=at).stdout.splitlines()
    assert lines[0].startswith("scope: ") and "late as of 2026-09-07T12:00:00Z" in lines[0]
    assert lines[0].endswith("4 requests in force of 5 notes read; complete")
    assert lines[1] == "3 owed, 1 late"
    assert lines[2] == f"#{report} task · LATE 1d 12h · owed by alice, due 2026-09-05T23:59:59Z · Send the report"
    assert [line.split()[0] for line in lines[3:]] == [f"#{review}", f"#{keys}"]  # by deadline, none last
    assert [line.split()[0] for line in qem("owed", "--to", "alice", env=at).stdout.splitlines()[2:]] == \
        [f"#{report}", f"#{keys}"]
    assert qem("owed", "--late", env=at).stdout.splitlines()[2:] == [lines[2]]
    data = json.loads(qem("owed", "--json", "--to", "bob", env=at).stdout)
    assert data["scope"]["complete"] is True and data["count"] == 1
    assert (data["owed"][0]["short"], data["owed"][0]["to"], data["owed"][0]["late"]) == (review, "bob", False)
    empty = qem("owed", "--to", "carol", env=at).stdout.splitlines()
    assert empty[1] == "0 owed (--to carol), 0 late" and "not proof that nothing is owed" in empty[2]
    # as of a date: what was owed then, late as of then
    before = qem("owed", "--at", "2026-09-06").stdout.splitlines()
    assert "late as of 2026-09-06T23:59:59Z" in before[0] and before[1] == "4 owed (--at 2026-09-06), 2 late"
    bad = qem("owed", "--at", "yesterday")
    assert bad.returncode == 2 and "yesterday" in bad.stderr and "Traceback" not in bad.stderr
    # the same questions in qem query
    found = qem("query", "answered=no", "to=alice", "due<2026-09-06", env=at).stdout.splitlines()
    assert found[1] == "1 notes match answered=no to=alice due<2026-09-06" and found[2].startswith(f"#{report}\t")
    assert f"#{done}\t" in qem("query", "answered=yes").stdout
    assert qem("query", "answered=maybe").returncode == 2
    assert "write due<DATE" in qem("query", "due=2026-09-06").stderr


def test_owed_at_a_revision_reads_the_log_committed_there(team) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Send the report", "-k", "task", "--to", "mate").stdout.strip()
    founder.qem("export")
    asked = founder.publish("a request")
    founder.qem("answer", request, "Sent")
    founder.qem("export")
    founder.publish("answered")
    assert founder.qem("owed").stdout.splitlines()[1] == "0 owed, 0 late"
    then = founder.qem("owed", "--at", asked[:12]).stdout.splitlines()
    assert f"as at {asked[:12]}" in then[0] and then[1] == "1 owed (--at " + asked[:12] + "), 0 late"
    assert then[2].startswith(f"#{request} task · owed by mate")


def test_owed_at_a_revision_counts_the_files_set_aside_there_as_the_live_read_does(team) -> None:  # noqa: F811
    from test_hostile_clone import plant_event

    founder = team.founded("the build needs python 3.11")
    request = founder.qem("add", "Send the report", "-k", "task", "--to", "mate").stdout.strip()
    founder.qem("export")
    founder.publish("a request")
    other = founder.add("the tests need a display")
    memory = founder.path / ".qem"
    [request_id, other_id] = [n["id"] for s in (request, other) for n in founder.notes() if n["short"] == s]
    other_event = next(e.name for e in (memory / "events").iterdir() if e.name.startswith(other_id[:20]))
    crossing = plant_event(memory, type="stale_flagged", note=request_id, prev=[other_event])
    (memory / "events" / ("0" * 26)).write_bytes(b"not an event")  # its name is not its hash
    live = founder.qem("owed").stdout.splitlines()
    assert live[0].endswith("; incomplete: 2 log files set aside (`qem verify` names them)"), live[0]
    assert f"#{request} task · UNKNOWN: no answer in the log read, which is incomplete" in live[2]
    bad = founder.commit("two files a reader sets aside")
    for name in (crossing, "events/" + "0" * 26):
        founder.git("rm", "-q", f".qem/{name}")
    founder.commit("set aside no more")
    assert founder.qem("owed").stdout.splitlines()[0].endswith("; complete")
    then = founder.qem("owed", "--at", bad[:12]).stdout.splitlines()
    assert f"as at {bad[:12]}" in then[0] and f"incomplete: 2 log files set aside as at {bad[:12]} (" in then[0]
    assert f"{crossing}: event {crossing[7:]} follows an event of another note" in then[0]
    assert f"events/{'0' * 26}" in then[0]
    assert f"#{request} task · UNKNOWN: no answer in the log read, which is incomplete" in then[2]
    data = json.loads(founder.qem("owed", "--at", bad[:12], "--json").stdout)
    assert data["scope"]["complete"] is False and len(data["scope"]["incomplete_because"]) == 1
    assert founder.qem("owed", "--at", "HEAD").stdout.splitlines()[0].endswith("; complete")


# -- for people and reviewers ------------------------------------------------------------------------


def test_diff_names_new_requests_answers_and_what_became_late_in_the_range(team, monkeypatch) -> None:  # noqa: F811
    founder = team.founded("the build needs python 3.11")
    monkeypatch.setenv("QEM_NOW", "2026-08-30T08:00:00Z")
    answered_one = founder.qem("add", "Send the report", "-k", "task", "--to", "mate", "--due", "2026-09-03").stdout.strip()
    late_one = founder.qem("add", "Rotate the token", "-k", "task", "--to", "mate", "--due", "2026-09-05").stdout.strip()
    founder.qem("export")
    team.git_env["GIT_COMMITTER_DATE"] = "2026-09-01T00:00:00Z"
    first = founder.commit("two requests")
    monkeypatch.setenv("QEM_NOW", "2026-09-02T08:00:00Z")
    answer = founder.qem("answer", answered_one, "Sent").stdout.strip()
    new = founder.qem("add", "Review the plan", "-k", "task", "--to", "bob", "--due", "2026-09-20").stdout.strip()
    founder.qem("export")
    team.git_env["GIT_COMMITTER_DATE"] = "2026-09-10T00:00:00Z"
    second = founder.commit("an answer and a request")
    said = founder.qem("diff", first[:12], second[:12], code=1).stdout
    section = said[said.index("what is owed (3)"):].splitlines()
    assert section[1] == f"  answer #{answer} (finding): answers #{answered_one} · Sent"
    assert section[2] == f"  new request #{new} (task): owed by bob, due 2026-09-20T23:59:59Z · Review the plan"
    assert section[3] == (f"  became late #{late_one} (task): owed by mate, due 2026-09-05T23:59:59Z, late by 4d 1s"
                          " · Rotate the token")
    assert f"became late #{answered_one}" not in said  # its deadline fell in the range, but it was answered
    data = json.loads(founder.qem("diff", first[:12], second[:12], "--format", "json", code=1).stdout)
    assert [(d["what"], d["short"]) for d in data["owed"]] == [
        ("answer", answer), ("new request", new), ("became late", late_one)]
    assert f"#### What is owed (3)" in founder.qem("diff", first[:12], second[:12], "--format", "markdown", code=1).stdout


def test_verify_lists_what_is_late_and_fails_on_it_when_asked(qem, ws: Path) -> None:
    at = {"QEM_NOW": "2026-09-07T12:00:00Z"}
    late = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05",
               env={"QEM_NOW": "2026-08-30T00:00:00Z"}).stdout.strip()
    qem("add", "Review the plan", "-k", "task", "--to", "bob", "--due", "2026-09-20", env={"QEM_NOW": "2026-08-30T00:00:00Z"})
    qem("export")
    listed = qem("verify", env=at)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"late: #{late} task · LATE 1d 12h · owed by alice" in listed.stdout and "1 request(s) late" in listed.stderr
    assert json.loads(qem("verify", "--json", env=at).stdout)["late"][0].startswith(f"late: #{late}")
    failed = qem("verify", "--fail-on-late", env=at)
    assert failed.returncode == 1 and f"late: #{late}" in failed.stdout
    qem("answer", late, "Sent", env=at)
    qem("export", env=at)
    assert qem("verify", "--fail-on-late", env=at).returncode == 0


def test_a_seat_holding_a_credential_is_refused_as_every_string_field_is(qem, ws: Path) -> None:
    qem("add", "first", "-k", "task")
    before = _log_files(ws)
    done = qem("add", "Send it", "-k", "task", "--to", "AKIAIOSFODNN7EXAMPLE")
    assert done.returncode == 2 and "data.to holds a secret" in done.stderr and "AKIAIOSFODNN7EXAMPLE" not in done.stderr
    assert _log_files(ws) == before


@pytest.mark.parametrize("seat, said", [
    ("", "--to '': a seat (to) must be a non-empty name"),
    ("two words", "--to 'two words': a seat (to) is one word"),
    ("a·b", "--to 'a·b': a seat (to) is one word"),
])
def test_owed_refuses_a_seat_no_request_can_name(qem, ws: Path, seat: str, said: str) -> None:
    # `qem owed --to "$NAME"` with NAME unset must not answer "0 owed": nothing owed by anyone
    qem("add", "Send the report", "-k", "task", "--to", "alice")
    done = qem("owed", "--to", seat)
    assert done.returncode == 2 and said in done.stderr and done.stdout == "", done.stdout + done.stderr
    assert "Traceback" not in done.stderr


# -- what a write refuses, and what it says ------------------------------------------------------------


LATER = {"QEM_NOW": "2026-09-07T12:00:00Z"}


def _event_files(ws: Path) -> list[str]:
    return sorted(p.name for p in (store_path(ws) / "events").iterdir())


def _asked_in(qem, ws: Path, line: str):  # type: ignore[no-untyped-def]
    """A new item added to MEMORY.md under Tasks and checked in."""
    qem("export", env=LATER)
    md = (ws / "MEMORY.md").read_text("utf-8").replace("## Tasks\n", f"## Tasks\n\n{line}\n", 1)
    (ws / "MEMORY.md").write_text(md, "utf-8")
    return qem("checkin", "--yes", "-m", "asked", env=LATER)


def test_a_deadline_already_past_is_recorded_and_said_late_on_every_way_in(qem, ws: Path, tmp_path: Path, monkeypatch) -> None:
    added = qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2026-09-05", env=LATER)
    assert added.returncode == 0
    short = added.stdout.strip()
    assert f"qem: note #{short} is late already: due 2026-09-05T23:59:59Z, 1d 12h before it was recorded" in added.stderr
    assert qem("owed", "--late", env=LATER).stdout.splitlines()[2].startswith(f"#{short} task · LATE 1d 12h")
    on_time = qem("add", "Review the plan", "-k", "task", "--due", "2026-09-30", env=LATER)
    assert on_time.returncode == 0 and "late already" not in on_time.stderr
    done = _asked_in(qem, ws, "- to bob · due 2026-09-01 · Pay the invoice")
    assert done.returncode == 0 and "is late already: due 2026-09-01T23:59:59Z, 5d 12h before" in done.stderr

    async def script(s: Any) -> Any:
        return (await ok(s, "add", text="Rotate the token", kind="task", due="2026-09-06")).content[0].text

    monkeypatch.setenv("QEM_NOW", LATER["QEM_NOW"])  # (the server is started with it)
    said = serve(ws, script)
    assert "is late already: due 2026-09-06T23:59:59Z, 12h 1s before it was recorded" in said
    # a load restores what was written, a past deadline too
    (tmp_path / "dump.jsonl").write_text(qem("dump").stdout, "utf-8")
    other = tmp_path / "other"
    other.mkdir()
    assert qem("load", str(tmp_path / "dump.jsonl"), "-w", str(other), env=LATER).returncode == 0
    assert qem("owed", "--late", "-w", str(other), env=LATER).stdout.splitlines()[1] == "3 owed (--late), 3 late"


def test_a_deadline_after_the_note_s_end_is_refused_on_every_way_in_and_nothing_is_written(qem, ws: Path, monkeypatch) -> None:
    qem("add", "the build needs python 3.11", "-k", "finding", env=LATER)
    before = _event_files(ws)
    said = "the new note is due 2026-10-01T23:59:59Z but ends (expires) 2026-09-20T00:00:00Z, before its deadline"
    refused = qem("add", "Pay", "-k", "task", "--due", "2026-10-01", "--expires", "2026-09-20", env=LATER)
    assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr
    done = _asked_in(qem, ws, "- expires 2026-09-20 · due 2026-10-01 · Pay")
    assert done.returncode == 2 and f"line 7: {said}" in done.stderr  # the plan names the line

    async def script(s: Any) -> Any:
        return await failed(s, "add", text="Pay", kind="task", due="2026-10-01", expires="2026-09-20")

    monkeypatch.setenv("QEM_NOW", LATER["QEM_NOW"])
    assert said in serve(ws, script)
    assert _event_files(ws) == before
    # an end by the kind's default counts the same; `--expires none` (or a later end) takes it
    config = store_path(ws) / "config.toml"
    config.write_text(config.read_text("utf-8") + '\n[expiry]\ntask = "1w"\n', "utf-8")
    by_default = qem("add", "Pay", "-k", "task", "--due", "2026-10-01", env=LATER)
    assert by_default.returncode == 2 and "ends (expires) 2026-09-14T12:00:00Z, before its deadline" in by_default.stderr
    assert _event_files(ws) == before
    assert qem("add", "Pay", "-k", "task", "--due", "2026-10-01", "--expires", "none", env=LATER).returncode == 0
    assert qem("add", "Pay", "-k", "task", "--due", "2026-10-01", "--expires", "2026-10-02", env=LATER).returncode == 0


def test_an_answer_to_a_note_that_is_no_request_is_refused_on_every_way_in_naming_it(qem, ws: Path, monkeypatch) -> None:
    finding = qem("add", "the build needs python 3.11", "-k", "finding", env=LATER).stdout.strip()
    request = qem("add", "Send the report", "-k", "task", "--to", "alice", env=LATER).stdout.strip()
    answer = qem("answer", request, "Sent", env=LATER).stdout.strip()
    before = _event_files(ws)
    said = f"cannot answer note #{finding}: it is not a request (it names no `to` or `due`)"
    for argv in (("answer", finding, "Agreed"), ("add", "Agreed", "-k", "finding", "--answers", finding),
                 ("answer", answer, "An answer to an answer")):
        refused = qem(*argv, env=LATER)
        assert refused.returncode == 2 and "it is not a request" in refused.stderr, argv
        assert "Traceback" not in refused.stderr
    assert said in qem("answer", finding, "Agreed", env=LATER).stderr
    done = _asked_in(qem, ws, f"- answers #{finding} · Agreed")
    assert done.returncode == 2 and f"line 7: {said}" in done.stderr  # the plan names the line

    async def script(s: Any) -> Any:
        return await failed(s, "add", text="Agreed", kind="finding", answers=finding)

    monkeypatch.setenv("QEM_NOW", LATER["QEM_NOW"])
    assert said in serve(ws, script)
    assert _event_files(ws) == before
    # a successor of an answer keeps its pointer, judged when it was written
    assert qem("supersede", answer, "Sent, with the appendix", env=LATER).returncode == 0


def test_what_a_write_refuses_is_read_as_written_from_a_clone_s_files_and_a_load(qem, ws: Path, tmp_path: Path) -> None:
    """The rules above are the writer's: a log file that broke them (an older qem, a peer)
    is read, not set aside, and a dump of that memory loads."""
    finding = qem("add", "the build needs python 3.11", "-k", "finding", env=LATER).stdout.strip()
    with Store.open(store_path(ws)) as store:
        full = store.resolve(finding)
    planted_created(store_path(ws), "Agreed, from an older qem", "finding", answers=full)
    planted_created(store_path(ws), "Pay before the end", "task", due="2026-10-01T23:59:59Z",
                    expires="2026-09-20T00:00:00Z")
    listing = qem("list", env=LATER).stdout
    assert "Agreed, from an older qem" in listing and "Pay before the end" in listing
    assert qem("verify", env=LATER).returncode == 0
    (tmp_path / "dump.jsonl").write_text(qem("dump").stdout, "utf-8")
    other = tmp_path / "other"
    other.mkdir()
    loaded = qem("load", str(tmp_path / "dump.jsonl"), "-w", str(other), env=LATER)
    assert loaded.returncode == 0, loaded.stderr
    assert "Agreed, from an older qem" in qem("list", "-w", str(other), env=LATER).stdout


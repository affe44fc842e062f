"""A note's end, run as a user runs qem: `--expires`/`--ttl` on add and supersede (and the
MCP tools), per-kind defaults in config.toml, the `expires` marker through export and a
check-in of MEMORY.md in a real git repository, `qem expire --due` on a clock pinned with
QEM_NOW, `qem context` marking a note past its end, and a clone's malformed end set aside.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from builders import planted_created
from conftest import run_qem
from test_cli import refused, snapshot, verified
from test_git import Team, team  # noqa: F401  (the fixture)
from test_hostile_clone import pulled

from qem_edit.storage.logtree import LogTree

NOW = "2026-12-01T10:00:00Z"


def q(ws: Path, *args: str, now: str = NOW, code: int = 0) -> subprocess.CompletedProcess:
    done = run_qem(*args, cwd=ws, env={"QEM_NOW": now})
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done


def note(ws: Path, short: str) -> dict[str, Any]:
    return json.loads(q(ws, "show", short, "--json").stdout)


def created_data(ws: Path, short: str) -> dict[str, Any]:
    """The data of the note's created event, as the log holds it."""
    [created] = [e for e in json.loads(q(ws, "log", short, "--json").stdout) if e["type"] == "created"]
    return created["data"]


def item_line(ws: Path, short: str) -> str:
    return next(line for line in (ws / "MEMORY.md").read_text("utf-8").splitlines() if line.startswith(f"- [#{short}]"))


# -- writing an end --------------------------------------------------------------------------------


def test_add_takes_a_ttl_or_a_date_and_the_event_records_the_end(ws: Path) -> None:
    """A ttl is fixed from the event's own time; a date is its start, UTC; a full UTC time
    is taken as given.  show, list --json and MEMORY.md carry it."""
    ttl = q(ws, "add", "Staging is frozen", "-k", "operational", "--ttl", "30d").stdout.strip()
    hours = q(ws, "add", "The deploy window is open", "-k", "operational", "--ttl", "12h").stdout.strip()
    dated = q(ws, "add", "The audit runs this month", "-k", "task", "--expires", "2026-12-31").stdout.strip()
    timed = q(ws, "add", "The mirror resyncs", "-k", "finding", "--expires", "2027-01-02T03:04:05Z").stdout.strip()
    plain = q(ws, "add", "The lock outlives a crash", "-k", "gotcha").stdout.strip()
    assert created_data(ws, ttl)["expires"] == "2026-12-31T10:00:00Z"
    assert created_data(ws, hours)["expires"] == "2026-12-01T22:00:00Z"
    assert created_data(ws, dated)["expires"] == "2026-12-31T00:00:00Z"
    assert created_data(ws, timed)["expires"] == "2027-01-02T03:04:05Z"
    assert "expires" not in created_data(ws, plain)  # a note without an end: its event's bytes as before
    assert note(ws, ttl)["expires"] == "2026-12-31T10:00:00Z" and note(ws, plain)["expires"] is None
    assert "expires 2027-01-02T03:04:05Z" in q(ws, "show", timed).stdout
    listed = {n["short"]: n["expires"] for n in json.loads(q(ws, "list", "--json").stdout)}
    assert listed[dated] == "2026-12-31T00:00:00Z" and listed[plain] is None
    q(ws, "export")
    assert item_line(ws, ttl) == f"- [#{ttl}] 2026-12-01 · medium · agent · expires 2026-12-31 · Staging is frozen"
    assert item_line(ws, plain) == f"- [#{plain}] 2026-12-01 · medium · agent · The lock outlives a crash"
    assert verified(ws) == []


def test_a_time_before_the_year_1000_is_written_with_four_digits(ws: Path) -> None:
    """strftime's `%Y` writes the year 1 as `1`: every time qem writes from a date is made
    by `times.stamp`, so an end or a due date of the year 1 is written as a reader takes it
    (else the log file is set aside in every clone, and `--expires` raised)."""
    from datetime import datetime, timezone

    from qem_edit.base.times import parse_time, stamp

    assert stamp(datetime(1, 2, 3, 4, 5, 6)) == "0001-02-03T04:05:06Z"
    assert stamp(datetime(999, 12, 31, tzinfo=timezone.utc)) == "0999-12-31T00:00:00Z"
    assert parse_time("0001-01-01", "--due", end=True) == "0001-01-01T23:59:59Z"
    due = q(ws, "add", "Answer the auditor", "-k", "task", "--to", "bob", "--due", "0001-01-01").stdout.strip()
    ended = q(ws, "add", "The old mirror", "-k", "finding", "--expires", "0999-12-31").stdout.strip()
    later = q(ws, "supersede", due, "Answer the auditor now", "-m", "sooner", "--expires", "0500-01-01T00:00:00Z").stdout.strip()
    assert created_data(ws, due)["due"] == "0001-01-01T23:59:59Z"
    assert created_data(ws, ended)["expires"] == "0999-12-31T00:00:00Z"
    assert created_data(ws, later)["expires"] == "0500-01-01T00:00:00Z"
    assert verified(ws) == []
    assert "late as of 0001-01-01T23:59:59Z" in q(ws, "owed", "--at", "0001-01-01").stdout
    for moment in ("9999-12-31T23:30:00-01:00", "0001-01-01T00:30:00+01:00"):  # (the year 10000 and 0, in UTC)
        done = q(ws, "add", "Past the calendar", "-k", "task", "--to", "bob", "--due", moment, code=2)
        assert "outside the years 1 to 9999" in done.stderr, done.stderr


def test_a_successor_keeps_the_old_end_unless_given_one(ws: Path) -> None:
    old = q(ws, "add", "Staging is frozen", "-k", "operational", "--expires", "2026-12-20").stdout.strip()
    kept = q(ws, "supersede", old, "Staging is frozen until the release", "-m", "clearer").stdout.strip()
    assert note(ws, kept)["expires"] == "2026-12-20T00:00:00Z"
    longer = q(ws, "supersede", kept, "Staging is frozen until the release", "--ttl", "2w", "-m", "longer",
               now="2026-12-05T08:00:00Z").stdout.strip()
    assert note(ws, longer)["expires"] == "2026-12-19T08:00:00Z"
    endless = q(ws, "supersede", longer, "Staging is frozen", "--expires", "none", "-m", "for good").stdout.strip()
    assert note(ws, endless)["expires"] is None and "expires" not in created_data(ws, endless)


def test_a_kind_has_a_default_ttl_in_config_and_a_bad_one_is_named(ws: Path) -> None:
    q(ws, "init")
    config = ws / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + '\n[expiry]\noperational = "30d"\ntask = "1w"\n', "utf-8")
    op = q(ws, "add", "Deploys pause", "-k", "operational").stdout.strip()
    task = q(ws, "add", "Rotate the token", "-k", "task").stdout.strip()
    finding = q(ws, "add", "Recall drops past 40", "-k", "finding").stdout.strip()
    given = q(ws, "add", "Deploys pause again", "-k", "operational", "--ttl", "1d").stdout.strip()
    none = q(ws, "add", "Deploys never pause", "-k", "operational", "--expires", "none").stdout.strip()
    assert note(ws, op)["expires"] == "2026-12-31T10:00:00Z"
    assert note(ws, task)["expires"] == "2026-12-08T10:00:00Z"
    assert note(ws, finding)["expires"] is None
    assert note(ws, given)["expires"] == "2026-12-02T10:00:00Z"
    assert note(ws, none)["expires"] is None
    before = sorted(LogTree(ws / ".qem").names())
    for bad, words in [('operational = "30 days"', ["config.toml", "[expiry] operational", "h, d, w"]),
                       ("operational = 30", ["config.toml", "[expiry] operational", "string"]),
                       ('someday = "3d"', ["config.toml", "[expiry] someday", "not a kind"])]:
        config.write_text(config.read_text("utf-8").split("[expiry]")[0] + f"[expiry]\n{bad}\n", "utf-8")
        refused(run_qem("add", "Deploys pause", "-k", "finding", cwd=ws, env={"QEM_NOW": NOW}), *words)
        assert sorted(LogTree(ws / ".qem").names()) == before


@pytest.mark.parametrize("args, words", [
    (["--ttl", "1d", "--expires", "2027-01-01"], ["--expires or --ttl, not both"]),
    (["--ttl", "3m"], ["--ttl '3m'", "units: h, d, w"]),
    (["--ttl", "0d"], ["--ttl '0d'"]),
    (["--ttl", "d"], ["--ttl 'd'"]),
    (["--expires", "2026-13-01"], ["--expires '2026-13-01'", "YYYY-MM-DD"]),
    (["--expires", "tomorrow"], ["--expires 'tomorrow'"]),
    (["--ttl", "999999w"], ["past the year 9999"]),
], ids=["both", "bad unit", "zero", "no number", "bad month", "words", "too far"])
def test_a_bad_end_is_refused_and_nothing_is_written(ws: Path, args: list[str], words: list[str]) -> None:
    old = q(ws, "add", "Staging is frozen", "-k", "operational").stdout.strip()
    before = snapshot(ws)
    refused(run_qem("add", "Deploys pause", "-k", "operational", *args, cwd=ws, env={"QEM_NOW": NOW}), *words)
    refused(run_qem("supersede", old, "Staging thaws", *args, cwd=ws, env={"QEM_NOW": NOW}), *words)
    assert snapshot(ws) == before


# -- the marker in MEMORY.md -----------------------------------------------------------------------


def git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True, text=True).stdout


def committed_memory(ws: Path) -> dict[str, str]:
    """A git repository whose committed MEMORY.md shows notes with and without an end."""
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.email", "t@example.com")
    git(ws, "config", "user.name", "T")
    made = {"ttl": q(ws, "add", "Staging is frozen", "-k", "operational", "--ttl", "30d").stdout.strip(),
            "dated": q(ws, "add", "The audit runs this month", "-k", "task", "--expires", "2026-12-31").stdout.strip(),
            "plain": q(ws, "add", "The lock outlives a crash", "-k", "gotcha").stdout.strip()}
    q(ws, "export")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "memory")
    return made


def checked_in(ws: Path, edit: dict[str, str]) -> list[dict[str, Any]]:
    """MEMORY.md with each item line `old` replaced by `new`, checked in; the plan's ops."""
    mirror = ws / "MEMORY.md"
    text = mirror.read_text("utf-8")
    for old, new in edit.items():
        assert old in text, old
        text = text.replace(old, new)
    mirror.write_text(text, "utf-8")
    done = q(ws, "checkin", "--path", "MEMORY.md", "-m", "ends", "--yes", "--json", now="2026-12-02T09:00:00Z")
    return json.loads(done.stdout)["operations"]


def test_an_unchanged_export_checks_in_nothing_and_the_marker_reads_back(ws: Path) -> None:
    made = committed_memory(ws)
    done = q(ws, "checkin", "--path", "MEMORY.md", "--dry-run", "--json")
    assert json.loads(done.stdout)["operations"] == []
    q(ws, "export", "--check")
    assert "expires 2026-12-31 · Staging is frozen" in item_line(ws, made["ttl"])


def test_changing_the_date_in_an_edit_supersedes_the_note_with_the_new_end(ws: Path) -> None:
    made = committed_memory(ws)
    ops = checked_in(ws, {"expires 2026-12-31 · The audit": "expires 2027-02-15 · The audit"})
    assert [(o["action"], o["expires"]) for o in ops] == [("supersede", "2027-02-15T00:00:00Z")]
    old = note(ws, made["dated"])
    assert old["state"] == "superseded"
    new = note(ws, old["superseded_by"])
    assert (new["text"], new["expires"]) == ("The audit runs this month", "2027-02-15T00:00:00Z")
    q(ws, "export", "--check")
    assert item_line(ws, new["short"]).endswith(f"supersedes #{made['dated']} · expires 2027-02-15 · The audit runs this month")
    assert verified(ws) == []


def test_removing_or_adding_the_marker_supersedes_and_a_text_change_keeps_the_end_to_the_second(ws: Path) -> None:
    made = committed_memory(ws)
    ops = checked_in(ws, {
        "expires 2026-12-31 · The audit runs": "The audit runs",
        "agent · The lock outlives a crash": "agent · expires 2027-01-09 · The lock outlives a crash",
        "expires 2026-12-31 · Staging is frozen": "expires 2026-12-31 · Staging is frozen solid",
    })
    assert sorted(o["action"] for o in ops) == ["supersede"] * 3
    ends = {note(ws, short)["text"]: note(ws, note(ws, short)["superseded_by"])["expires"] for short in made.values()}
    assert ends == {"The audit runs this month": None,
                    "The lock outlives a crash": "2027-01-09T00:00:00Z",
                    "Staging is frozen": "2026-12-31T10:00:00Z"}  # the date unchanged: the ttl's end, to the second
    q(ws, "export", "--check")


def test_a_new_item_in_an_edit_takes_its_marker_or_its_kinds_default(ws: Path) -> None:
    committed_memory(ws)
    config = ws / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + '\n[expiry]\noperational = "2w"\n', "utf-8")
    ops = checked_in(ws, {"## Operational\n": "## Operational\n\n- Deploys pause\n- expires 2027-03-03 · Deploys resume\n"})
    assert [(o["action"], o["expires"]) for o in ops] == [("create", None), ("create", "2027-03-03T00:00:00Z")]
    ends = {n["text"]: n["expires"] for n in json.loads(q(ws, "list", "--json").stdout)}
    assert ends["Deploys pause"] == "2026-12-16T09:00:00Z"  # the check-in's time, plus the kind's 2w
    assert ends["Deploys resume"] == "2027-03-03T00:00:00Z"


def test_two_expires_markers_on_one_item_are_refused(ws: Path) -> None:
    made = committed_memory(ws)
    mirror = ws / "MEMORY.md"
    before = snapshot(ws)
    mirror.write_text(mirror.read_text("utf-8").replace("expires 2026-12-31 · The audit",
                                                        "expires 2026-12-31 · expires 2027-01-01 · The audit"), "utf-8")
    done = run_qem("checkin", "--path", "MEMORY.md", "-m", "x", "--yes", cwd=ws, env={"QEM_NOW": NOW})
    assert done.returncode == 2 and f"note #{made['dated']} has two `expires` markers" in done.stderr, done.stderr
    assert snapshot(ws) == before


# -- the sweep and the context ---------------------------------------------------------------------


def swept_memory(ws: Path) -> dict[str, str]:
    return {
        "soon": q(ws, "add", "The deploy window is open", "-k", "operational", "--ttl", "12h").stdout.strip(),
        "week": q(ws, "add", "Staging is frozen", "-k", "operational", "--ttl", "1w").stdout.strip(),
        "stale": q(ws, "add", "The mirror resyncs nightly", "-k", "finding", "--expires", "2026-12-03").stdout.strip(),
        "later": q(ws, "add", "The audit runs in January", "-k", "task", "--expires", "2027-01-31").stdout.strip(),
        "plain": q(ws, "add", "The lock outlives a crash", "-k", "gotcha").stdout.strip(),
    }


def test_expire_due_expires_exactly_the_notes_past_their_end_in_one_checkin(ws: Path) -> None:
    made = swept_memory(ws)
    q(ws, "flag-stale", made["stale"], "-m", "moved")  # stale is still in force: it is swept too
    before = snapshot(ws)
    done = q(ws, "expire", "--due", now="2026-12-01T21:59:59Z")
    assert "no note in force is past its end at 2026-12-01T21:59:59Z; nothing expired" in done.stdout
    assert snapshot(ws) == before  # nothing due, nothing written
    at = "2026-12-05T00:00:00Z"
    done = q(ws, "expire", "--due", "--json", now=at)
    swept = json.loads(done.stdout)
    assert sorted(n["short"] for n in swept["expired"]) == sorted([made["soon"], made["stale"]])
    assert swept["now"] == at and swept["checkin"].startswith("ci-")
    states = {n["short"]: n["state"] for n in json.loads(q(ws, "list", "--json").stdout)}
    assert states == {made["soon"]: "expired", made["stale"]: "expired", made["week"]: "active",
                      made["later"]: "active", made["plain"]: "active"}
    events = [e for e in json.loads(q(ws, "log", "--json").stdout) if e["type"] == "expired"]
    assert len(events) == 2 and {e["checkin"] for e in events} == {swept["checkin"]}
    assert {e["at"] for e in events} == {at} and {e["reason"] for e in events} == {"past its end"}
    again = q(ws, "expire", "--due", now=at)
    assert "nothing expired" in again.stdout
    assert len([e for e in json.loads(q(ws, "log", "--json").stdout) if e["type"] == "expired"]) == 2
    later = q(ws, "expire", "--due", now="2026-12-08T10:00:00Z")  # the week's end, to the second
    assert f"expired 1 note past their end" in later.stdout and f"#{made['week']} operational" in later.stdout
    assert verified(ws) == []


def test_expire_of_one_note_works_as_before_and_due_takes_no_id(ws: Path) -> None:
    made = swept_memory(ws)
    done = q(ws, "expire", made["plain"], "-m", "sprint over")
    assert done.stdout.startswith(f"#{made['plain']} expired (event ")
    before = snapshot(ws)
    refused(run_qem("expire", cwd=ws), "qem expire --due")
    refused(run_qem("expire", made["later"], "--due", cwd=ws), "--due")
    assert snapshot(ws) == before


def test_context_marks_a_note_past_its_end_until_the_sweep_expires_it(ws: Path) -> None:
    made = swept_memory(ws)
    at = "2026-12-05T00:00:00Z"
    text = q(ws, "context", now=at).stdout
    line = next(line for line in text.splitlines() if line.startswith(f"[#{made['soon']}]"))
    assert line.endswith("· PAST ITS END 2026-12-01T22:00:00Z"), line
    assert not next(line for line in text.splitlines() if line.startswith(f"[#{made['later']}]")).count("PAST ITS END")
    index = {e["short"]: e for e in json.loads(q(ws, "context", "--format", "json", now=at).stdout)["index"]}
    assert index[made["soon"]]["past_end"] is True and index[made["soon"]]["expires"] == "2026-12-01T22:00:00Z"
    assert index[made["later"]]["past_end"] is False and index[made["plain"]]["expires"] is None
    # reading expired nothing, and the rendering does not move with the clock
    q(ws, "export", now=at)
    mirror = (ws / "MEMORY.md").read_bytes()
    q(ws, "export", "--check", now="2027-06-01T00:00:00Z")
    assert note(ws, made["soon"])["state"] == "active"
    q(ws, "expire", "--due", now=at)
    after = q(ws, "context", now=at).stdout
    assert f"[#{made['soon']}]" not in after and "PAST ITS END" not in after.split(f"[#{made['week']}]")[0]
    q(ws, "export", "--check", code=1)  # the sweep's events are a change of the memory; reading was not
    q(ws, "export", now=at)
    assert (ws / "MEMORY.md").read_bytes() != mirror


# -- the MCP tools ---------------------------------------------------------------------------------


def test_the_mcp_add_and_supersede_tools_take_an_end(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp.client.session import ClientSession
    from test_mcp import failed, ok, serve

    monkeypatch.setenv("QEM_NOW", NOW)

    async def script(s: ClientSession) -> dict[str, Any]:
        tools = {t.name: t.input_schema for t in (await s.list_tools()).tools}
        added = (await ok(s, "add", text="Staging is frozen", kind="operational", ttl="30d")).structured_content
        sup = (await ok(s, "supersede", id=added["short"], text="Staging is frozen solid",
                        expires="2027-01-15")).structured_content
        before = snapshot(ws)
        errors = [await failed(s, "add", text="x", kind="task", ttl="3m"),
                  await failed(s, "add", text="x", kind="task", ttl="1d", expires="2027-01-01"),
                  await failed(s, "supersede", id=sup["short"], text="y", expires="2020-13-01"),
                  await failed(s, "add", text="x", kind="task", ttl=30)]
        assert snapshot(ws) == before
        return {"tools": tools, "added": added, "sup": sup, "errors": errors}

    out = serve(ws, script)
    for tool in ("add", "supersede"):
        props = out["tools"][tool]["properties"]
        assert props["expires"]["type"] == "string" and props["ttl"]["type"] == "string"
        assert "h, d or w" in props["ttl"]["description"] and "YYYY-MM-DD" in props["expires"]["description"]
    assert out["added"]["expires"] == "2026-12-31T10:00:00Z"
    assert out["sup"]["expires"] == "2027-01-15T00:00:00Z"
    assert "units: h, d, w" in out["errors"][0] and "not both" in out["errors"][1]
    assert "YYYY-MM-DD" in out["errors"][2] and "'ttl' must be a string" in out["errors"][3]


# -- untrusted: another clone's end ----------------------------------------------------------------


def plant_ended(memory: Path, end: object) -> str:
    """A created event with `expires` as given, and its text, written by hand."""
    return planted_created(memory, "Deploys pause for the audit", "operational", expires=end)


@pytest.mark.parametrize("end", ["2026-12-31", "soon", 1767225600, None, ["2026-12-31T00:00:00Z"]],
                         ids=["a date alone", "words", "a number", "null", "a list"])
def test_a_clones_malformed_end_is_set_aside_and_named_by_verify(team: Team, end: object) -> None:  # noqa: F811
    founder, name = pulled(team, lambda memory: plant_ended(memory, end))
    assert "Deploys pause for the audit" not in founder.texts().values()
    assert "Deploys pause" not in founder.memory_md().decode("utf-8")
    founder.qem("export")
    assert "Deploys pause" not in founder.memory_md().decode("utf-8")
    done = founder.qem("verify", code=1)
    assert f"{name}: created event: expires {end!r} is not a UTC time" in done.stdout, done.stdout
    team.monkeypatch.setenv("QEM_NOW", "2030-01-01T00:00:00Z")
    assert "nothing expired" in founder.qem("expire", "--due").stdout


def test_a_clones_well_formed_end_is_read_and_swept(team: Team) -> None:  # noqa: F811
    founder, name = pulled(team, lambda memory: plant_ended(memory, "2026-08-01T00:00:00Z"))
    shown = founder.texts_short("Deploys pause for the audit")
    founder.qem("export")
    assert f"[#{shown}] 2026-07-27 · high · agent · expires 2026-08-01 · Deploys pause" in founder.memory_md().decode()
    team.monkeypatch.setenv("QEM_NOW", "2026-08-02T00:00:00Z")
    assert f"#{shown} operational" in founder.qem("expire", "--due").stdout
    founder.qem("verify")

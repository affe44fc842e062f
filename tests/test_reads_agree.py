"""One answer from every read, run as users and agents run qem: a note past its end that
`qem expire --due` has not swept, and an open dispute, asked of `qem status`, `qem show`,
`qem query`, `qem list`, `qem context`, the hooks (Claude Code's input on stdin) and the MCP tools
(through the real client); each read must name both, and every read must say the same of
the same note (qem_edit.reads.standing decides it once).  Then `qem verify` lists one dispute
once; an end already past is accepted on every way in and the note expired in the same
write; and the index tier never cuts a line silently.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import code_repository, planted_created
from conftest import run_qem
from test_git import Team, team  # noqa: F401  (the fixture)
from test_hooks import claude
from test_hostile_clone import pulled
from test_mcp import ok, serve

from qem_edit.storage.logtree import LogTree

THEN = "2026-01-05T10:00:00Z"  # when the notes were written
NOW = "2026-02-01T00:00:00Z"  # when they are read: one note is past its end, not swept
END = "2026-01-07T00:00:00Z"

# What a read says of a note: whether it is past its end, and the notes it is in open dispute with.
Verdict = tuple[bool, frozenset[str]]


def q(top: Path, *args: str, now: str = NOW, code: int = 0) -> str:
    done = run_qem(*args, cwd=top, env={"QEM_NOW": now})
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.fixture
def memory(tmp_path: Path, monkeypatch) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A git repository whose memory holds four directives (every session's start gives
    them): one past its end, two in dispute, one plainly in force."""
    top = code_repository(tmp_path / "app", {"README.md": "# app\n"})
    made = {"top": top}
    made["ended"] = q(top, "add", "Freeze merges during the audit", "-k", "directive", "--expires", END,
                      now=THEN).strip()
    made["tabs"] = q(top, "add", "Indent with tabs", "-k", "directive", now=THEN).strip()
    made["spaces"] = q(top, "add", "Indent with four spaces", "-k", "directive", now=THEN).strip()
    made["plain"] = q(top, "add", "Run the tests inside .venv", "-k", "directive", now=THEN).strip()
    made["dispute"] = q(top, "dispute", made["tabs"], made["spaces"], "-m", "they disagree", now=THEN).strip()
    monkeypatch.setenv("QEM_NOW", NOW)  # the hooks and the MCP server read the clock as a child process
    return made


EXPECTED = {"ended": (True, frozenset()), "tabs": (False, frozenset({"spaces"})),
            "spaces": (False, frozenset({"tabs"})), "plain": (False, frozenset())}


def _disputes(text: str, memory: dict[str, Any]) -> frozenset[str]:
    """The notes a piece of a read names this note in open dispute with (by name in `memory`),
    each named with the dispute's id and its other side's short id."""
    named = re.findall(r"DISPUTED with #(\w+) \(dispute (\w+)\)", text)
    assert all(memory["dispute"].startswith(d) for _, d in named), (named, memory["dispute"])
    by_short = {memory[k]: k for k in EXPECTED}
    return frozenset(by_short[short] for short, _ in named)


def _line(text: str, short: str) -> str:
    [line] = [line for line in text.splitlines() if f"[#{short}]" in line or line.startswith(f"#{short}\t")]
    return line


# -- each read, on its own --------------------------------------------------------------------------


def read_status(memory: dict[str, Any]) -> dict[str, Verdict]:
    out = {}
    for name in EXPECTED:
        short = memory[name]
        text = q(memory["top"], "status", short)
        data = json.loads(q(memory["top"], "status", short, "--json"))
        past = text.startswith(f"#{short} current: no (PAST ITS END {END}: not in force")
        assert past == (data["current"] == "no") == data["past_end"], (text, data)
        assert _disputes(text, memory) == {w for d in data["open_disputes"] for w in _sides(d["with"], memory)}
        out[name] = (past, _disputes(text, memory))
    return out


def _sides(shorts: list[str], memory: dict[str, Any]) -> set[str]:
    by_short = {memory[k]: k for k in EXPECTED}
    return {by_short[s] for s in shorts}


def read_show(memory: dict[str, Any]) -> dict[str, Verdict]:
    out = {}
    for name in EXPECTED:
        text = q(memory["top"], "show", memory[name])
        data = json.loads(q(memory["top"], "show", memory[name], "--json"))
        past = f"PAST ITS END {END}: not in force" in text
        if past:  # never its end in the future tense once it is past
            assert "expires it then" not in text and data["state"] == "active", text
        assert past == data["past_end"]
        assert _disputes(text, memory) == {w for d in data["open_disputes"] for w in _sides(d["with"], memory)}
        out[name] = (past, _disputes(text, memory))
    return out


def read_query(memory: dict[str, Any]) -> dict[str, Verdict]:
    top = memory["top"]
    current = q(top, "query", "current=yes")
    disputed = q(top, "query", "disputed=yes")
    listed = q(top, "query", "kind=directive")
    out = {}
    for name in EXPECTED:
        short = memory[name]
        line = _line(listed, short)
        past = f"#{short}\t" not in current and "current=no" in line and f"PAST ITS END {END}" in line
        assert (f"#{short}\t" in disputed) == bool(_disputes(line, memory)), (disputed, line)
        out[name] = (past, _disputes(line, memory))
    return out


def read_list(memory: dict[str, Any]) -> dict[str, Verdict]:
    text = q(memory["top"], "list")
    rows = {r["short"]: r for r in json.loads(q(memory["top"], "list", "--json"))}
    out = {}
    for name in EXPECTED:
        short = memory[name]
        line = _line(text, short)
        past = line.endswith(f"· PAST ITS END {END}")
        assert past == rows[short]["past_end"] and bool(rows[short]["open_disputes"]) == bool(_disputes(line, memory))
        out[name] = (past, _disputes(line, memory))
    return out


def read_context(memory: dict[str, Any]) -> dict[str, Verdict]:
    text = q(memory["top"], "context")
    entries = {e["short"]: e for e in json.loads(q(memory["top"], "context", "--format", "json"))["directives"]}
    out = {}
    for name in EXPECTED:
        short = memory[name]
        line = _line(text, short)
        past = line.endswith(f"· PAST ITS END {END}")
        assert past == entries[short]["past_end"] and entries[short]["disputed"] == bool(_disputes(line, memory))
        out[name] = (past, _disputes(line, memory))
    return out


def read_hook(memory: dict[str, Any]) -> dict[str, Verdict]:
    """Claude Code's SessionStart hook, its input on stdin: the two tiers mark each note."""
    text = claude(memory["top"], "SessionStart", session="agree", source="startup")
    out = {}
    for name in EXPECTED:
        line = _line(text, memory[name])
        out[name] = (f"PAST ITS END {END} (not in force;" in line, _disputes(line, memory))
    return out


def read_mcp(memory: dict[str, Any]) -> dict[str, Verdict]:
    """The MCP tools show, status, query and context, through the real client: each must
    say the same, as text and as structured content."""
    async def script(s) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        got: dict[str, Any] = {}
        for name in EXPECTED:
            got[name] = [await ok(s, "show", id=memory[name]), await ok(s, "status", id=memory[name])]
        got["current"] = await ok(s, "query", filters=["current=yes"])
        got["context"] = await ok(s, "context")
        return got

    got = serve(memory["top"], script)
    current = {n["short"] for n in got["current"].structured_content["notes"]}
    context = got["context"].content[0].text
    out = {}
    for name in EXPECTED:
        short = memory[name]
        show, status = got[name]
        seen = [show.structured_content["past_end"], status.structured_content["past_end"],
                f"PAST ITS END {END}" in show.content[0].text, status.structured_content["current"] == "no",
                short not in current, _line(context, short).endswith(f"PAST ITS END {END}")]
        assert len(set(seen)) == 1, (name, seen)
        sides = [_disputes(show.content[0].text, memory), _disputes(status.content[0].text, memory),
                 _disputes(_line(context, short), memory),
                 frozenset(w for d in show.structured_content["open_disputes"] for w in _sides(d["with"], memory))]
        assert len(set(sides)) == 1, (name, sides)
        out[name] = (seen[0], sides[0])
    return out


READS: dict[str, Callable[[dict[str, Any]], dict[str, Verdict]]] = {
    "status": read_status, "show": read_show, "query": read_query, "list": read_list, "context": read_context,
    "hook": read_hook, "mcp": read_mcp}


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("case", ["past end", "dispute"])
def test_each_read_names_a_note_past_its_end_and_an_open_dispute(memory: dict[str, Any], read: str,
                                                                  case: str) -> None:
    said = READS[read](memory)
    names = ["ended"] if case == "past end" else ["tabs", "spaces"]
    assert {n: said[n] for n in names} == {n: EXPECTED[n] for n in names}, said
    assert said["plain"] == EXPECTED["plain"]  # and nothing of a note plainly in force


def test_every_read_answers_the_same_note_alike(memory: dict[str, Any]) -> None:
    said = {read: READS[read](memory) for read in READS}
    assert all(verdicts == said["status"] for verdicts in said.values()), said
    assert said["status"] == EXPECTED
    # still active in the log until swept; the sweep then takes it out of every read
    assert json.loads(q(memory["top"], "show", memory["ended"], "--json"))["state"] == "active"
    q(memory["top"], "expire", "--due")
    assert f"[#{memory['ended']}]" not in q(memory["top"], "context")
    assert json.loads(q(memory["top"], "status", memory["ended"], "--json"))["past_end"] is False


def test_verify_lists_one_dispute_once_both_sides_by_short_id(memory: dict[str, Any]) -> None:
    done = run_qem("verify", cwd=memory["top"], env={"QEM_NOW": NOW})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("open: ")]
    short = memory["dispute"][:6]
    [line] = lines
    found = re.fullmatch(rf"open: dispute {short}: #(\w+) and #(\w+) disagree \(qem rule {short} --keep ONE\)", line)
    assert found and {found[1], found[2]} == {memory["tabs"], memory["spaces"]}, done.stdout
    assert "; 1 open dispute(s) listed" in done.stderr
    assert len(json.loads(q(memory["top"], "verify", "--json"))["disputes"]) == 1
    q(memory["top"], "revoke", memory["spaces"], "-m", "tabs it is")  # a side out of force ends it, as MEMORY.md shows
    assert "open dispute" not in run_qem("verify", cwd=memory["top"]).stderr
    assert "DISPUTED" not in q(memory["top"], "status", memory["tabs"])


# -- an end already past, on every way in -----------------------------------------------------------


def _ended_in_one_write(top: Path, short: str, before: set[str]) -> dict[str, Any]:
    """The note's created and expired events, written by one write (one new log file
    beside its text), the expiry following the creation; the note as `qem show` gives it."""
    events = json.loads(q(top, "log", short, "--json"))
    assert [e["type"] for e in events] == ["created", "expired"], events
    created, expired = events
    assert expired["prev"] == [created["id"]] and expired["at"] == created["at"] == NOW
    assert expired["checkin"] == created["checkin"] and expired["reason"] == "past its end when written"
    new = LogTree(top / ".qem").names() - before
    assert len([n for n in new if not n.startswith("texts/")]) == 1, new
    return json.loads(q(top, "show", short, "--json"))


def test_add_and_supersede_take_an_end_already_past_and_expire_the_note_in_the_same_write(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "app", {"README.md": "# app\n"})
    old = q(top, "add", "The audit runs in March", "-k", "task", now=THEN).strip()
    before = LogTree(top / ".qem").names()
    done = run_qem("add", "The build host was ci-3", "-k", "finding", "--expires", "2026-01-15", "--json", cwd=top,
                   env={"QEM_NOW": NOW})
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["state"] == "expired"
    assert (f"note #{made['short']}'s end (2026-01-15T00:00:00Z) was already past: recorded, with its end, and expired"
            " in the same write") in done.stderr
    note = _ended_in_one_write(top, made["short"], before)
    assert (note["state"], note["expires"]) == ("expired", "2026-01-15T00:00:00Z")
    assert "ended 2026-01-15T00:00:00Z" in q(top, "show", made["short"])
    before = LogTree(top / ".qem").names()
    successor = q(top, "supersede", old, "The audit ran in January", "--expires", "2026-01-31", "-m", "it ran").strip()
    events = json.loads(q(top, "log", successor, "--json"))
    assert [e["type"] for e in events] == ["created", "expired"]
    assert len([n for n in LogTree(top / ".qem").names() - before if not n.startswith("texts/")]) == 1
    assert json.loads(q(top, "show", old, "--json"))["state"] == "superseded"
    assert f"#{successor}\t" not in q(top, "query", "current=yes")


def test_the_mcp_add_tool_takes_an_end_already_past(memory: dict[str, Any]) -> None:
    async def script(s) -> Any:  # type: ignore[no-untyped-def]
        return await ok(s, "add", text="The build host was ci-3", kind="finding", expires="2026-01-15")

    result = serve(memory["top"], script)
    short = result.structured_content["short"]
    assert result.structured_content["state"] == "expired"
    assert f"qem: note #{short}'s end (2026-01-15T00:00:00Z) was already past" in result.content[0].text
    assert [e["type"] for e in json.loads(q(memory["top"], "log", short, "--json"))] == ["created", "expired"]


def test_a_check_in_of_memory_md_takes_an_end_already_past(team: Team) -> None:  # noqa: F811
    team.monkeypatch.setenv("QEM_NOW", NOW)
    founder = team.founded("The parser is slow")
    mirror = founder.path / "MEMORY.md"
    text = mirror.read_text("utf-8").replace("## References\n", "## References\n\n- expires 2026-01-15 · The old"
                                             " server was at 10.0.0.1\n")
    mirror.write_text(text, "utf-8")
    done = founder.qem("checkin", "-m", "what we knew", "--yes")
    short = founder.texts_short("The old server was at 10.0.0.1")
    assert f"note #{short}'s end (2026-01-15T00:00:00Z) was already past" in done.stderr
    events = json.loads(founder.qem("log", short, "--json").stdout)
    assert [e["type"] for e in events] == ["created", "expired"] and events[0]["checkin"] == events[1]["checkin"]
    founder.git("add", ".qem", "MEMORY.md")
    founder.git("commit", "-q", "-m", "memory")
    founder.git("push", "-q", "origin", "main")
    fresh = team.clone("fresh")
    note = json.loads(fresh.qem("show", short, "--json").stdout)
    assert (note["state"], note["expires"], note["past_end"]) == ("expired", "2026-01-15T00:00:00Z", False)
    fresh.check()


def test_a_load_and_a_clones_files_keep_an_end_already_past_and_every_read_names_it(team: Team, tmp_path: Path
                                                                                    ) -> None:  # noqa: F811
    team.monkeypatch.setenv("QEM_NOW", "2026-08-01T00:00:00Z")
    # another clone's created event whose end is before its own time (2026-07-27T10:00:00Z)
    founder, _ = pulled(team, lambda memory: planted_created(memory, "Deploys paused for the audit",
                                                             "operational", expires="2026-07-01T00:00:00Z"))
    short = founder.texts_short("Deploys paused for the audit")
    assert "current: no (PAST ITS END 2026-07-01T00:00:00Z" in founder.qem("status", short).stdout
    assert f"#{short}\t" not in founder.qem("query", "current=yes").stdout
    assert _line(founder.qem("context").stdout, short).endswith("PAST ITS END 2026-07-01T00:00:00Z")
    founder.qem("export")
    founder.qem("verify")  # accepted: nothing set aside, nothing wrong
    # its dump loaded elsewhere: the log as it was, read the same way, and the load says so
    dump = tmp_path / "memory.jsonl"
    dump.write_text(founder.qem("dump").stdout, "utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_qem("load", str(dump), cwd=elsewhere, env={"QEM_NOW": "2026-08-01T00:00:00Z"})
    assert done.returncode == 0, done.stderr
    assert f"1 note in force past its end (#{short})" in done.stderr
    assert "current: no (PAST ITS END" in q(elsewhere, "status", short, now="2026-08-01T00:00:00Z")


# -- no silent cut ------------------------------------------------------------------------------------


def test_an_index_line_keeps_the_whole_first_line_or_says_it_was_cut(ws: Path) -> None:
    fact = "We measured it and " + "the figures were checked twice, " * 8 + "the total is 4 days"
    long = q(ws, "add", fact, "-k", "finding", "-p", "high").strip()  # first in the order
    huge_text = "Log excerpt: " + "x" * 1500
    huge = q(ws, "add", huge_text, "-k", "finding").strip()
    text = q(ws, "context")
    assert f"[#{long}] finding/high · {fact} · agent-recorded" in text  # the decisive end is in the context
    line = _line(text, huge)
    assert f"[cut at 1,000 of {len(huge_text):,} characters: `qem show {huge}` gives it whole]" in line
    assert line.split(" · ")[1].startswith(huge_text[:1000])
    index = {e["short"]: e["line"] for e in json.loads(q(ws, "context", "--format", "json"))["index"]}
    assert fact in index[long] and "`qem show" in index[huge]
    # a budget too small for both: fewer lines, never a shorter one
    small = q(ws, "context", "--budget", str((len(text) - 200) // 4))
    assert f"[#{huge}]" not in small and fact in small and "`qem context --skip" in small


def test_a_tiered_start_says_where_it_cut_a_first_line(ws: Path) -> None:
    first = "Before any release " + "check the changelog, " * 28 + "and never tag on a Friday"
    rule = q(ws, "add", first + "\nSecond line", "-k", "directive").strip()
    budget = 300
    while f"[#{rule}]" not in (given := q(ws, "deliver", "start", "--budget", str(budget))):
        budget += 25  # the least that holds its line: not its whole text
    line = _line(given, rule)
    assert f"… [cut at 200 of {len(first):,} characters: `qem show {rule}` gives it whole]" in line, given
    whole = q(ws, "deliver", "start", "--budget", "0")
    assert first in whole and "[cut at" not in whole


# -- forks and concurrent changes: disputes too, named alike ------------------------------------------


@pytest.mark.parametrize("left, right, label", [
    (("supersede", "ann's version"), ("supersede", "bob's version"), "fork"),
    (("revoke", "-m", "no longer true"), ("supersede", "shared fact one, revised"), "concurrent"),
], ids=["fork", "concurrent changes"])
def test_a_fork_and_concurrent_changes_are_named_alike_by_every_read(team: Team, left: tuple, right: tuple,  # noqa: F811
                                                                     label: str) -> None:
    from test_git import diverge

    ann, bob, note = diverge(team, left, right)
    bob.qem("export")
    sides = [bob.texts_short(t) for t in ("ann's version", "bob's version")] if label == "fork" else [note]
    for side in sides:
        marks = {
            "status": next(line for line in bob.qem("status", side, code=None).stdout.splitlines()
                           if "DISPUTED" in line),
            "show": next(line for line in bob.qem("show", side).stdout.splitlines() if "DISPUTED" in line),
            "query": _line(bob.qem("query", "disputed=yes").stdout, side),
            "list": _line(bob.qem("list").stdout, side),
            "context": _line(bob.qem("context").stdout, side),
        }
        if label == "fork":
            other = next(s for s in sides if s != side)
            assert all(f"DISPUTED with #{other} (fork of #{note})" in m for m in marks.values()), marks
            assert f"`qem rule {note} --keep {side}`" in marks["status"]
        else:
            assert all("DISPUTED (concurrent changes disagree: revoked by" in m for m in marks.values()), marks
            assert f"`qem rule {note} --keep SIDE`" in marks["show"]
        assert json.loads(bob.qem("show", side, "--json").stdout)["open_disputes"]
    # a hook reads only the forks its notes may be in: the same decision as from every fork
    from qem_edit.reads.standing import Standings
    from qem_edit.storage.store import Store

    with Store.open(bob.path / ".qem", create=False, write=False) as store:
        notes = [store.note(store.resolve(s)) for s in sides]
        whole, asked = Standings.read(store, NOW), Standings.read(store, NOW, notes)
        assert [asked.of(n) for n in notes] == [whole.of(n) for n in notes] and all(whole.of(n).disputes for n in notes)

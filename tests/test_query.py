"""`qem query`: exact filters, with the scope of every answer; and history `--at`.

The history is a numbered log (`seq`, `note_id`), converted on `qem load`: notes keep their
numbers as aliases (the CLI finds note 2 as `2`), answers name them by full and short ids,
and the converted events keep their old order (clock, then id).  `--at` takes a date or a
git revision; there is no seq to name a moment by any more.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _edit_support import aliases, events, shorts

from tests.test_resolver import created, event, load

NOW = {"QEM_NOW": "2026-10-05T12:00:00Z"}


@pytest.fixture
def history(qem, tmp_path: Path):
    """A small known history (seq numbers in the comments)."""
    load(qem, tmp_path, [
        created(1, 1, kind="gotcha", at="2026-09-01T10:00:00Z"),                     # 1
        created(2, 2, kind="finding", at="2026-09-02T10:00:00Z"),                    # 2
        created(3, 3, 1, kind="gotcha", at="2026-09-03T10:00:00Z"),                  # 3
        event(4, 1, "superseded", {"by": 3}, at="2026-09-03T10:00:00Z"),             # 4
        event(5, 2, "revoked", reason="wrong", at="2026-10-02T09:00:00Z", actor="alice"),  # 5
        created(6, 4, kind="task", at="2026-10-03T09:00:00Z"),                       # 6
        event(7, 4, "stale_flagged", reason="old?", at="2026-10-04T09:00:00Z", actor="bob"),  # 7
    ])
    return qem


LATEST = "2026-10-04T09:00:00Z"  # the history's newest event


def lines(done) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def full_ids(ws: Path) -> dict[int, str]:
    """Each note's full id by its old number."""
    return {number: full for full, number in aliases(ws).items()}


def order(ws: Path) -> dict[str, int]:
    """Each event's place (1, 2, ...) in the order every clone agrees on (clock, then id)."""
    return {e.id: place for place, e in enumerate(events(ws), start=1)}


def test_every_answer_starts_with_its_scope(history, ws):
    s = shorts(ws)
    out = lines(history("query", "kind=gotcha"))
    assert out[0].startswith("scope: ") and f"(the log up to {LATEST}): 4 notes / 7 events scanned; complete" in out[0]
    assert out[1] == "2 notes match kind=gotcha"
    full = full_ids(ws)
    assert [line.split("\t")[0] for line in out[2:]] == [f"#{s[n]}" for n in sorted((1, 3), key=full.get)]


@pytest.mark.parametrize("filters, ids", [
    (["kind=gotcha"], [1, 3]),
    (["state=revoked"], [2]),
    (["state=stale"], [4]),
    (["priority=medium"], [1, 2, 3, 4]),
    (["provenance=agent"], [1, 2, 3, 4]),
    (["actor=far-away"], [1, 2, 3, 4]),
    (["since=2026-09-02"], [2, 3, 4]),
    (["until=2026-09-02"], [1, 2]),
    (["since=2026-09-02T10:00:01Z", "until=2026-09-03T10:00:00Z"], [3]),
    (["supersedes=1"], [3]),
    (["current=yes"], [3, 4]),
    (["current=no"], [1, 2]),
    (["current=unknown"], []),
    (["disputed=no"], [1, 2, 3, 4]),
    (["text~note 4"], [4]),
    (["kind=gotcha", "current=yes"], [3]),
])
def test_note_filters(history, ws, filters, ids):
    done = history("query", *filters, "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    full = full_ids(ws)
    assert [n["id"] for n in payload["notes"]] == sorted(full[i] for i in ids)  # in id order
    assert [n["alias"] for n in payload["notes"]] == sorted(ids, key=full.get)
    assert payload["count"] == len(ids)
    scope = payload["scope"]
    assert (scope["notes_scanned"], scope["events_scanned"], scope["latest"]) == (4, 7, LATEST)
    assert scope["complete"] is True


def test_a_note_filter_takes_a_short_id_too(history, ws):
    s, full = shorts(ws), full_ids(ws)
    payload = json.loads(history("query", f"supersedes={s[1]}", "--json").stdout)
    assert [n["id"] for n in payload["notes"]] == [full[3]]
    payload = json.loads(history("query", "--events", f"note=#{s[1]}", "--json").stdout)
    assert {e["note"] for e in payload["events"]} == {full[1]} and payload["count"] == 2


@pytest.mark.parametrize("filters, seqs", [
    (["type=revoked"], [5]),
    (["type=revoked", "actor=alice"], [5]),
    (["note=1"], [1, 4]),
    (["since=2026-10-01"], [5, 6, 7]),
    (["until=2026-09-02"], [1, 2]),
    (["actor=bob"], [7]),
    (["checkin=none-such"], []),
])
def test_event_filters(history, ws, filters, seqs):
    # `seqs`: the events' places in the log's order, which the conversion kept
    payload = json.loads(history("query", "--events", *filters, "--json").stdout)
    place = order(ws)
    assert [place[e["id"]] for e in payload["events"]] == seqs


def test_an_empty_answer_says_it_holds_only_within_its_scope(history):
    out = lines(history("query", "--events", "type=revoked", "actor=alice", "since=2026-10-03"))
    assert out[1] == "0 events match type=revoked actor=alice since=2026-10-03"
    assert out[2] == (
        "no events match type=revoked actor=alice since=2026-10-03 in 4 notes / 7 events"
        f" (the log up to {LATEST}): an answer only within this scope"
    )


def test_an_incomplete_answer_says_why(history, qem):
    assert qem("forget", "4", "-m", "secret", "--yes").returncode == 0
    out = lines(qem("query", "text~note"))
    assert "incomplete: 1 forgotten note(s) have no text to search" in out[0]
    assert out[1] == "3 notes match text~note"


def test_unknown_currency_makes_a_currency_answer_incomplete(qem, tmp_path):
    load(qem, tmp_path, [created(1, 1, 2), created(2, 2, 1), created(3, 3)])
    out = lines(qem("query", "current=yes"))
    assert "incomplete: 2 note(s) have unknown currency" in out[0]
    counted = qem("query", "current=unknown", "--count")
    assert counted.returncode == 0 and counted.stdout == "2\n" and counted.stderr.startswith("scope: ")


@pytest.mark.parametrize("filters, words", [
    (["kind=gotcha", "kind=task"], "given twice"),
    (["kind="], "is empty"),
    (["colour=red"], "unknown note filter 'colour'"),
    (["kind"], "malformed filter"),
    (["kind=nope"], "use one of"),
    (["since=yesterday"], "not an ISO date"),
    (["supersedes=a-b"], "is not a note id"),
    (["supersedes=zzzz"], "no note #zzzz"),
    (["supersedes=99"], "no note #99"),
    (["current=maybe"], "use one of"),
    (["text=foo"], "no filter text=: write text~VALUE"),  # the operator it takes, named
    (["kind~go"], "no filter kind~: write kind=VALUE"),
])
def test_bad_filters_are_refused_never_ignored(history, filters, words):
    done = history("query", *filters)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_event_filters_are_not_note_filters(history):
    done = history("query", "--events", "kind=gotcha")
    assert done.returncode == 2 and "unknown event filter 'kind'" in done.stderr


def test_export_at_a_moment_renders_history_as_it_was(history, ws):
    # (was `--at SEQ`: a moment is now a date or time, or a git revision)
    s = shorts(ws)
    then = history("export", "--at", "2026-09-02T10:00:00Z", "--stdout").stdout
    assert then.startswith("<!-- qem memory=") and "base=" not in then.split("\n", 1)[0]
    assert f"[#{s[1]}]" in then and f"[#{s[2]}]" in then and f"[#{s[3]}]" not in then
    assert "SUPERSEDED" not in then  # #1 was superseded only on 2026-09-03
    assert "REVOKED" not in then
    later = history("export", "--at", "2026-09-03T10:00:00Z", "--stdout").stdout
    assert f"[#{s[3]}]" in later and f"SUPERSEDED by #{s[3]}" in later and "REVOKED" not in later
    now = history("export", "--stdout").stdout
    assert f"SUPERSEDED by #{s[3]}" in now and "REVOKED" in now
    assert then != later != now


def test_export_at_a_date_takes_the_end_of_that_day(history, ws):
    s = shorts(ws)
    at_date = history("export", "--at", "2026-10-02", "--stdout").stdout
    assert "REVOKED 2026-10-02 (wrong)" in at_date  # revoked at 09:00 that day
    assert f"[#{s[4]}]" not in at_date  # created the day after
    assert "base=" not in at_date.split("\n", 1)[0]
    assert history("export", "--at", "2026-10-01T23:59:59Z", "--stdout").stdout.count("REVOKED") == 0


def test_show_at_gives_the_note_as_it_was(history):
    then = json.loads(history("show", "2", "--at", "2026-09-03", "--json").stdout)
    assert then["state"] == "active"
    assert json.loads(history("show", "2", "--json").stdout)["state"] == "revoked"
    before = history("show", "4", "--at", "2026-10-02")
    assert before.returncode == 2 and "did not exist at 2026-10-02" in before.stderr


def test_forgotten_text_stays_forgotten_in_history(history, qem, ws):
    s = shorts(ws)
    assert qem("forget", "2", "-m", "secret", "--yes").returncode == 0
    then = qem("export", "--at", "2026-09-02", "--stdout").stdout
    assert "note 2" not in then and f"[#{s[2]}] FORGOTTEN" in then
    assert "note 1" in then  # the rest of the past is still there


@pytest.mark.parametrize("args, words", [
    (["export", "--at", "99", "--stdout"], "not a date"),  # (a seq once; not a revision either: no git here)
    (["export", "--at", "2026-09-02"], "use it with --stdout"),
    (["export", "--at", "someday", "--stdout"], "not a date"),
    (["show", "1", "--at", "someday"], "not a date"),
])
def test_bad_at_is_refused(history, args, words):
    done = history(*args)
    assert done.returncode == 2 and words in done.stderr


def test_disputes_are_recorded_shown_queried_and_ruled(qem):
    one, two, three = (qem("add", text, "-k", "gotcha").stdout.strip()
                       for text in ("lock is released before restart", "lock is released after restart", "other"))
    dispute = qem("dispute", one, two, "-m", "they disagree")
    assert dispute.returncode == 0, dispute.stderr
    dispute_id = dispute.stdout.strip()
    assert len(dispute_id) == 6  # a dispute's id is a string, shown by its first 6 characters
    rendered = qem("export", "--stdout").stdout
    assert f"DISPUTED with #{two} (dispute {dispute_id}) · lock is released before" in rendered
    assert f"DISPUTED with #{one} (dispute {dispute_id}) · lock is released after" in rendered
    payload = json.loads(qem("query", "disputed=yes", "--json").stdout)
    assert [n["short"] for n in payload["notes"]] == sorted((one, two), key=lambda n: payload_id(qem, n))
    # neither note was edited: both are still current
    assert json.loads(qem("status", one, "--json").stdout)["current"] == "yes"
    listed = qem("verify")
    assert listed.returncode == 0 and f"dispute {dispute_id}" in listed.stdout
    assert qem("verify", "--fail-on-disputes").returncode == 1
    # refusals
    assert qem("dispute", one, two, "-m", "again").returncode == 2
    assert qem("dispute", one, one, "-m", "self").returncode == 2
    assert qem("dispute", one, three).returncode == 2  # a reason is required
    wrong = qem("rule", dispute_id, "--keep", three, "-m", "x")
    assert wrong.returncode == 2 and "--keep one of them" in wrong.stderr
    assert qem("rule", "9999", "--keep", one, "-m", "x").returncode == 2
    ruled = qem("rule", dispute_id, "--keep", two, "-m", "measured")
    assert ruled.returncode == 0, ruled.stderr
    assert "0 notes match" in qem("query", "disputed=yes").stdout
    assert json.loads(qem("show", one, "--json").stdout)["state"] == "revoked"
    again = qem("rule", dispute_id, "--keep", two, "-m", "twice")
    assert again.returncode == 2 and "already closed" in again.stderr
    done = qem("verify", "--fail-on-disputes")
    assert done.returncode == 0 and done.stdout == "", done.stdout


def payload_id(qem, short: str) -> str:
    return json.loads(qem("show", short, "--json").stdout)["id"]


def test_a_dispute_is_settled_by_editing_one_side(qem, tmp_path):
    first, second = (qem("add", text, "-k", "gotcha").stdout.strip() for text in ("before restart", "after restart"))
    assert qem("dispute", first, second, "-m", "they disagree").returncode == 0
    script = tmp_path / "drop_first.py"
    script.write_text(
        "import sys, re\n"
        "p = sys.argv[-1]\n"
        "s = open(p).read()\n"
        f"s, n = re.subn(r'- \\[#{first}\\].*\\n', '', s)\n"
        "assert n == 1, s\n"
        "open(p, 'w').write(s)\n"
    )
    import sys as _sys

    done = qem("edit", "-m", "after is right", "--yes", env={"QEM_EDITOR": f"{_sys.executable} {script}"})
    assert done.returncode == 0, done.stderr
    assert "0 notes match" in qem("query", "disputed=yes").stdout
    assert json.loads(qem("show", first, "--json").stdout)["state"] == "revoked"
    assert json.loads(qem("show", second, "--json").stdout)["state"] == "active"

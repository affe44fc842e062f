"""`qem query`: exact filters, with the scope of every answer; and history `--at`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def lines(done) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_every_answer_starts_with_its_scope(history):
    out = lines(history("query", "kind=gotcha"))
    assert out[0].startswith("scope: ") and "up to seq 7: 4 notes / 7 events scanned; complete" in out[0]
    assert out[1] == "2 notes match kind=gotcha"
    assert [line.split("\t")[0] for line in out[2:]] == ["#1", "#3"]


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
def test_note_filters(history, filters, ids):
    done = history("query", *filters, "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert [n["id"] for n in payload["notes"]] == ids
    assert payload["count"] == len(ids)
    assert payload["scope"]["head"] == 7 and payload["scope"]["complete"] is True


@pytest.mark.parametrize("filters, seqs", [
    (["type=revoked"], [5]),
    (["type=revoked", "actor=alice"], [5]),
    (["note=1"], [1, 4]),
    (["since=2026-10-01"], [5, 6, 7]),
    (["until=2026-09-02"], [1, 2]),
    (["actor=bob"], [7]),
    (["checkin=none-such"], []),
])
def test_event_filters(history, filters, seqs):
    payload = json.loads(history("query", "--events", *filters, "--json").stdout)
    assert [e["seq"] for e in payload["events"]] == seqs


def test_an_empty_answer_says_it_holds_only_within_its_scope(history):
    out = lines(history("query", "--events", "type=revoked", "actor=alice", "since=2026-10-03"))
    assert out[1] == "0 events match type=revoked actor=alice since=2026-10-03"
    assert out[2] == (
        "no events match type=revoked actor=alice since=2026-10-03 in 4 notes / 7 events up to"
        " seq 7: an answer only within this scope"
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
    (["supersedes=abc"], "expected a note id"),
    (["current=maybe"], "use one of"),
    (["text=foo"], "unknown note filter 'text'"),
])
def test_bad_filters_are_refused_never_ignored(history, filters, words):
    done = history("query", *filters)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_event_filters_are_not_note_filters(history):
    done = history("query", "--events", "kind=gotcha")
    assert done.returncode == 2 and "unknown event filter 'kind'" in done.stderr


def test_export_at_a_seq_renders_history_as_it_was(history):
    then = history("export", "--at", "3", "--stdout").stdout
    assert "base=3 " in then
    assert "[#3]" in then and "[#4]" not in then
    assert "SUPERSEDED" not in then  # #1 was superseded only at seq 4
    assert "REVOKED" not in then
    now = history("export", "--stdout").stdout
    assert "SUPERSEDED by #3" in now and "REVOKED" in now


def test_export_at_a_date_takes_the_end_of_that_day(history):
    at_date = history("export", "--at", "2026-10-02", "--stdout").stdout
    assert "base=5 " in at_date and "REVOKED 2026-10-02 (wrong)" in at_date
    assert history("export", "--at", "2026-10-01T23:59:59Z", "--stdout").stdout.count("REVOKED") == 0


def test_show_at_gives_the_note_as_it_was(history):
    then = json.loads(history("show", "2", "--at", "4", "--json").stdout)
    assert then["state"] == "active"
    assert json.loads(history("show", "2", "--json").stdout)["state"] == "revoked"
    before = history("show", "4", "--at", "5")
    assert before.returncode == 2 and "did not exist at seq 5" in before.stderr


def test_forgotten_text_stays_forgotten_in_history(history, qem):
    assert qem("forget", "2", "-m", "secret", "--yes").returncode == 0
    then = qem("export", "--at", "2", "--stdout").stdout
    assert "note 2" not in then and "[#2] FORGOTTEN" in then


@pytest.mark.parametrize("args, words", [
    (["export", "--at", "99", "--stdout"], "past the store's head"),
    (["export", "--at", "2"], "use it with --stdout"),
    (["export", "--at", "someday", "--stdout"], "not an ISO date"),
])
def test_bad_at_is_refused(history, args, words):
    done = history(*args)
    assert done.returncode == 2 and words in done.stderr


def test_disputes_are_recorded_shown_queried_and_ruled(qem):
    for text in ("lock is released before restart", "lock is released after restart", "other"):
        assert qem("add", text, "-k", "gotcha").returncode == 0
    dispute = qem("dispute", "1", "2", "-m", "they disagree")
    assert dispute.returncode == 0, dispute.stderr
    dispute_id = dispute.stdout.strip()
    rendered = qem("export", "--stdout").stdout
    assert f"DISPUTED with #2 (dispute {dispute_id}) · lock is released before" in rendered
    assert f"DISPUTED with #1 (dispute {dispute_id}) · lock is released after" in rendered
    payload = json.loads(qem("query", "disputed=yes", "--json").stdout)
    assert [n["id"] for n in payload["notes"]] == [1, 2]
    # neither note was edited: both are still current
    assert json.loads(qem("status", "1", "--json").stdout)["current"] == "yes"
    # refusals
    assert qem("dispute", "1", "2", "-m", "again").returncode == 2
    assert qem("dispute", "1", "1", "-m", "self").returncode == 2
    assert qem("dispute", "1", "3").returncode == 2  # a reason is required
    wrong = qem("rule", dispute_id, "--keep", "3", "-m", "x")
    assert wrong.returncode == 2 and "--keep one of them" in wrong.stderr
    assert qem("rule", "9999", "--keep", "1", "-m", "x").returncode == 2
    ruled = qem("rule", dispute_id, "--keep", "2", "-m", "measured")
    assert ruled.returncode == 0, ruled.stderr
    assert "0 notes match" in qem("query", "disputed=yes").stdout
    assert json.loads(qem("show", "1", "--json").stdout)["state"] == "revoked"
    again = qem("rule", dispute_id, "--keep", "2", "-m", "twice")
    assert again.returncode == 2 and "already closed" in again.stderr
    assert qem("verify").returncode == 0


def test_a_dispute_is_settled_by_editing_one_side(qem, tmp_path):
    for text in ("before restart", "after restart"):
        assert qem("add", text, "-k", "gotcha").returncode == 0
    assert qem("dispute", "1", "2", "-m", "they disagree").returncode == 0
    script = tmp_path / "drop_first.py"
    script.write_text(
        "import sys, re\n"
        "p = sys.argv[-1]\n"
        "s = open(p).read()\n"
        "s = re.sub(r'- \\[#1\\].*\\n', '', s)\n"
        "open(p, 'w').write(s)\n"
    )
    import sys as _sys

    done = qem("edit", "-m", "after is right", "--yes", env={"QEM_EDITOR": f"{_sys.executable} {script}"})
    assert done.returncode == 0, done.stderr
    assert "0 notes match" in qem("query", "disputed=yes").stdout
    assert json.loads(qem("show", "1", "--json").stdout)["state"] == "revoked"

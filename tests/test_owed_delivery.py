"""Asked for you: a session's start (and its return from a compaction) gives what this seat
owes and everything late, before every other note and within the budget; a deadline that
passes during the session comes at the next prompt.  The seat is the actor the session
writes as (`QEM_ACTOR`); where none is set, every seat's.  Real hook input on stdin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import code_repository
from conftest import run_qem
from test_hooks import claude
from test_hooks_start import listed

EARLY = {"QEM_NOW": "2026-09-01T08:00:00Z"}


@pytest.fixture
def owed_project(tmp_path: Path) -> dict[str, object]:
    top = code_repository(tmp_path / "app", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0

    def add(*args: str) -> str:
        done = run_qem("add", *args, cwd=top, env=EARLY)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    made = {
        "rule": add("Run the tests inside .venv", "-k", "directive", "-p", "high"),
        "mine": add("Review the lock order", "-k", "task", "--to", "tester", "--due", "2026-09-10"),
        "late": add("Send the migration report", "-k", "task", "--to", "alice", "--due", "2026-09-05"),
        "theirs": add("Hand over the keys", "-k", "task", "--to", "alice"),
        "done": add("Rotate the token", "-k", "task", "--to", "tester", "--due", "2026-09-02"),
    }
    assert run_qem("answer", made["done"], "Rotated", cwd=top, env=EARLY).returncode == 0
    return {"top": top, **made}


def test_a_start_gives_what_this_seat_owes_and_everything_late_first(owed_project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    p, top = owed_project, owed_project["top"]
    monkeypatch.setenv("QEM_NOW", "2026-09-07T12:00:00Z")
    said = claude(top, "SessionStart", source="startup")
    assert listed(said) == [p["late"], p["mine"], p["rule"]]  # late, then mine, then the directives
    assert "## Late, not answered yet" in said and "## Owed by you (tester), not answered yet (1)" in said
    assert f"- [#{p['late']}] task/medium · to alice · due 2026-09-05T23:59:59Z · LATE 1d 12h · Send the migration report" in said
    assert f"[#{p['mine']}] task/medium · to tester · due 2026-09-10T23:59:59Z · Review" in said  # owed, not late
    assert f"[#{p['theirs']}]" not in said and f"[#{p['done']}]" not in said  # another seat's, not late; answered
    # a prompt: nothing late that was not given
    assert f"[#{p['late']}]" not in claude(top, "UserPromptSubmit", prompt="carry on")
    # my deadline passes during the session: it comes at the next prompt, as late, once
    monkeypatch.setenv("QEM_NOW", "2026-09-11T09:00:00Z")
    said = claude(top, "UserPromptSubmit", prompt="what next")
    assert f"[#{p['mine']}] task/medium · agent-recorded, verify · to tester · due 2026-09-10T23:59:59Z · LATE 9h 1s" in said
    assert "late, not answered yet" in said
    assert f"[#{p['late']}]" not in said
    assert f"[#{p['mine']}]" not in claude(top, "UserPromptSubmit", prompt="and then")
    # after a compaction, asked again
    said = claude(top, "SessionStart", source="compact")
    assert listed(said)[:2] == [p["mine"], p["late"]] or listed(said)[:2] == [p["late"], p["mine"]]


def test_with_no_seat_known_every_seat_s_debts_come(owed_project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    p, top = owed_project, owed_project["top"]
    monkeypatch.setenv("QEM_NOW", "2026-09-07T12:00:00Z")
    monkeypatch.delenv("QEM_ACTOR")
    said = claude(top, "SessionStart", session="noseat", source="startup")
    got = listed(said)
    assert got[0] == p["late"] and sorted(got[1:3]) == sorted([p["mine"], p["theirs"]]) and got[3:] == [p["rule"]]
    assert "owed, not answered yet (no seat known: every seat's)" in said.lower()


def test_the_debts_come_first_within_a_budget_too_small_for_the_rest(owed_project) -> None:  # type: ignore[no-untyped-def]
    p, top = owed_project, owed_project["top"]
    data = json.loads(run_qem("deliver", "start", "--budget", "660", "--json", cwd=top,
                              env={"QEM_NOW": "2026-09-07T12:00:00Z"}).stdout)
    assert [g["short"] for g in data["given"]] == [p["late"], p["mine"]]
    text = run_qem("deliver", "start", "--budget", "660", cwd=top, env={"QEM_NOW": "2026-09-07T12:00:00Z"}).stdout
    assert len(text) <= 660 and "1 more note did not fit" in text


def test_context_says_late_beside_a_late_request_no_answer_answers_yes(owed_project) -> None:  # type: ignore[no-untyped-def]
    p, top = owed_project, owed_project["top"]
    later = {"QEM_NOW": "2026-09-07T12:00:00Z"}
    said = run_qem("context", cwd=top, env=later).stdout
    late = next(line for line in said.splitlines() if line.startswith(f"[#{p['late']}]"))
    assert late.endswith(" · LATE 1d 12h")
    for other in ("mine", "theirs", "done"):  # not due yet, no deadline, answered though past it
        assert "LATE" not in next(line for line in said.splitlines() if line.startswith(f"[#{p[other]}]"))
    rows = {row["short"]: row for row in json.loads(run_qem("context", "--format", "json", cwd=top, env=later).stdout)["index"]}
    assert rows[p["late"]]["late_seconds"] == 129601 and rows[p["done"]]["late_seconds"] is None
    assert " · LATE 2d\n" in run_qem("context", "--at", "2026-09-07", cwd=top, env=later).stdout  # (that day's end)

"""`qem context`: the two tiers an agent reads at session start, run as a user runs it.

A memory with a note in every state is built in-process (times pinned); the command runs
as a child process with the clock pinned (`QEM_NOW`), so ages are exact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from builders import add, emit, forget, store_path
from conftest import run_qem

from qem_edit.reads.context import CHARS_PER_TOKEN, tokens
from qem_edit.storage.store import Store

NOW = {"QEM_NOW": "2026-08-06T12:00:00Z"}  # ten days after the notes' 2026-07-27


def _memory(root: Path) -> dict[str, str]:
    """Notes by name → short id."""
    made: dict[str, str] = {}
    with Store.open(store_path(root), create=True) as s:
        made["rule"] = add(s, "Run tests inside .venv\nnever the global python", "directive", priority="high")
        made["stale-rule"] = add(s, "Ask before pushing", "directive", priority="low")
        emit(s, made["stale-rule"], "stale_flagged", "the remote moved")
        made["gone-rule"] = add(s, "Use tabs", "directive")
        emit(s, made["gone-rule"], "revoked", "spaces now")
        made["old"] = add(s, "Lock is released before restart", "gotcha", priority="high")
        made["new"] = add(s, "Lock is released after restart " + "x" * 100, "gotcha", priority="high",
                          supersedes=made["old"])
        made["low-gotcha"] = add(s, "Cache keys are case-sensitive", "gotcha", priority="low",
                                 provenance="user-stated", at="2026-07-20T10:00:00Z")
        made["task"] = add(s, "Write the migration guide", "task", priority="medium", provenance="auto")
        made["expired"] = add(s, "Sprint goal: ship v2", "task")
        emit(s, made["expired"], "expired", "sprint over")
        made["forgotten"] = add(s, "token=abc", "reference")
        forget(s, made["forgotten"])
        made["a"] = add(s, "The index is rebuilt nightly", "finding")
        made["b"] = add(s, "The index is rebuilt hourly", "finding")
        s.write(lambda tx: tx.dispute(made["a"], made["b"], "tester", "they disagree"), at="2026-07-28T10:00:00Z")
        return {name: s.note(i).shown for name, i in made.items()}


@pytest.fixture
def memory(ws: Path) -> dict[str, str]:
    return _memory(ws)


def context(ws: Path, *args: str) -> str:
    done = run_qem("context", *args, cwd=ws, env=NOW)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_directives_in_full_then_one_line_per_other_note_in_force(ws: Path, memory: dict[str, str]) -> None:
    out = context(ws)
    directives, index = out.split("## Index")
    # every directive in force, in full (stale marked), high first; a revoked one not at all
    assert f"- [#{memory['rule']}] directive/high · agent-recorded, verify · 10d\n  Run tests inside .venv\n  never the global python" in directives
    assert f"- [#{memory['stale-rule']}] directive/low · agent-recorded, verify · 10d · STALE\n  Ask before pushing" in directives
    assert directives.index(memory["rule"]) < directives.index(memory["stale-rule"])
    assert memory["gone-rule"] not in out
    lines = [line for line in index.split("\n") if line.startswith("[#")]
    shown = [re.match(r"\[#(\w+)\]", line)[1] for line in lines]
    # kind rank (task, gotcha, finding), then priority, then id; nothing superseded,
    # expired, forgotten or revoked
    a, b = sorted([memory["a"], memory["b"]], key=lambda short: next(k for k in memory if memory[k] == short))
    assert shown[:3] == [memory["task"], memory["new"], memory["low-gotcha"]]
    assert set(shown[3:]) == {memory["a"], memory["b"]}
    for gone in ("old", "expired", "forgotten"):
        assert f"[#{memory[gone]}]" not in out
    by_id = dict(zip(shown, lines))
    assert by_id[memory["task"]] == f"[#{memory['task']}] task/medium · Write the migration guide · auto-captured, unreviewed · 10d"
    assert by_id[memory["low-gotcha"]].endswith("· the user's words · 17d")
    # the whole first line, however long: the budget decides how many lines, not how much of each
    assert by_id[memory["new"]].split(" · ")[1] == "Lock is released after restart " + "x" * 100
    assert by_id[memory["a"]].endswith(f"· 10d · DISPUTED with #{memory['b']} (dispute {dispute_of(ws, memory['a'])})")
    assert by_id[memory["b"]].endswith(f"· DISPUTED with #{memory['a']} (dispute {dispute_of(ws, memory['a'])})")
    assert "(5 other notes in force)" in out and "did not fit" not in out


def dispute_of(ws: Path, short: str) -> str:
    """The dispute a note is a side of, as messages name it (its first 6 characters)."""
    done = run_qem("show", short, "--json", cwd=ws, env=NOW)
    [side] = json.loads(done.stdout)["disputes"]
    return side["dispute"][:6]


def test_the_output_is_the_same_every_time(ws: Path, memory: dict[str, str]) -> None:
    assert context(ws) == context(ws)


def entries(out: str) -> list[tuple[str, str]]:
    """(short id, the entry as printed) in order: a directive's block or an index line."""
    found: list[tuple[str, str]] = []
    for line in out.split("\n"):
        match = re.match(r"(?:- )?\[#(\w+)\]", line)
        if match:
            found.append((match[1], line))
        elif found and found[-1][1].startswith("- ") and line.startswith("  "):
            found[-1] = (found[-1][0], found[-1][1] + "\n" + line)
    return found


@pytest.mark.parametrize("budget", [1, 60, 80, 100, 120, 140, 160, 180, 200])
def test_a_budget_bounds_the_whole_answer_in_order_and_the_last_line_lists_the_rest(
        ws: Path, memory: dict[str, str], budget: int) -> None:
    every = entries(context(ws, "--budget", "0"))
    out = context(ws, "--budget", str(budget))
    shown = entries(out)
    assert shown == every[:len(shown)]  # the order kept, each directive whole or not at all
    rest = every[len(shown):]
    if shown:
        assert tokens(out.rstrip("\n")) <= budget
    if rest:  # the next entry would not have fitted, and the last line says what is left out
        body, footer = out.rstrip("\n").split("\n\n…")
        assert "\n" not in footer and out.rstrip("\n").endswith(footer)
        # (with room kept for the footer at its longest, every count at its largest)
        all_directives = sum(1 for _, e in every if e.startswith("- "))
        longest = (f"\n\n… {len(every)} more notes in force did not fit the budget ({all_directives} of them"
                   f" directives); `qem context --skip {len(every)} --budget 0` lists them")
        heading = ""
        if rest[0][1].startswith("- ") and sum(1 for _, e in rest if e.startswith("- ")) == 1:
            heading = "\n\n" + re.search(r"## Index \([^)]*\)", context(ws, "--budget", "0"))[0] + "\n\n(none)"
        assert len(body + "\n" + rest[0][1] + heading + longest) > budget * CHARS_PER_TOKEN
        assert f"{len(rest)} more notes in force did not fit the budget" in footer
        directives = sum(1 for _, e in rest if e.startswith("- "))
        assert (f"({directives} of them directive" in footer) == bool(directives)
        command = re.search(r"`qem (context [^`]+)`", footer)[1]
        listed = context(ws, *command.split()[1:])
        assert entries(listed) == rest
        assert ("## Directives" in listed) == bool(directives)  # the tier read already is left out
        assert ("## Index" in out) == (not directives)  # never an index line before every directive
    else:
        assert "did not fit" not in out


def test_json_holds_what_the_markdown_shows(ws: Path, memory: dict[str, str]) -> None:
    budget = str(150 + len(str(ws)) // 4)  # the header names the memory's path: room for it wherever the test runs
    data = json.loads(context(ws, "--format", "json", "--budget", budget))
    text = context(ws, "--budget", budget)
    assert [d["short"] for d in data["directives"]] == [memory["rule"], memory["stale-rule"]]
    assert [d["short"] for d in data["directives"]] == re.findall(r"^- \[#(\w+)\]", text, re.M)
    assert data["directives"][0]["text"] == "Run tests inside .venv\nnever the global python"
    assert [e["line"] for e in data["index"]] == [line for line in text.split("\n") if line.startswith("[#")]
    assert data["omitted"]["count"] == 5 - len(data["index"])
    assert data["chars_per_token"] == CHARS_PER_TOKEN and data["reference"] == "2026-08-06"
    assert data["directives"][1]["stale"] is True and data["directives"][1]["age_days"] == 10


def test_at_a_date_shows_the_memory_as_it_was(ws: Path, memory: dict[str, str]) -> None:
    before = context(ws, "--at", "2026-07-21")
    assert f"[#{memory['low-gotcha']}]" in before and f"[#{memory['rule']}]" not in before
    assert "ages in days to 2026-07-21" in before and "· 1d" in before


def test_show_expands_an_index_line(ws: Path, memory: dict[str, str]) -> None:
    done = run_qem("show", memory["new"], cwd=ws)
    assert done.returncode == 0 and "x" * 100 in done.stdout


@pytest.mark.parametrize("args, words", [
    (("--budget", "-1"), "--budget -1"),
    (("--skip", "-2"), "--skip -2"),
    (("--format", "xml"), "unknown format 'xml'"),
    (("--at", "no-such-rev"), "--at"),
])
def test_bad_input_is_refused_with_exit_2(ws: Path, memory: dict[str, str], args: tuple[str, ...], words: str) -> None:
    done = run_qem("context", *args, cwd=ws, env=NOW)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_missing_memory_says_how_to_make_one(ws: Path) -> None:
    done = run_qem("context", cwd=ws)
    assert done.returncode == 2 and "no qem memory" in done.stderr and "qem init" in done.stderr


def test_at_7490_notes_the_budget_bounds_the_answer_and_its_last_line_says_what_was_cut(tmp_path: Path) -> None:
    """The generated 7,490-note memory holds some 430 directives, far over a 2,000-token
    budget: the answer keeps within it (so a harness that keeps 10,000 characters sees all
    of it), ends with the line that counts what was left out, and that line's command
    lists exactly the rest, in order."""
    import subprocess
    import sys

    from conftest import FIXTURES

    corpus = tmp_path / "corpus-7490.jsonl"
    subprocess.run([sys.executable, str(FIXTURES / "generate.py"), "--notes", "7490", "-o", str(corpus)], check=True)
    ws = tmp_path / "ws"
    assert run_qem("load", str(corpus), "-w", str(ws), timeout=300).returncode == 0
    out = context(ws, "--budget", "2000")
    assert len(out) <= 2000 * CHARS_PER_TOKEN
    last = out.rstrip("\n").split("\n")[-1]
    whole = entries(context(ws, "--budget", "0"))
    directives = sum(1 for _, e in whole if e.startswith("- "))
    assert directives > 300
    shown = entries(out)
    assert shown == whole[:len(shown)] and len(shown) < directives
    assert last.startswith(f"… {len(whole) - len(shown):,} more notes in force did not fit the budget"
                           f" ({directives - len(shown):,} of them directives)")
    command = re.search(r"`qem (context [^`]+)`", last)[1]
    assert entries(context(ws, *command.split()[1:])) == whole[len(shown):]

"""What a note may rest on, decided once: `qem checkin --dry-run` refuses what the check-in
would (a base flagged stale, revoked, private, or past its end), each named on its line
before any plan is shown; `--rests-on` refuses a base past its end; `qem status` counts
such a base as not in force.  Real git, the user's MEMORY.md edited as a person does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)


@pytest.fixture
def repo(ws: Path, qem):  # type: ignore[no-untyped-def]
    _git(ws, "init", "-q")
    _git(ws, "config", "user.email", "a@a")
    _git(ws, "config", "user.name", "a")
    assert qem("init").returncode == 0
    assert qem("export").returncode == 0
    return ws


def _commit(ws: Path) -> None:
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "memory")


def _rest_on(ws: Path, base: str, text: str = "New dep") -> int:
    """A new item resting on `base` put in MEMORY.md by hand; its line number."""
    memory = ws / "MEMORY.md"
    edited = memory.read_text("utf-8").replace("## Operational\n", f"- rests on #{base} · {text}\n\n## Operational\n")
    memory.write_text(edited, "utf-8")
    return edited.splitlines().index(f"- rests on #{base} · {text}") + 1


BASES = {
    "stale": (("flag-stale", "{b}", "-m", "doubt"), "that note is stale"),
    "revoked": (("revoke", "{b}", "-m", "wrong"), "that note is revoked"),
    "private": ((), "that note is a private note: a team note cannot rest on it"),
    "session": ((), "that note is a session note: a team note cannot rest on it (a session note cannot be shared"),
}
SCOPES = {"private": ("--scope", "private"), "session": ("--scope", "session", "--session", "s1")}


@pytest.mark.parametrize("case", sorted(BASES))
def test_a_dry_run_refuses_the_base_the_check_in_refuses_named_by_line(repo: Path, qem, case: str) -> None:
    move, words = BASES[case]
    scope = SCOPES.get(case, ())
    base = qem("add", "Stale base", "--kind", "finding", *scope).stdout.strip()
    if move:
        assert qem(*(m.format(b=base) for m in move)).returncode == 0
    _commit(repo)
    line = _rest_on(repo, base)
    before = (repo / "MEMORY.md").read_bytes()
    dry = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--dry-run")
    assert dry.returncode == 2, dry.stdout + dry.stderr
    assert f"line {line}: `rests on #{base}`: {words}" in dry.stderr
    assert "create" not in dry.stdout  # refused before any plan is shown
    data = json.loads(qem("checkin", "--path", "MEMORY.md", "-m", "x", "--dry-run", "--json").stdout)
    assert [e["line"] for e in data["errors"]] == [line] and words in data["errors"][0]["message"]
    real = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--yes")
    assert real.returncode == 2 and f"line {line}: `rests on #{base}`: {words}" in real.stderr
    assert "create" not in real.stdout
    assert (repo / "MEMORY.md").read_bytes() == before
    assert "New dep" not in qem("list").stdout


def test_a_base_past_its_end_is_no_ground_and_a_request_past_its_end_is_not_owed(repo: Path, qem) -> None:
    before, after = {"QEM_NOW": "2026-01-01T00:00:00Z"}, {"QEM_NOW": "2026-03-01T00:00:00Z"}
    base = qem("add", "Ends soon", "--kind", "finding", "--expires", "2026-02-01", env=before).stdout.strip()
    dep = qem("add", "Rests on it", "--kind", "finding", "--rests-on", base, env=before).stdout.strip()
    request = qem("add", "Review it", "--kind", "task", "--to", "bob", "--due", "2026-01-15",
                  "--expires", "2026-02-01", env=before).stdout.strip()
    assert "PAST ITS END" in qem("status", base, env=after).stdout  # not swept: `qem expire --due` was not run
    refused = qem("add", "On nothing", "--kind", "finding", "--rests-on", base, env=after)
    assert refused.returncode == 2 and f"note #{base} is past its end (2026-02-01T00:00:00Z)" in refused.stderr
    assert "On nothing" not in qem("list", env=after).stdout
    said = qem("status", dep, env=after).stdout
    assert f"rests on notes in force: no (#{base} is past its end" in said
    assert "rests on notes in force: yes" in qem("status", dep, env=before).stdout
    # a successor keeps only the bases still ground to rest on, as --rests-on takes them
    successor = qem("supersede", dep, "Rests on nothing now", "-m", "re-pointed", env=after).stdout.strip()
    rows = {row["short"]: row for row in json.loads(qem("list", "--json", env=after).stdout)}
    assert rows[successor]["rests_on"] == []
    _commit(repo)
    line = _rest_on(repo, base)
    dry = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--dry-run", env=after)
    assert dry.returncode == 2 and f"line {line}: `rests on #{base}`: that note is past its end" in dry.stderr
    owed = qem("owed", "--json", env=after)
    assert owed.returncode == 0 and json.loads(owed.stdout)["owed"] == []
    assert "answered: not owed (not owed: past its end" in qem("status", request, env=after).stdout
    assert [o["id"] for o in json.loads(qem("owed", "--json", env=before).stdout)["owed"]] != []


def test_a_writer_names_notes_it_holds_on_every_way_in(repo: Path, qem) -> None:
    """docs/FORMAT.md: an id of no note in this memory is refused by a writer (a pointer
    from another clone's log file is read, and answers unknown)."""
    nobody = "abcdefghjkmnpqrstvwxyz0123"
    for option in ("--answers", "--rests-on"):
        done = qem("add", "x", "--kind", "finding", option, nobody)
        assert done.returncode == 2 and f"no note #{nobody} in this memory" in done.stderr
    _commit(repo)
    line = _rest_on(repo, nobody)
    done = qem("checkin", "--path", "MEMORY.md", "-m", "x", "--dry-run")
    assert done.returncode == 2 and f"line {line}: `rests on #{nobody}`: no note #{nobody}" in done.stderr
    assert json.loads(qem("list", "--json").stdout) == []  # nothing was written on any way in
    docs = (Path(__file__).parent.parent / "docs" / "FORMAT.md").read_text("utf-8")
    assert "A writer names a note it holds" in docs and "is taken, and read as" not in docs

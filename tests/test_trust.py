"""Trust at the edges: what a new user and a script meet first.

An edit must not destroy by accident, a draft is never lost, a forgotten secret leaves
every file qem wrote, different notes merge whatever the other writer did, output is
something a script can use, reads work where writes cannot, and the docs say what the
commands do.  Each test here was written against the behaviour it corrects and failed
there first.  (The terminal prompts are in test_trust_tty.py.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _edit_support import (
    ACTIVE_DIRECTIVE,
    ACTIVE_FINDING,
    ACTIVE_GOTCHA,
    ACTIVE_TASK,
    MULTILINE,
    REVOKED,
    SEED_HEAD,
    TEXTS,
    aliases,
    events,
    head,
    make_editor,
    notes,
    resume_id,
    seed,
    shorts,
)
from conftest import run_qem

REASON = "tidy up"
# read at import: the autouse fixture clears every QEM_ variable before a test runs
UPDATE_GOLDEN = os.environ.get("QEM_UPDATE_GOLDEN") == "1"


@pytest.fixture
def seeded(ws: Path) -> Path:
    seed(ws)
    return ws


def edit(ws: Path, tmp_path: Path, body: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    editor = make_editor(tmp_path, body, name=f"ed{time.monotonic_ns()}.py")
    full = {"QEM_EDITOR": editor, "QEM_TEST_RECORD": str(tmp_path / "record")}
    full.update(env or {})
    return run_qem("edit", *args, cwd=ws, env=full, input="")


def kept(ws: Path) -> list[Path]:
    root = ws / ".qem" / "checkouts"
    return sorted(root.iterdir()) if root.is_dir() else []


# -- an edit must not destroy by accident -------------------------------------------------------------


def test_a_checkout_cut_short_by_the_editor_is_refused_naming_the_missing_sections(seeded: Path, tmp_path: Path) -> None:
    done = edit(seeded, tmp_path, "text = '\\n'.join(text.split('\\n')[:11]) + '\\n'", "-m", REASON, "--yes")
    assert done.returncode == 2, done.stderr
    assert "the section `## Findings` is missing" in done.stderr
    assert "the section `## Operational` is missing" in done.stderr
    assert head(seeded) == SEED_HEAD
    assert len(kept(seeded)) == 1  # the edit is kept


def test_a_deleted_section_heading_is_refused_not_read_as_deletions(seeded: Path, tmp_path: Path) -> None:
    done = edit(seeded, tmp_path, "sub('## Tasks\\n', '')", "-m", REASON, "--yes")
    assert done.returncode == 2, done.stderr
    assert re.search(r"line \d+: the section `## Tasks` is missing", done.stderr), done.stderr
    assert head(seeded) == SEED_HEAD


def test_a_narrowed_checkout_whose_header_lost_its_kinds_is_refused(seeded: Path, tmp_path: Path) -> None:
    body = "text = text.replace(' kinds=gotcha', '', 1)"
    done = edit(seeded, tmp_path, body, "--kind", "gotcha", "-m", REASON, "--yes")
    assert done.returncode == 2, done.stderr
    assert "line 1: the header line was changed" in done.stderr and "kinds=gotcha" in done.stderr
    assert head(seeded) == SEED_HEAD


def _many_notes(ws: Path, count: int) -> None:
    for i in range(count):
        assert run_qem("add", f"finding number {i:02d}", "-k", "finding", cwd=ws).returncode == 0


def test_revoking_a_quarter_of_the_notes_needs_allow_mass_change(ws: Path, tmp_path: Path) -> None:
    _many_notes(ws, 20)
    drop_six = "\n".join(f"drop('finding number {i:02d}')" for i in range(6))
    done = edit(ws, tmp_path, drop_six, "-m", REASON, "--yes")
    assert done.returncode == 2, done.stderr
    assert "6 of the checkout's 20 live notes" in done.stderr and "--allow-mass-change" in done.stderr
    assert head(ws) == 20
    [checkout] = kept(ws)
    again = run_qem("checkin", "--path", str(checkout / "MEMORY.md"), "-m", REASON, "--yes", "--allow-mass-change",
                    cwd=ws, input="")
    assert again.returncode == 0, again.stderr
    assert sum(1 for e in events(ws, after=20) if e.type == "revoked") == 6


def test_a_few_revocations_need_no_extra_confirmation(ws: Path, tmp_path: Path) -> None:
    _many_notes(ws, 20)
    done = edit(ws, tmp_path, "\n".join(f"drop('finding number {i:02d}')" for i in range(5)), "-m", REASON, "--yes")
    assert done.returncode == 0, done.stderr


def unknown_id(ws: Path, note: int = ACTIVE_TASK) -> str:
    """An editor body that makes the item of `note` name a note that does not exist."""
    return f"sub('[#{shorts(ws)[note]}]', '[#404]')"


def test_emptying_a_resumed_edit_keeps_it(seeded: Path, tmp_path: Path) -> None:
    first = edit(seeded, tmp_path, unknown_id(seeded), "-m", REASON, "--yes")
    assert first.returncode == 2, first.stderr
    checkout = resume_id(first.stderr)
    before = (seeded / ".qem" / "checkouts" / checkout / "MEMORY.md").read_bytes()
    done = run_qem("edit", "--resume", checkout, cwd=seeded, env={"QEM_EDITOR": "truncate -s 0"}, input="")
    assert done.returncode == 2, done.stderr
    assert "empty" in done.stderr and f"qem edit --resume {checkout}" in done.stderr
    path = seeded / ".qem" / "checkouts" / checkout / "MEMORY.md"
    assert path.is_file()
    assert head(seeded) == SEED_HEAD
    assert before  # the emptied file stays where it is said to be, for the person to refill


def test_an_editor_that_returns_at_once_keeps_the_checkout_and_says_wait(seeded: Path) -> None:
    done = run_qem("edit", cwd=seeded, env={"QEM_EDITOR": "true"}, input="")
    assert done.returncode == 0, done.stderr
    assert "--wait" in done.stderr and "qem edit --resume" in done.stderr
    assert len(kept(seeded)) == 1
    assert head(seeded) == SEED_HEAD


def test_no_editor_on_a_dumb_terminal_is_refused_before_anything_is_made(seeded: Path) -> None:
    env = {"TERM": "dumb", "QEM_EDITOR": "", "VISUAL": "", "EDITOR": ""}
    done = run_qem("edit", cwd=seeded, env=env, input="", timeout=20)
    assert done.returncode == 2, done.stderr
    assert "no editor" in done.stderr and "EDITOR" in done.stderr and "qem checkout" in done.stderr
    assert kept(seeded) == []


def test_no_editor_and_no_terminal_is_refused_rather_than_vi_started(seeded: Path) -> None:
    """An agent's shell (stdin a pipe) with no editor set: vi would wait for a terminal
    that is not there, for ever; qem says what to set instead."""
    env = {"TERM": "xterm", "QEM_EDITOR": "", "VISUAL": "", "EDITOR": ""}
    done = run_qem("edit", cwd=seeded, env=env, input="", timeout=20)
    assert done.returncode == 2, done.stderr
    assert "no editor and no terminal" in done.stderr and "EDITOR" in done.stderr
    assert kept(seeded) == []


def test_a_checkout_is_not_taken_for_now_by_a_rebuilt_index(seeded: Path) -> None:
    """A check-in reuses a checkout's base as the rendering now while the index has not
    moved since (its generation); an index rebuilt meanwhile counts generations anew, so
    a base is tied to the index it was made from, and a change made after the rebuild
    still conflicts with the edit instead of being overwritten by it."""
    kept_file = Path(run_qem("checkout", cwd=seeded).stdout.strip())
    record = json.loads((kept_file.parent / "session.json").read_text("utf-8"))
    index_id, generation = record["moment"].split(":")
    for side in seeded.joinpath(".qem").glob("index.db*"):
        side.unlink()  # rebuilt by the next command
    task = shorts(seeded)[ACTIVE_TASK]
    assert run_qem("revoke", task, "-m", "done elsewhere", "--actor", "other", cwd=seeded).returncode == 0
    index = seeded / ".qem" / "index.db"
    conn = sqlite3.connect(index)
    with conn:  # the rebuilt index at the checkout's generation, by chance
        conn.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (generation,))
        assert conn.execute("SELECT value FROM meta WHERE key = 'index_id'").fetchone()[0] != index_id
    conn.close()
    text = kept_file.read_text("utf-8")
    line = next(line for line in text.splitlines() if line.startswith(f"- [#{task}]"))
    kept_file.write_text(text.replace(line, line + ", edited"), "utf-8")
    done = run_qem("checkin", "--path", str(kept_file), "-m", REASON, "--yes", cwd=seeded)
    assert done.returncode == 3, done.stderr  # your supersession against their revocation
    assert notes(seeded)[ACTIVE_TASK].state == "revoked"


# -- the checkout explains itself ----------------------------------------------------------------------


def test_a_checkout_ends_with_how_to_edit_it_and_the_comment_is_stripped(seeded: Path) -> None:
    done = run_qem("checkout", cwd=seeded)
    path = Path(done.stdout.strip())
    text = path.read_text("utf-8")
    tail = text[text.index("<!-- qem:help"):]
    for words in ("revoke", "supersede", "new note", "STALE (", "REVOKED (", "EXPIRED", "reinstate", "human"):
        assert words in tail, words
    assert text.endswith("-->\n")
    # nothing in it is read as an edit; changing it changes nothing either
    path.write_text(text.replace("revokes the note", "REVOKES THE NOTE"), "utf-8")
    dry = run_qem("checkin", "--path", str(path), "--dry-run", cwd=seeded)
    assert dry.returncode == 0, dry.stderr
    assert "no changes" in dry.stderr


def test_a_copy_of_a_checkout_is_read_against_its_own_base(seeded: Path, tmp_path: Path) -> None:
    """A checkout names the rendering it was made from in its help line, so a plain copy
    of it (no record of its own) is checked in against that base: a note others added
    since is not read as deleted, a note expired since is not put back."""
    kept_file = Path(run_qem("checkout", cwd=seeded).stdout.strip())
    assert re.search(r"^<!-- qem:help base=[0-9a-f]{16} ", kept_file.read_text("utf-8"), re.M)
    copy = tmp_path / "copy.md"
    shutil.copyfile(kept_file, copy)
    added = run_qem("add", "added by another writer meanwhile", "-k", "task", cwd=seeded).stdout.strip()
    gotcha = shorts(seeded)[ACTIVE_GOTCHA]
    assert run_qem("expire", gotcha, "-m", "expired meanwhile", cwd=seeded).returncode == 0
    task = shorts(seeded)[ACTIVE_TASK]
    text = copy.read_text("utf-8")
    line = next(line for line in text.splitlines() if line.startswith(f"- [#{task}]"))
    copy.write_text(text.replace(line, line + ", edited in the copy"), "utf-8")
    done = run_qem("checkin", "--path", str(copy), "--dry-run", "--json", cwd=seeded)
    assert done.returncode == 1, done.stderr
    ops = json.loads(done.stdout)["operations"]
    assert [op["action"] for op in ops] == ["supersede"], ops  # the edit, and nothing of the others' undone
    assert run_qem("checkin", "--path", str(copy), "-m", REASON, "--yes", cwd=seeded).returncode == 0
    assert notes(seeded)[_by_short(seeded, added)].state == "active"
    assert notes(seeded)[ACTIVE_GOTCHA].state == "expired"

    # once this clone keeps that base nowhere, the copy is refused, not guessed at
    assert run_qem("checkouts", "--discard-all", cwd=seeded).returncode == 0
    before = head(seeded)
    copy.write_text(text.replace(line, line + ", edited again"), "utf-8")
    refused = run_qem("checkin", "--path", str(copy), "-m", REASON, "--yes", cwd=seeded)
    assert refused.returncode == 3 and "no longer keeps" in refused.stderr, refused.stderr
    assert head(seeded) == before and "edited again" in copy.read_text("utf-8")


# -- a secret forgotten is forgotten everywhere qem wrote it -------------------------------------------


SECRET = "the staging password is hunter2-correct-horse"


def _by_short(ws: Path, short: str) -> str:
    """The full id of the note shown as `short` (what `qem add` prints)."""
    [found] = [note_id for note_id, shown in shorts(ws).items() if shown == short and isinstance(note_id, str)]
    return found


def test_forget_scrubs_kept_edits_and_the_mirror(ws: Path, tmp_path: Path) -> None:
    note = run_qem("add", SECRET, "-k", "reference", cwd=ws).stdout.strip()
    other = run_qem("add", "an honest note", "-k", "task", cwd=ws).stdout.strip()
    assert run_qem("export", cwd=ws).returncode == 0
    # a kept edit holding the secret (refused: it names a note that does not exist)
    first = edit(ws, tmp_path, "under('Tasks', '- [#99] 2026-01-01 · medium · agent · bogus')", "-m", REASON, "--yes")
    assert first.returncode == 2
    done = run_qem("forget", note, "-m", "leaked", "--yes", cwd=ws)
    assert done.returncode == 0, done.stderr
    written = [p for p in (ws / ".qem" / "checkouts").rglob("*") if p.is_file()] + [ws / "MEMORY.md"]
    for path in written:
        assert b"hunter2" not in path.read_bytes(), path
    assert "git" in done.stderr  # and what git history still holds is said
    # the kept edit still checks in once its bogus line is gone, and the secret stays gone
    checkout = resume_id(first.stderr)
    fix = make_editor(tmp_path, "drop('bogus')")
    again = run_qem("edit", "--resume", checkout, "-m", REASON, "--yes", cwd=ws, env={"QEM_EDITOR": fix}, input="")
    assert again.returncode == 0, again.stderr
    assert notes(ws)[_by_short(ws, other)].state == "active"


def test_forget_names_a_file_it_could_not_scrub(ws: Path, tmp_path: Path) -> None:
    note = run_qem("add", SECRET, "-k", "reference", cwd=ws).stdout.strip()
    # the secret copied into a new note of a kept edit: not the forgotten note's item
    first = edit(ws, tmp_path, f"under('Tasks', '- {SECRET}', '- [#99] 2026-01-01 · medium · agent · bogus')",
                 "-m", REASON, "--yes")
    assert first.returncode == 2
    done = run_qem("forget", note, "-m", "leaked", "--yes", cwd=ws)
    assert done.returncode == 0, done.stderr
    path = ws / ".qem" / "checkouts" / resume_id(first.stderr) / "MEMORY.md"
    assert str(path) in done.stderr and "still" in done.stderr


# -- different notes merge, whatever the other writer did ----------------------------------------------


@pytest.mark.parametrize("revoked_first", [False, True])
def test_a_concurrent_forget_of_an_untouched_note_merges(seeded: Path, tmp_path: Path, revoked_first: bool) -> None:
    if revoked_first:
        assert run_qem("revoke", str(ACTIVE_FINDING), "-m", "wrong", cwd=seeded).returncode == 0
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=seeded).returncode == 0
    assert run_qem("forget", str(ACTIVE_FINDING), "-m", "leaked", "--yes", cwd=seeded).returncode == 0
    unchanged = run_qem("checkin", "--path", str(out), "-m", REASON, "--yes", cwd=seeded)
    assert unchanged.returncode == 0, unchanged.stderr
    text = out.read_text("utf-8")
    out.write_text(text.replace(TEXTS[ACTIVE_TASK], TEXTS[ACTIVE_TASK] + ", today"), "utf-8")
    other = run_qem("checkin", "--path", str(out), "-m", REASON, "--yes", cwd=seeded)
    assert other.returncode == 0, other.stderr
    assert notes(seeded)[ACTIVE_TASK].state == "superseded"
    assert notes(seeded)[ACTIVE_FINDING].state == "forgotten"


def test_edit_merges_a_concurrent_forget_of_an_untouched_note(seeded: Path, tmp_path: Path) -> None:
    body = f"qem('forget', '{ACTIVE_FINDING}', '-m', 'leaked', '--yes')\ndrop({TEXTS[ACTIVE_TASK]!r})"
    done = edit(seeded, tmp_path, body, "-m", REASON, "--yes")
    assert done.returncode == 0, done.stderr
    assert notes(seeded)[ACTIVE_TASK].state == "revoked"


def test_edit_merges_a_concurrent_forget_of_a_note_it_deleted(seeded: Path, tmp_path: Path) -> None:
    """The editor is open while another writer forgets a note the person deletes: both
    took it out, and the rest of the edit lands.  (The forget scrubs the kept base, whose
    tombstone then read as the person deleting a forgotten note, which is refused.)"""
    body = (f"qem('forget', '{ACTIVE_FINDING}', '-m', 'leaked', '--yes')\n"
            f"drop({TEXTS[ACTIVE_FINDING]!r})\ndrop({TEXTS[ACTIVE_TASK]!r})")
    done = edit(seeded, tmp_path, body, "-m", REASON, "--yes")
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    assert after[ACTIVE_FINDING].state == "forgotten" and after[ACTIVE_TASK].state == "revoked"
    names = aliases(seeded)
    assert [(names[e.note], e.type) for e in events(seeded, after=SEED_HEAD)] == [
        (ACTIVE_FINDING, "forgotten"), (ACTIVE_TASK, "revoked")]
    assert kept(seeded) == []


def test_a_kept_edit_that_deleted_a_note_forgotten_since_checks_in(seeded: Path) -> None:
    path = Path(run_qem("checkout", cwd=seeded).stdout.strip())
    text = path.read_text("utf-8")
    lines = [line for line in text.split("\n") if TEXTS[ACTIVE_FINDING] not in line and TEXTS[ACTIVE_TASK] not in line]
    path.write_text("\n".join(lines), "utf-8")
    assert run_qem("forget", str(ACTIVE_FINDING), "-m", "leaked", "--yes", cwd=seeded).returncode == 0
    done = run_qem("checkin", "-m", REASON, "--yes", cwd=seeded, input="")
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    assert after[ACTIVE_FINDING].state == "forgotten" and after[ACTIVE_TASK].state == "revoked"
    assert head(seeded) == SEED_HEAD + 2  # the forget and your revoke, nothing else


# -- output a script can use -----------------------------------------------------------------------------


def test_a_dry_run_prints_its_plan_on_stdout_and_exits_1_when_there_are_changes(seeded: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=seeded).returncode == 0
    same = run_qem("checkin", "--path", str(out), "--dry-run", cwd=seeded)
    assert same.returncode == 0, same.stderr
    out.write_text(out.read_text("utf-8").replace(TEXTS[ACTIVE_TASK], "Review the retry PR twice"), "utf-8")
    dry = run_qem("checkin", "--path", str(out), "--dry-run", cwd=seeded)
    assert dry.returncode == 1, dry.stderr
    assert f"~ supersede #{shorts(seeded)[ACTIVE_TASK]} " in dry.stdout and "Plan: 1 supersede" in dry.stdout
    as_json = run_qem("checkin", "--path", str(out), "--dry-run", "--json", cwd=seeded)
    assert as_json.returncode == 1, as_json.stderr
    plan = json.loads(as_json.stdout)
    assert plan["status"] == "dry_run" and '\n  "status": "dry_run",\n' in as_json.stdout  # the outcome's words, as before
    assert plan["changes"] is True and plan["conflicts"] == [] and plan["errors"] == []
    [op] = plan["operations"]
    assert (op["action"], op["note"], op["text"]) == ("supersede", notes(seeded)[ACTIVE_TASK].id, "Review the retry PR twice")
    assert head(seeded) == SEED_HEAD
    done = run_qem("checkin", "--path", str(out), "-m", REASON, "--yes", cwd=seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [shorts(seeded)[notes(seeded)[ACTIVE_TASK].superseded_by]]  # the new note's short id


def test_a_failed_dry_run_keeps_nothing(seeded: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=seeded).returncode == 0
    out.write_text(out.read_text("utf-8").replace("## Tasks\n", "## Tasks\nstray words\n"), "utf-8")
    for _ in range(3):
        dry = run_qem("checkin", "--path", str(out), "--dry-run", cwd=seeded)
        assert dry.returncode == 2, dry.stderr
    assert [p for p in kept(seeded) if (p / "MEMORY.md").exists()] == []


def test_kept_edits_are_listed_and_discarded(seeded: Path, tmp_path: Path) -> None:
    bad = unknown_id(seeded)
    firsts = [edit(seeded, tmp_path, bad, "-m", REASON, "--yes") for _ in range(2)]
    assert all(first.returncode == 2 and "no note #404" in first.stderr for first in firsts)
    ids = [resume_id(first.stderr) for first in firsts]
    listed = run_qem("checkouts", cwd=seeded)
    assert listed.returncode == 0, listed.stderr
    for checkout in ids:
        assert checkout in listed.stdout
    assert re.search(r"\bago\b|\bs\b|\bmin\b", listed.stdout)
    one = run_qem("checkouts", "--discard", ids[0], cwd=seeded)
    assert one.returncode == 0, one.stderr
    assert [p.name for p in kept(seeded)] == [ids[1]]
    everything = run_qem("checkouts", "--discard-all", cwd=seeded)
    assert everything.returncode == 0 and kept(seeded) == []


@pytest.mark.parametrize("argv", [["list"], ["log"], ["export", "--stdout"], ["query", "kind=task"]])
def test_a_closed_pipe_ends_quietly(seeded: Path, argv: list[str]) -> None:
    for _ in range(40):  # enough output to outgrow the pipe after head has gone
        assert run_qem("add", "filler " * 40, "-k", "task", cwd=seeded).returncode == 0
    command = " ".join([sys.executable, "-m", "qem_edit", *argv]) + " | head -1 >/dev/null; echo ${PIPESTATUS[0]}"
    done = subprocess.run(["bash", "-c", command], cwd=seeded, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stderr
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr


def test_query_count_prints_a_bare_number(seeded: Path) -> None:
    done = run_qem("query", "kind=gotcha", "--count", cwd=seeded)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2\n"
    assert done.stderr.startswith("scope: ")


def test_ok_goes_to_one_stream(seeded: Path) -> None:
    assert run_qem("export", cwd=seeded).returncode == 0
    for argv in (["export", "--check"], ["verify"]):
        done = run_qem(*argv, cwd=seeded)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("ok: ") and "ok" not in done.stdout, argv


def test_json_outputs_share_one_style(seeded: Path) -> None:
    for argv in (["show", "1"], ["list"], ["log", "1"], ["status", "1"], ["query", "kind=task"], ["verify"]):
        done = run_qem(*argv, "--json", cwd=seeded)
        assert done.returncode == 0, (argv, done.stderr)
        data = json.loads(done.stdout)
        assert done.stdout == json.dumps(data, ensure_ascii=False, indent=2) + "\n", argv


def test_version_and_help_on_query(seeded: Path) -> None:
    version = run_qem("--version", cwd=seeded)
    assert version.returncode == 0 and re.fullmatch(r"qem \d+\.\d+\.\d+\n", version.stdout), version
    helped = run_qem("query", "-h", cwd=seeded)
    assert helped.returncode == 0, helped.stderr
    assert "Exact filters" in helped.stdout


# -- reads work where writes cannot ------------------------------------------------------------------------


@contextlib.contextmanager
def read_only_mount(directory: Path):
    """`directory` as a read-only mount (a bind mount remounted read-only); skipped where
    this machine cannot mount."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to make a read-only mount")
    bind = subprocess.run(["mount", "--bind", str(directory), str(directory)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(directory)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def test_reads_work_on_a_read_only_mount_and_writes_refuse_clearly(seeded: Path) -> None:
    assert run_qem("export", cwd=seeded).returncode == 0
    with read_only_mount(seeded):
        for argv in (["list"], ["show", "1"], ["export", "--stdout"], ["export", "--check"], ["query", "kind=task"]):
            done = run_qem(*argv, cwd=seeded)
            assert done.returncode == 0, (argv, done.stderr)
        write = run_qem("add", "x", "-k", "task", cwd=seeded)
        assert write.returncode == 2
        assert "read-only" in write.stderr and "Traceback" not in write.stderr


# -- docs match behaviour --------------------------------------------------------------------------------


def test_resume_without_an_id_takes_the_latest_kept_edit(seeded: Path, tmp_path: Path) -> None:
    first = edit(seeded, tmp_path, unknown_id(seeded), "-m", REASON, "--yes")
    assert first.returncode == 2
    fix = make_editor(tmp_path, f"sub('[#404]', '[#{shorts(seeded)[ACTIVE_TASK]}]')", name="fix.py")
    done = run_qem("edit", "--resume", "-m", REASON, "--yes", cwd=seeded, env={"QEM_EDITOR": fix}, input="")
    assert done.returncode == 0, done.stderr
    assert kept(seeded) == []


def test_a_one_word_edit_of_a_long_note_shows_a_short_plan(ws: Path, tmp_path: Path) -> None:
    long_text = "\n".join(f"line {i} of a very long note" for i in range(15_000))
    note = run_qem("add", "-", "-k", "reference", cwd=ws, input=long_text).stdout.strip()
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=ws).returncode == 0
    out.write_text(out.read_text("utf-8").replace("line 7000 of", "line 7000 in"), "utf-8")
    dry = run_qem("checkin", "--path", str(out), "--dry-run", cwd=ws)
    assert dry.returncode == 1, dry.stderr
    lines = dry.stdout.split("\n")
    assert len(lines) < 40, len(lines)
    assert any("- line 7000 of" in line for line in lines) and any("+ line 7000 in" in line for line in lines)
    assert any("unchanged" in line for line in lines)
    assert note


def test_a_change_only_in_unicode_normalization_is_marked(ws: Path, tmp_path: Path) -> None:
    note = run_qem("add", "Caf\u00e9 opens at nine", "-k", "finding", cwd=ws).stdout.strip()
    out = tmp_path / "mine.md"
    assert run_qem("checkout", "--path", str(out), cwd=ws).returncode == 0
    out.write_text(out.read_text("utf-8").replace("Caf\u00e9", "Cafe\u0301"), "utf-8")
    dry = run_qem("checkin", "--path", str(out), "--dry-run", cwd=ws)
    assert dry.returncode == 1, dry.stderr
    assert "Unicode normalization" in dry.stdout
    assert note


@contextlib.contextmanager
def tiny_filesystem(directory: Path, size: str = "96k"):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to make a small file system")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def test_a_full_disk_names_the_path_and_leaves_no_empty_checkout(tmp_path: Path) -> None:
    ws = tmp_path / "full"
    with tiny_filesystem(ws, "4m"):
        for i in range(20):
            assert run_qem("add", f"note {i} " + "x" * 20_000, "-k", "task", cwd=ws).returncode == 0
        assert run_qem("list", cwd=ws).returncode == 0  # the store reads (its -shm is there)
        stat = os.statvfs(ws)
        room = stat.f_bavail * stat.f_frsize
        (ws / "filler").write_bytes(b"\0" * max(room - 64 * 1024, 0))  # 64 KiB left: less than a checkout
        done = run_qem("checkout", cwd=ws)
        assert done.returncode == 2, done.stderr
        assert str(ws / ".qem" / "checkouts") in done.stderr and "No space left" in done.stderr
        root = ws / ".qem" / "checkouts"
        assert not root.exists() or list(root.iterdir()) == []


# -- conflicts that say how to get out ---------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["yours", "theirs"])
def test_keeping_yours_for_a_note_superseded_meanwhile_works(seeded: Path, tmp_path: Path, keep: str) -> None:
    body = (
        f"qem('supersede', '{ACTIVE_GOTCHA}', 'The lock order is A then B, then C', '-m', 'theirs', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')"
    )
    first = edit(seeded, tmp_path, body, "-m", REASON, "--yes")
    assert first.returncode == 3, first.stderr
    checkout = resume_id(first.stderr)
    theirs = notes(seeded)[ACTIVE_GOTCHA].superseded_by
    kept_text = (seeded / ".qem" / "checkouts" / checkout / "MEMORY.md").read_text("utf-8")
    resolve = make_editor(tmp_path, f"record('rebased', text)\nresolve({keep!r})", name=f"resolve-{keep}.py")
    done = run_qem("edit", "--resume", checkout, "-m", REASON, "--yes", cwd=seeded,
                   env={"QEM_EDITOR": resolve, "QEM_TEST_RECORD": str(tmp_path / "record")}, input="")
    assert done.returncode == 0, done.stderr
    rebased = json.loads((tmp_path / "record.rebased").read_text())
    short = shorts(seeded)
    assert f"#{short[theirs]}, which replaced #{short[ACTIVE_GOTCHA]}" in rebased  # the block says what keeping yours does
    after = notes(seeded)
    if keep == "yours":
        assert after[theirs].state == "superseded"
        assert after[after[theirs].superseded_by].text == "The lock order is B then A"
    else:
        assert after[theirs].state == "active" and after[theirs].text == "The lock order is A then B, then C"
    assert kept_text  # the kept edit was readable before the resume


def test_the_error_comment_points_at_the_right_line_when_a_reason_spans_lines(seeded: Path, tmp_path: Path) -> None:
    from qem_edit.storage.store import Store
    from qem_edit.system.workspace import resolve as place_of
    from qem_edit.writes import checkin
    from qem_edit.writes.checkin_plan import propose
    from qem_edit.writes.kept_edits import find_checkout

    body = (
        f"qem('revoke', '{ACTIVE_GOTCHA}', '-m', 'first line\\nsecond line\\nthird line', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')\n"
        "sub('## Operational\\n', '## Operational\\nstray words\\n')"
    )
    first = edit(seeded, tmp_path, body, "-m", REASON, "--yes")
    assert first.returncode == 2, first.stderr
    place = place_of(seeded)
    checkout = find_checkout(place, resume_id(first.stderr))
    with Store.open(place.store_path) as store:
        proposal = propose(store, checkout.file.read_bytes(), checkout.base_file.read_bytes())
        checkin.reopen(store, checkout, proposal)
    lines = checkout.file.read_text("utf-8").split("\n")
    [pointer] = [line for line in lines if re.match(r"line \d+: text that is neither", line)]
    number = int(pointer.split()[1].rstrip(":"))
    assert lines[number - 1] == "stray words", (number, lines[number - 3:number + 2])


# -- what the docs say, held to it -------------------------------------------------------------------------


def test_a_crlf_copy_of_the_mirror_is_the_same_text(seeded: Path) -> None:
    assert run_qem("export", cwd=seeded).returncode == 0
    mirror = seeded / "MEMORY.md"
    crlf = mirror.read_bytes().replace(b"\n", b"\r\n")
    mirror.write_bytes(crlf)
    check = run_qem("export", "--check", cwd=seeded)
    assert check.returncode == 0 and check.stderr.startswith("ok: "), check.stderr
    assert run_qem("export", "--force", cwd=seeded).returncode == 0
    assert mirror.read_bytes() == crlf


def test_export_refuses_to_render_over_a_hand_edited_mirror(seeded: Path) -> None:
    assert run_qem("export", cwd=seeded).returncode == 0
    mirror = seeded / "MEMORY.md"
    edited = mirror.read_text("utf-8").replace(TEXTS[ACTIVE_TASK], "Review the retry PR by hand")
    mirror.write_text(edited, "utf-8")
    done = run_qem("export", cwd=seeded)
    assert done.returncode == 3 and "qem checkin --path" in done.stderr, done.stderr
    assert mirror.read_text("utf-8") == edited


def test_the_checkout_help_is_pinned_by_a_golden_file(tmp_path: Path) -> None:
    from builders import load_store
    from qem_edit.renderer import Selection, for_editing

    from qem_edit.mirror.export import render_store
    from qem_edit.writes.kept_edits import render_base

    golden = Path(__file__).resolve().parent.parent / "fixtures" / "golden"
    with load_store(tmp_path / ".qem", golden / "format_example.jsonl") as store:
        made = render_base(store, Selection(), tmp_path / "base.md")  # streamed, a chunk at a time
        whole = for_editing(render_store(store)[1].decode("utf-8")).encode("utf-8")
    rendered = (tmp_path / "base.md").read_bytes()
    assert rendered == whole
    heads, at = [], rendered.find(b"\n## ")
    while at >= 0:
        heads.append(at)
        at = rendered.find(b"\n## ", at + 4)
    assert made["base_heads"]["at"] == heads and made["calm"] is True
    target = golden / "checkout_example.md"
    if UPDATE_GOLDEN:
        target.write_bytes(rendered)
    assert rendered == target.read_bytes(), "run QEM_UPDATE_GOLDEN=1 and review fixtures/golden/checkout_example.md"
    assert rendered.startswith((golden / "format_example.md").read_bytes())


# -- a checkout written to a file never writes over what only that file holds ---------------------


def test_a_checkout_to_a_file_never_writes_over_what_only_it_holds(seeded: Path) -> None:
    """`qem checkout --path FILE` and `qem import markdown --path FILE` write over FILE only
    where nothing is lost: FILE absent, an earlier checkout there unchanged, or MEMORY.md as
    qem renders it.  A MEMORY.md edited by hand, an earlier checkout's edit not checked in,
    or a file qem did not write: refused (exit 2, naming the file and the way out), the file
    and the kept edits as they were; `--force` writes over it."""
    def checkout(name: str, *more: str, code: int = 0) -> subprocess.CompletedProcess:
        done = run_qem("checkout", "--path", name, *more, cwd=seeded)
        assert done.returncode == code and "Traceback" not in done.stderr, (name, done.stdout, done.stderr)
        return done

    assert run_qem("export", cwd=seeded).returncode == 0
    mirror = seeded / "MEMORY.md"
    rendered = mirror.read_bytes()
    mirror.write_bytes(rendered + b"- [ ] a hand note\n")
    mine = seeded / "notes.md"
    mine.write_bytes(b"my own notes\n")
    (seeded / "CLAUDE.md").write_text("- Run the tests inside .venv\n", "utf-8")
    before = {p: p.read_bytes() for p in (mirror, mine)}
    records = kept(seeded)
    for name, says in (("MEMORY.md", "checkin --path MEMORY.md"), ("notes.md", "not a checkout qem wrote")):
        done = checkout(name, code=2)
        assert says in done.stderr and "nothing was written" in done.stderr and "--force" in done.stderr, done.stderr
        done = run_qem("import", "markdown", "CLAUDE.md", "--path", name, cwd=seeded)
        assert done.returncode == 2 and says in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in (mirror, mine)} == before and kept(seeded) == records
    (seeded / "empty.md").write_bytes(b"")
    checkout("empty.md")  # nothing there to lose (a script's mktemp)
    checkout("fresh.md")
    checkout("fresh.md")  # unchanged since: written again
    fresh = seeded / "fresh.md"
    fresh.write_bytes(fresh.read_bytes() + b"- [ ] an edit\n")
    edited = fresh.read_bytes()
    assert "not checked in" in checkout("fresh.md", code=2).stderr and fresh.read_bytes() == edited
    checkout("notes.md", "--force")
    assert mine.read_bytes().startswith(b"<!--") and head(seeded) == SEED_HEAD
    mirror.write_bytes(rendered)
    checkout("MEMORY.md")  # the mirror as qem renders it: nothing to lose


def test_a_refused_check_in_names_the_file_it_read(seeded: Path) -> None:
    """`qem checkin` with no --path takes the latest kept edit: its refusal names that file,
    as it does one given by --path, whether the file is no qem file or one of its lines is
    wrong."""
    kept_file = Path(run_qem("checkout", cwd=seeded).stdout.strip())
    text = kept_file.read_text("utf-8")
    kept_file.write_text(text.replace("· medium ·", "· mediumx ·", 1), "utf-8")
    for args in ((), ("--path", str(kept_file))):
        done = run_qem("checkin", "--dry-run", *args, cwd=seeded)
        assert done.returncode == 2 and f"qem: error: {kept_file}: 1 problem(s)" in done.stderr, done.stderr
        assert "unknown priority 'mediumx'" in done.stderr
    kept_file.write_text(text.replace("· medium ·", "· low ·", 1), "utf-8")
    done = run_qem("checkin", "--path", str(kept_file), cwd=seeded, input="")  # no --yes, no terminal: not the file's fault
    assert done.returncode == 2 and "qem: error: no terminal to confirm" in done.stderr, done.stderr
    kept_file.write_text("no header here\n" + text, "utf-8")
    done = run_qem("checkin", "--dry-run", cwd=seeded)
    assert done.returncode == 2 and f"qem: error: {kept_file}: this is not a qem file: line 1" in done.stderr, done.stderr
    assert head(seeded) == SEED_HEAD

"""`qem edit`, `qem checkout` and `qem checkin`, end to end through the real CLI.

Every edit here is made by a scripted editor (see _edit_support.make_editor) that qem runs
the way it runs a person's editor.  Standard input is never a terminal, so each check-in
passes -m and --yes unless the test is about what happens without them.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _edit_support import (
    ACTIVE_DIRECTIVE,
    ACTIVE_FINDING,
    ACTIVE_GOTCHA,
    ACTIVE_TASK,
    EXPIRED,
    FORGOTTEN,
    MULTILINE,
    REVOKED,
    SEED_HEAD,
    STALE,
    SUCCESSOR,
    SUPERSEDED,
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
from builders import store_path
from conftest import CORPUS, run_qem
from qem_edit.renderer import for_editing

from qem_edit.storage.store import Store

REASON = "tidy up after the v2 migration"
# An editor that hands back an unchanged file at once is taken for a window that did not
# wait (the edit is kept); a person who looked and changed nothing takes longer.
UNHURRIED = "import time; time.sleep(1.1)"


@pytest.fixture
def ws(tmp_path: Path):
    """The workspace, on tmpfs where there is one: every write fsyncs, and on a disk that
    is most of these tests' time.  (Overrides conftest's `ws` for this module.)"""
    if not os.access("/dev/shm", os.W_OK):
        root = tmp_path / "ws"
        root.mkdir()
        yield root
        return
    parent = Path(tempfile.mkdtemp(prefix="qem-edit-test-", dir="/dev/shm"))
    root = parent / "ws"
    root.mkdir()
    yield root
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def seeded(ws: Path) -> Path:
    seed(ws)
    return ws


@pytest.fixture
def edit(ws: Path, tmp_path: Path):
    """edit(body, *extra_args) runs `qem edit -m REASON --yes` with `body` as the editor."""
    names = itertools.count()

    def run(body: str = "", *args: str, reason: str | None = REASON, yes: bool = True,
            env: dict | None = None, cwd: Path | None = None, suffix: str = ""):
        editor = make_editor(tmp_path, body, name=f"editor{next(names)}.py") + suffix
        argv = ["edit", *args]
        if reason is not None:
            argv += ["-m", reason]
        if yes:
            argv.append("--yes")
        full_env = {"QEM_EDITOR": editor, "QEM_TEST_RECORD": str(tmp_path / "record")}
        full_env.update(env or {})
        return run_qem(*argv, cwd=cwd or ws, env=full_env, input="")

    return run


def recorded(tmp_path: Path, name: str):
    return json.loads((tmp_path / f"record.{name}").read_text())


def checkouts(ws: Path) -> list[Path]:
    root = ws / ".qem" / "checkouts"
    return sorted(root.iterdir()) if root.is_dir() else []


def kept_file(ws: Path, stderr: str) -> Path:
    path = ws / ".qem" / "checkouts" / resume_id(stderr) / "MEMORY.md"
    assert path.is_file(), stderr
    return path


def assert_nothing_written(ws: Path, before: int = SEED_HEAD) -> None:
    assert head(ws) == before


def new_events(ws: Path, after: int = SEED_HEAD):
    return events(ws, after=after)


def moves(ws: Path, after: int = SEED_HEAD) -> list[tuple]:
    """(note, type) of each event since `after`: a seeded note by its old number, a note
    made since by its full id."""
    names = aliases(ws)
    return [(names[e.note], e.type) for e in new_events(ws, after)]


def memory_id(ws: Path) -> str:
    with Store.open(store_path(ws)) as store:
        return store.memory_id()


def log_texts(ws: Path) -> dict:  # type: ignore[type-arg]
    """Every note's text as the log holds it (checked against its created event)."""
    with Store.open(store_path(ws)) as store:
        return store.texts()


def _line_no(text: str, fragment: str) -> int:
    hits = [n for n, line in enumerate(text.split("\n"), 1) if fragment in line]
    assert len(hits) == 1, (fragment, text)
    return hits[0]


# -- each change maps to its events ---------------------------------------------------------


def test_deleting_an_item_revokes_it_with_the_checkins_reason(seeded: Path, edit) -> None:
    done = edit(f"drop({TEXTS[ACTIVE_TASK]!r})")
    assert done.returncode == 0, done.stderr
    assert "waiting for your editor" in done.stderr
    [event] = new_events(seeded)
    assert (aliases(seeded)[event.note], event.type, event.reason, event.actor) == (ACTIVE_TASK, "revoked", REASON, "tester")
    after = notes(seeded)
    assert after[ACTIVE_TASK].state == "revoked"
    assert after[ACTIVE_TASK].text == TEXTS[ACTIVE_TASK]
    assert checkouts(seeded) == []  # a check-in that landed removes its checkout


@pytest.mark.parametrize(
    "change, kind, priority, text",
    [
        ("sub('The lock order is A then B', 'The lock order is B then A')", "gotcha", "medium", "The lock order is B then A"),
        ("sub('medium · agent · The lock order', 'low · agent · The lock order')", "gotcha", "low", TEXTS[ACTIVE_GOTCHA]),
        # moving the item under another section changes its kind
        (f"item = line_with({TEXTS[ACTIVE_GOTCHA]!r}); drop({TEXTS[ACTIVE_GOTCHA]!r}); under('Findings', item)",
         "finding", "medium", TEXTS[ACTIVE_GOTCHA]),
        # a text change that adds a second line
        ("sub('The lock order is A then B', 'The lock order is A then B\\n  except on Windows')",
         "gotcha", "medium", "The lock order is A then B\nexcept on Windows"),
    ],
    ids=["text", "priority", "section", "more-lines"],
)
def test_changing_text_priority_or_kind_supersedes(seeded: Path, edit, change: str, kind: str, priority: str, text: str) -> None:
    done = edit(change)
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    old = after[ACTIVE_GOTCHA]
    assert old.state == "superseded" and old.text == TEXTS[ACTIVE_GOTCHA]
    new = after[old.superseded_by]
    assert (new.kind, new.priority, new.text, new.provenance) == (kind, priority, text, "human")
    assert new.supersedes == old.id and new.state == "active"
    created, superseded = new_events(seeded)
    assert created.type == "created" and created.note == new.id and created.reason == REASON
    assert superseded.type == "superseded" and superseded.note == old.id
    assert superseded.data == {"by": new.id} and superseded.reason == REASON
    # the old text stays in the log (its text record, checked against its created event)
    [old_created] = [e for e in events(seeded) if e.note == old.id and e.type == "created"]
    assert old_created.id == old.id and log_texts(seeded)[old.id] == TEXTS[ACTIVE_GOTCHA]


def test_new_items_are_created_with_kind_from_section_and_priority(seeded: Path, edit) -> None:
    body = (
        "under('Tasks', '- write the release notes', '- high · rotate the signing key',"
        " '- low · tidy the bench', '  across two lines')\n"
        "under('Operational', '- medium · high · is part of this text')"
    )
    done = edit(body)
    assert done.returncode == 0, done.stderr
    created = {n.text: n for n in notes(seeded).values() if n.alias is None}  # made since the seed
    assert {t: (n.kind, n.priority, n.provenance, n.state, n.supersedes) for t, n in created.items()} == {
        "write the release notes": ("task", "medium", "human", "active", None),
        "rotate the signing key": ("task", "high", "human", "active", None),
        "tidy the bench\nacross two lines": ("task", "low", "human", "active", None),
        "high · is part of this text": ("operational", "medium", "human", "active", None),
    }
    assert {e.type for e in new_events(seeded)} == {"created"}


def test_raising_provenance_to_human_promotes(seeded: Path, edit) -> None:
    done = edit("sub('agent · The cache misses', 'human · The cache misses')")
    assert done.returncode == 0, done.stderr
    [event] = new_events(seeded)
    assert (aliases(seeded)[event.note], event.type, event.data, event.reason) == (ACTIVE_FINDING, "promoted", {"from": "agent"}, REASON)
    note = notes(seeded)[ACTIVE_FINDING]
    assert (note.provenance, note.state, note.text) == ("human", "active", TEXTS[ACTIVE_FINDING])


def test_adding_a_stale_marker_flags_the_note(seeded: Path, edit) -> None:
    done = edit("sub('low · agent · The cache', 'low · agent · STALE (needs a recheck) · The cache')")
    assert done.returncode == 0, done.stderr
    [event] = new_events(seeded)
    assert (aliases(seeded)[event.note], event.type) == (ACTIVE_FINDING, "stale_flagged")
    # the marker's own reason is the flag's reason (it is what the file will show again)
    assert event.reason == "needs a recheck"
    assert event.checkin is not None
    assert notes(seeded)[ACTIVE_FINDING].state == "stale"


def test_a_marker_without_its_own_reason_takes_the_checkins(seeded: Path, edit) -> None:
    done = edit("sub('low · agent · The cache', 'low · agent · STALE · The cache')")
    assert done.returncode == 0, done.stderr
    [event] = new_events(seeded)
    assert (event.type, event.reason) == ("stale_flagged", REASON)


@pytest.mark.parametrize("note_id, word", [(REVOKED, "REVOKED"), (STALE, "STALE"), (EXPIRED, "EXPIRED")])
def test_removing_a_state_marker_reinstates(seeded: Path, edit, note_id: int, word: str) -> None:
    done = edit(f"import re\ntext = re.sub(r'{word} [0-9-]+ \\([^)]*\\) · ', '', text)")
    assert done.returncode == 0, done.stderr
    [event] = new_events(seeded)
    assert (aliases(seeded)[event.note], event.type, event.reason) == (note_id, "reinstated", REASON)
    note = notes(seeded)[note_id]
    assert note.state == "active" and note.text == TEXTS[note_id]


def test_removing_revoked_marker_and_changing_text_reinstates_then_supersedes(seeded: Path, edit) -> None:
    done = edit("import re\ntext = re.sub(r'REVOKED [0-9-]+ \\(fixed upstream\\) · Old flaky test note', 'Flaky again on ARM', text)")
    assert done.returncode == 0, done.stderr
    got = moves(seeded)
    new_id = notes(seeded)[REVOKED].superseded_by
    assert got == [(REVOKED, "reinstated"), (new_id, "created"), (REVOKED, "superseded")]
    assert notes(seeded)[new_id].text == "Flaky again on ARM"


# What each kind of editor noise plans (nothing) is in fixtures/checkin/noise-*.case; here, one
# edit with all of it, through the CLI: "no changes", nothing written, the checkout removed.
ALL_NOISE = (
    # swap two items in a section, move the last section to the top
    "a = line_with('The lock order'); b = line_with('Old flaky')\n"
    "text = text.replace(a, '@A@').replace(b, a).replace('@A@', b)\n"
    "head, rest = text.split('\\n', 1)\n"
    "rest, op = rest.split('## Operational')\n"
    "text = head + '\\n\\n## Operational' + op.rstrip('\\n') + '\\n' + rest\n"
    # a BOM, CRLF, a trailing space on every line, no final newline
    "text = '\\ufeff' + '\\r\\n'.join(line + ' ' for line in text.split('\\n')).rstrip()"
)


def test_reordering_and_editor_noise_change_nothing(seeded: Path, edit) -> None:
    done = edit(ALL_NOISE)
    assert done.returncode == 0, done.stderr
    assert "no changes" in done.stderr
    assert_nothing_written(seeded)
    assert checkouts(seeded) == []


def test_an_emptied_file_is_kept_not_taken_for_no_change(seeded: Path, edit) -> None:
    done = edit("text = ''")
    assert done.returncode == 2, done.stderr
    assert "the file is empty" in done.stderr and "qem edit --resume" in done.stderr
    assert_nothing_written(seeded)
    assert len(checkouts(seeded)) == 1


def test_emptying_a_resumed_edit_keeps_the_draft_as_it_was(seeded: Path, edit) -> None:
    """A kept edit (a change not yet confirmed), reopened and emptied by the editor
    (`QEM_EDITOR="truncate -s 0"`): nothing is written and the draft is there as it was."""
    first = edit("sub('Run the tests', 'Always run the tests')", reason=None, yes=False)
    assert first.returncode == 2, first.stderr
    draft = kept_file(seeded, first.stderr)
    kept = draft.read_bytes()
    assert b"Always run the tests" in kept
    done = run_qem("edit", "--resume", "-m", REASON, "--yes", cwd=seeded, env={"QEM_EDITOR": "truncate -s 0"})
    assert done.returncode == 2, done.stderr
    assert "the file is empty" in done.stderr and "kept as it was" in done.stderr
    assert f"qem edit --resume {draft.parent.name}" in done.stderr
    assert draft.read_bytes() == kept  # the draft, not an empty file
    assert_nothing_written(seeded)
    again = edit("import time; time.sleep(1.2)", "--resume")  # and it checks in from there, unchanged
    assert again.returncode == 0, again.stderr
    assert "Always run the tests" in run_qem("list", cwd=seeded).stdout


# -- refusals: exit 2, the line named, nothing written, the edit kept ------------------------------

# Every refusal, with the exact lines qem gives, is a case in fixtures/checkin/ (refuse-*,
# parse-*); these few go through the CLI: an error in the file, one in the plan, a file
# that is not a qem file, and one that names no line.
REFUSALS = {
    "stray-text": ("sub('## Findings\\n', '## Findings\\nsome words the person typed\\n')", "neither a section heading", "some words"),
    "superseded-text": ("sub('Use JSON for the dump', 'Use YAML for the dump')", "superseded by #{s[8]}", "Use YAML"),
    "malformed-header": ("text = '# My memory\\n' + text.split('\\n', 1)[1]", "first line must be qem's header", "# My memory"),
    "history-deleted": ("drop('Use JSON for the dump')", "#{s[7]} (superseded) was deleted from the file", None),
}


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
def test_invalid_edits_are_refused_naming_the_line(seeded: Path, edit, case: str) -> None:
    body, message, fragment = REFUSALS[case]
    message = message.format(s=shorts(seeded))  # notes are named by the short ids the file shows
    # a valid change rides along, to show that nothing at all is applied
    done = edit(body + f"\ndrop({TEXTS[ACTIVE_TASK]!r})")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert_nothing_written(seeded)
    kept = kept_file(seeded, done.stderr).read_text("utf-8")
    assert TEXTS[ACTIVE_TASK] not in kept  # the edit is kept as the person left it
    if fragment is not None:
        assert re.search(rf"\bline {_line_no(kept, fragment)}\b", done.stderr), done.stderr


def test_an_invalid_edit_can_be_resumed_and_fixed(seeded: Path, edit) -> None:
    first = edit(REFUSALS["stray-text"][0] + f"\ndrop({TEXTS[ACTIVE_TASK]!r})")
    assert first.returncode == 2
    checkout = resume_id(first.stderr)
    # resuming reopens the kept file: the stray line and the deletion are both still there
    done = edit(
        f"assert {TEXTS[ACTIVE_TASK]!r} not in text\nsub('some words the person typed\\n', '')",
        "--resume", checkout,
    )
    assert done.returncode == 0, done.stderr
    assert moves(seeded) == [(ACTIVE_TASK, "revoked")]
    assert checkouts(seeded) == []


def test_resume_last_and_an_unknown_resume_id(seeded: Path, edit) -> None:
    assert edit("", "--resume", "last").returncode == 2  # nothing kept yet
    first = edit(REFUSALS["stray-text"][0])
    assert first.returncode == 2
    unknown = edit("", "--resume", "nope")
    assert unknown.returncode == 2 and resume_id(first.stderr) in unknown.stderr
    done = edit("sub('some words the person typed\\n', '')", "--resume", "last")
    assert done.returncode == 0, done.stderr
    assert "no changes" in done.stderr


# -- the session ----------------------------------------------------------------------------------


def test_checkout_is_private_and_named_memory_md(seeded: Path, edit, tmp_path: Path) -> None:
    body = (
        "st = os.stat(path); d = os.stat(os.path.dirname(path)); root = os.stat(os.path.dirname(os.path.dirname(path)))\n"
        "record('stat', {'path': path, 'file': st.st_mode, 'dir': d.st_mode, 'root': root.st_mode})"
    )
    done = edit(body)
    assert done.returncode == 0, done.stderr
    info = recorded(tmp_path, "stat")
    path = Path(info["path"])
    assert path.name == "MEMORY.md"
    assert path.parent.parent == seeded.resolve() / ".qem" / "checkouts"
    assert stat.S_IMODE(info["file"]) == 0o600
    assert stat.S_IMODE(info["dir"]) == 0o700
    assert stat.S_IMODE(info["root"]) == 0o700


def test_kind_narrows_the_checkout_and_leaves_other_notes_alone(seeded: Path, edit, tmp_path: Path) -> None:
    before = notes(seeded)
    body = (
        "record('text', text)\n"
        "drop('The lock order'); drop('Review the retry PR')\n"
        "under('Gotchas', '- high · a new gotcha')"
    )
    done = edit(body, "--kind", "gotcha", "--kind", "task")
    assert done.returncode == 0, done.stderr
    seen = recorded(tmp_path, "text")
    assert re.findall(r"^## (.*)$", seen, re.M) == ["Tasks", "Gotchas"]
    assert "kinds=task,gotcha" in seen.split("\n", 1)[0]
    after = notes(seeded)
    assert after[ACTIVE_GOTCHA].state == after[ACTIVE_TASK].state == "revoked"
    [new] = [n for n in after.values() if n.id not in before]
    assert (new.kind, new.priority, new.text) == ("gotcha", "high", "a new gotcha")
    for note_id, note in before.items():
        if note_id not in (before[ACTIVE_GOTCHA].id, before[ACTIVE_TASK].id):
            assert after[note_id] == note


def test_active_checkout_holds_live_notes_and_history_is_untouched(seeded: Path, edit, tmp_path: Path) -> None:
    before = notes(seeded)
    done = edit("record('text', text)\nsub('The cache misses on cold start', 'The cache misses on every start')", "--active")
    assert done.returncode == 0, done.stderr
    seen = recorded(tmp_path, "text")
    assert " active " in seen.split("\n", 1)[0]
    short = shorts(seeded)
    for note_id in (REVOKED, SUPERSEDED, FORGOTTEN, EXPIRED):
        assert f"[#{short[note_id]}]" not in seen  # not in the file, and not taken as deleted
    for note_id in (ACTIVE_DIRECTIVE, STALE, SUCCESSOR, MULTILINE):
        assert f"[#{short[note_id]}]" in seen
    after = notes(seeded)
    assert after[ACTIVE_FINDING].state == "superseded"
    finding = before[ACTIVE_FINDING].id
    assert {i: n for i, n in after.items() if i in before and i != finding} == {
        i: n for i, n in before.items() if i != finding
    }


@pytest.mark.parametrize(
    "present, term, chosen",
    [
        (("QEM_EDITOR", "VISUAL", "EDITOR"), "xterm", "QEM_EDITOR"),
        (("VISUAL", "EDITOR"), "xterm", "VISUAL"),
        (("VISUAL", "EDITOR"), "dumb", "EDITOR"),
        (("EDITOR",), "xterm", "EDITOR"),
        ((), "xterm", "vi"),
    ],
)
def test_editor_resolution(seeded: Path, tmp_path: Path, present: tuple, term: str, chosen: str) -> None:
    editor = make_editor(tmp_path, "record('who', args)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_vi = bin_dir / "vi"
    fake_vi.write_text(f"#!/bin/sh\nexec {editor} vi \"$@\"\n")
    fake_vi.chmod(0o755)
    env = {name: f"{editor} {name}" for name in present}
    env.update(TERM=term, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", QEM_TEST_RECORD=str(tmp_path / "record"))
    if chosen == "vi":  # vi is fallen back on only where there is a terminal to read from
        primary, terminal = os.openpty()
        try:
            done = subprocess.run([sys.executable, "-m", "qem_edit", "edit", "-m", REASON, "--yes"], cwd=seeded,
                                  env={**os.environ, **env}, stdin=terminal, capture_output=True, text=True,
                                  timeout=60)
        finally:
            os.close(primary)
            os.close(terminal)
    else:
        done = run_qem("edit", "-m", REASON, "--yes", cwd=seeded, env=env, input="")
    assert done.returncode == 0, done.stderr
    assert recorded(tmp_path, "who") == [chosen]


def test_editor_with_arguments_and_a_workspace_with_spaces(tmp_path: Path) -> None:
    ws = tmp_path / "my work space"
    ws.mkdir()
    seed(ws)
    scripts = tmp_path / "editor dir"
    scripts.mkdir()
    editor = make_editor(scripts, "record('seen', {'args': args, 'path': path})\ndrop('Review the retry PR')")
    env = {"QEM_EDITOR": f"{editor} --flag 'two words'", "QEM_TEST_RECORD": str(tmp_path / "record")}
    done = run_qem("edit", "-m", REASON, "--yes", cwd=ws, env=env, input="")
    assert done.returncode == 0, done.stderr
    seen = recorded(tmp_path, "seen")
    assert seen["args"] == ["--flag", "two words"]
    assert Path(seen["path"]).parent.parent == ws.resolve() / ".qem" / "checkouts"
    assert notes(ws)[ACTIVE_TASK].state == "revoked"


def test_one_reason_and_one_checkin_id_on_every_event(seeded: Path, edit, qem) -> None:
    body = (
        f"drop({TEXTS[ACTIVE_TASK]!r})\n"
        "sub('The lock order is A then B', 'The lock order is B then A')\n"
        "sub('low · agent · The cache', 'low · human · The cache')\n"
        "under('Decisions', '- keep the dump format stable')\n"
        "import re\ntext = re.sub(r'REVOKED [0-9-]+ \\(fixed upstream\\) · ', '', text)"
    )
    seeded_ids = {e.id for e in events(seeded)}
    done = edit(body)
    assert done.returncode == 0, done.stderr
    listed = qem("log", "--json")
    assert listed.returncode == 0
    mine = [e for e in json.loads(listed.stdout) if e["id"] not in seeded_ids]
    assert sorted(e["type"] for e in mine) == ["created", "created", "promoted", "reinstated", "revoked", "superseded"]
    assert {e["reason"] for e in mine} == {REASON}
    assert {e["actor"] for e in mine} == {"tester"}
    assert {e["at"] for e in mine} and len({e["checkin"] for e in mine}) == 1
    [checkin] = {e["checkin"] for e in mine}
    assert checkin and checkin in done.stderr


def test_without_a_terminal_a_reason_is_required(seeded: Path, edit) -> None:
    done = edit(f"drop({TEXTS[ACTIVE_TASK]!r})", reason=None)
    assert done.returncode == 2
    assert "-m" in done.stderr
    assert_nothing_written(seeded)
    assert TEXTS[ACTIVE_TASK] not in kept_file(seeded, done.stderr).read_text()
    again = edit(UNHURRIED, "--resume", resume_id(done.stderr))
    assert again.returncode == 0, again.stderr
    assert notes(seeded)[ACTIVE_TASK].state == "revoked"


def test_without_a_terminal_yes_is_required(seeded: Path, edit) -> None:
    done = edit(f"drop({TEXTS[ACTIVE_TASK]!r})", yes=False)
    assert done.returncode == 2
    assert "--yes" in done.stderr
    assert_nothing_written(seeded)
    assert TEXTS[ACTIVE_TASK] not in kept_file(seeded, done.stderr).read_text()


# -- three-way: others write while the editor is open ------------------------------------------


def test_a_conflict_on_the_same_note_applies_nothing(seeded: Path, edit) -> None:
    """Through the CLI: exit 3, none of your changes written.  What each pair of changes
    to one note gives is in fixtures/checkin/conflict-*.case and agree-*.case."""
    body = (
        "qem('revoke', '2', '-m', 'wrong order', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')\n"
        f"drop({TEXTS[ACTIVE_TASK]!r})\n"
        "under('Tasks', '- a brand new task')"
    )
    done = edit(body)
    assert done.returncode == 3, done.stderr
    assert f"conflict on #{shorts(seeded)[ACTIVE_GOTCHA]}:" in done.stderr and "revoked by other" in done.stderr
    # only the other writer's event: none of yours, not even the changes that did not conflict
    names = aliases(seeded)
    assert [(names[e.note], e.type, e.actor) for e in new_events(seeded)] == [(ACTIVE_GOTCHA, "revoked", "other")]
    assert run_qem("verify", cwd=seeded).returncode == 0
    kept = kept_file(seeded, done.stderr).read_text()
    assert "B then A" in kept and "a brand new task" in kept and TEXTS[ACTIVE_TASK] not in kept


@pytest.mark.parametrize("keep", ["yours", "theirs"])
def test_a_conflict_is_resolved_by_resuming(seeded: Path, edit, keep: str) -> None:
    body = (
        "qem('revoke', '2', '-m', 'wrong order', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')\n"
        f"drop({TEXTS[ACTIVE_TASK]!r})\n"
        "under('Tasks', '- a brand new task')"
    )
    first = edit(body)
    assert first.returncode == 3
    # the resumed file is rebased on the store now, the conflict between markers
    resolve = (
        f"assert text.startswith('<!-- qem memory={memory_id(seeded)} '), text\n"
        "assert '<<<<<<< yours' in text and '||||||| base' in text and '=======' in text and '>>>>>>>' in text\n"
        f"assert '<!-- qem:errors' in text and 'conflict on #{shorts(seeded)[ACTIVE_GOTCHA]}:' in text\n"
        f"assert {TEXTS[ACTIVE_TASK]!r} not in text and text.count('a brand new task') == 1\n"
        f"resolve({keep!r})"
    )
    done = edit(resolve, "--resume", resume_id(first.stderr))
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    assert after[ACTIVE_TASK].state == "revoked"
    assert [n.text for n in after.values() if n.alias is None and n.supersedes is None] == ["a brand new task"]
    if keep == "yours":  # revoked by them, brought back with your text
        assert after[ACTIVE_GOTCHA].state == "superseded"
        assert after[after[ACTIVE_GOTCHA].superseded_by].text == "The lock order is B then A"
    else:
        assert after[ACTIVE_GOTCHA].state == "revoked"
        assert after[ACTIVE_GOTCHA].state_reason == "wrong order"
    assert checkouts(seeded) == []


def test_changes_to_different_notes_merge(seeded: Path, edit) -> None:
    body = (
        "qem('revoke', '3', '-m', 'measured again', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')"
    )
    done = edit(body)
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    assert after[ACTIVE_FINDING].state == "revoked" and after[ACTIVE_FINDING].state_reason == "measured again"
    assert after[ACTIVE_GOTCHA].state == "superseded"
    assert f"#{shorts(seeded)[ACTIVE_FINDING]}" in done.stderr  # others' change is reported as kept


def test_both_sides_revoking_the_same_note_is_no_conflict(seeded: Path, edit) -> None:
    body = (
        "qem('revoke', '4', '-m', 'done elsewhere', '--actor', 'other')\n"
        f"drop({TEXTS[ACTIVE_TASK]!r})\n"
        "sub('The lock order is A then B', 'The lock order is B then A')"
    )
    done = edit(body)
    assert done.returncode == 0, done.stderr
    task = notes(seeded)[ACTIVE_TASK].id
    revocations = [e for e in events(seeded) if e.note == task and e.type == "revoked"]
    assert [(e.actor, e.reason) for e in revocations] == [("other", "done elsewhere")]
    assert notes(seeded)[ACTIVE_GOTCHA].state == "superseded"


def test_notes_created_meanwhile_are_not_deleted(seeded: Path, edit) -> None:
    body = (
        "qem('add', 'their fresh note', '--kind', 'gotcha', '--actor', 'other')\n"
        "qem('supersede', '3', 'The cache misses on warm start too', '--actor', 'other')\n"
        "sub('The lock order is A then B', 'The lock order is B then A')"
    )
    done = edit(body)
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    theirs = [n for n in after.values() if n.actor == "other"]
    assert sorted(n.text for n in theirs) == ["The cache misses on warm start too", "their fresh note"]
    assert all(n.state == "active" for n in theirs)
    assert after[ACTIVE_GOTCHA].state == "superseded"


# -- failure paths keep the edit ----------------------------------------------------------------


def test_editor_failure_keeps_the_edit(seeded: Path, edit) -> None:
    done = edit(f"drop({TEXTS[ACTIVE_TASK]!r})", env={"QEM_TEST_EDITOR_EXIT": "1"})
    assert done.returncode == 2
    assert "exited with status 1" in done.stderr
    assert_nothing_written(seeded)
    kept = kept_file(seeded, done.stderr)
    assert TEXTS[ACTIVE_TASK] not in kept.read_text()
    again = edit(UNHURRIED, "--resume", resume_id(done.stderr))
    assert again.returncode == 0, again.stderr
    assert moves(seeded) == [(ACTIVE_TASK, "revoked")]


CHANGES = (
    f"drop({TEXTS[ACTIVE_TASK]!r})\n"
    "sub('The lock order is A then B', 'The lock order is B then A')\n"
    "under('Tasks', '- a brand new task')"
)


@pytest.mark.parametrize("point", ["apply-begin", "apply-before-commit"])
def test_a_crash_before_commit_writes_nothing_and_keeps_the_edit(seeded: Path, edit, point: str) -> None:
    done = edit(CHANGES, env={"QEM_FAULT": point})
    assert done.returncode == -9, done.stderr  # SIGKILLed at the fault point
    assert_nothing_written(seeded)
    assert run_qem("verify", cwd=seeded).returncode == 0
    [kept] = checkouts(seeded)
    assert "a brand new task" in (kept / "MEMORY.md").read_text()
    again = edit(UNHURRIED, "--resume", kept.name)
    assert again.returncode == 0, again.stderr
    assert sorted(e.type for e in new_events(seeded)) == ["created", "created", "revoked", "superseded"]


def test_a_crash_after_commit_leaves_the_whole_checkin_and_resume_does_not_repeat_it(seeded: Path, edit) -> None:
    done = edit(CHANGES, env={"QEM_FAULT": "apply-after-commit"})
    assert done.returncode == -9, done.stderr
    landed = new_events(seeded)
    assert sorted(e.type for e in landed) == ["created", "created", "revoked", "superseded"]
    assert len({e.checkin for e in landed}) == 1 and landed[0].checkin
    assert run_qem("verify", cwd=seeded).returncode == 0
    [kept] = checkouts(seeded)
    again = edit("", "--resume", kept.name)
    assert again.returncode == 0, again.stderr
    assert "already checked in" in again.stderr
    assert new_events(seeded) == landed  # nothing twice (no second "a brand new task")
    assert checkouts(seeded) == []


# -- the split verbs ---------------------------------------------------------------------------


def test_checkout_then_checkin(seeded: Path, qem) -> None:
    out = qem("checkout")
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path.name == "MEMORY.md" and path.parent.parent == seeded.resolve() / ".qem" / "checkouts"
    path.write_text(path.read_text().replace("The lock order is A then B", "The lock order is B then A"))
    done = qem("checkin", "-m", REASON, "--yes", input="")
    assert done.returncode == 0, done.stderr
    assert notes(seeded)[ACTIVE_GOTCHA].state == "superseded"
    assert checkouts(seeded) == []


def test_checkout_to_a_path_dry_run_then_checkin_rerenders_the_file(seeded: Path, qem, tmp_path: Path) -> None:
    target = tmp_path / "gotchas.md"
    assert qem("checkout", "--path", str(target), "--kind", "gotcha").returncode == 0
    original = target.read_text()
    assert re.findall(r"^## (.*)$", original, re.M) == ["Gotchas"]
    target.write_text(original.replace("The lock order is A then B", "The lock order is B then A"))
    edited = target.read_bytes()
    dry = qem("checkin", "--path", str(target), "--dry-run", input="")
    assert dry.returncode == 1, dry.stderr  # a dry run that finds changes
    assert "Plan: 1 supersede" in dry.stdout and "dry run" in dry.stderr
    assert_nothing_written(seeded)
    assert target.read_bytes() == edited
    done = qem("checkin", "--path", str(target), "-m", REASON, "--yes", input="")
    assert done.returncode == 0, done.stderr
    assert notes(seeded)[ACTIVE_GOTCHA].state == "superseded"
    fresh = tmp_path / "fresh.md"
    assert qem("checkout", "--path", str(fresh), "--kind", "gotcha").returncode == 0
    assert target.read_bytes() == fresh.read_bytes()
    assert target.read_text().startswith(f"<!-- qem memory={memory_id(seeded)} kinds=gotcha ")
    assert head(seeded) == SEED_HEAD + 2  # the supersession: created, superseded


def test_checkin_of_a_narrowed_file_keeps_notes_created_meanwhile(seeded: Path, qem, tmp_path: Path) -> None:
    target = tmp_path / "gotchas.md"
    assert qem("checkout", "--path", str(target), "--kind", "gotcha").returncode == 0
    target.write_text(target.read_text().replace("The lock order is A then B", "The lock order is B then A"))
    added = qem("add", "their gotcha", "--kind", "gotcha", "--actor", "other")
    assert added.returncode == 0
    done = qem("checkin", "--path", str(target), "-m", REASON, "--yes", input="")
    assert done.returncode == 0, done.stderr
    after = notes(seeded)
    [theirs] = [n for n in after.values() if n.shown == added.stdout.strip()]
    assert theirs.state == "active" and theirs.text == "their gotcha"
    assert after[ACTIVE_GOTCHA].state == "superseded"
    assert f"[#{theirs.shown}]" in target.read_text()  # rendered again from the store now


def test_checkin_of_a_hand_edited_export(seeded: Path, qem) -> None:
    assert qem("export").returncode == 0
    mirror = seeded / "MEMORY.md"
    mirror.write_text(mirror.read_text().replace("## Tasks\n", "## Tasks\n\n- high · ship it\n"))
    refused = qem("checkin", "-m", REASON, input="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert_nothing_written(seeded)
    done = qem("checkin", "-m", REASON, "--yes", input="")
    assert done.returncode == 0, done.stderr
    [new] = [n for n in notes(seeded).values() if n.alias is None]
    assert (new.kind, new.priority, new.text, new.provenance) == ("task", "high", "ship it", "human")
    assert mirror.read_text() == qem("export", "--stdout").stdout


def test_a_second_hand_edit_of_the_export_is_read_against_its_new_rendering(seeded: Path, qem) -> None:
    """After a check-in of MEMORY.md, the file is rendered again; editing it again reads
    against that rendering (the last export's copy moves with it), so what the first
    check-in did is not read as the second one's edit.  (Outside a git work tree, where
    nothing exports after a write, the old copy stayed: the supersession the file showed
    was refused as a marker written by hand.)"""
    assert qem("export").returncode == 0
    mirror = seeded / "MEMORY.md"
    mirror.write_text(mirror.read_text().replace("The lock order is A then B", "The lock order is B then A"))
    first = qem("checkin", "-m", REASON, "--yes", input="")
    assert first.returncode == 0, first.stderr
    assert mirror.read_text() == qem("export", "--stdout").stdout  # rendered again: it shows the supersession
    mirror.write_text(mirror.read_text().replace(TEXTS[ACTIVE_FINDING], "The cache misses on every start"))
    second = qem("checkin", "-m", REASON, "--yes", input="")
    assert second.returncode == 0, second.stderr
    after = notes(seeded)
    assert after[ACTIVE_GOTCHA].state == after[ACTIVE_FINDING].state == "superseded"
    assert head(seeded) == SEED_HEAD + 4  # two supersessions, nothing else
    assert mirror.read_text() == qem("export", "--stdout").stdout


def test_checkin_of_a_conflicting_export_keeps_it_for_resume(seeded: Path, qem, edit) -> None:
    assert qem("export").returncode == 0
    mirror = seeded / "MEMORY.md"
    edited = mirror.read_text().replace("The lock order is A then B", "The lock order is B then A")
    mirror.write_text(edited)
    assert qem("revoke", "2", "-m", "no", "--actor", "other").returncode == 0
    done = qem("checkin", "-m", REASON, "--yes", input="")
    assert done.returncode == 3, done.stderr
    assert mirror.read_text() == edited
    again = edit("resolve('theirs')", "--resume", resume_id(done.stderr))
    assert again.returncode == 0, again.stderr
    assert notes(seeded)[ACTIVE_GOTCHA].state == "revoked"


def test_unchanged_checkout_of_the_749_note_corpus_exports_byte_identical(ws: Path, qem, edit, tmp_path: Path) -> None:
    if not CORPUS.is_file():
        pytest.skip("fixtures/corpus-749.jsonl is not there yet")
    loaded = qem("load", str(CORPUS))
    assert loaded.returncode == 0, loaded.stderr
    assert qem("export").returncode == 0
    before = (ws / "MEMORY.md").read_bytes()
    start = head(ws)
    done = edit(UNHURRIED)  # qem edit, unchanged
    assert done.returncode == 0, done.stderr
    assert "no changes" in done.stderr
    target = tmp_path / "all.md"
    assert qem("checkout", "--path", str(target)).returncode == 0
    assert target.read_bytes() == for_editing(before.decode("utf-8")).encode("utf-8")  # the mirror, and how to edit it
    checked = qem("checkin", "--path", str(target), "-m", REASON, "--yes", input="")
    assert checked.returncode == 0, checked.stderr
    assert "no changes" in checked.stderr
    assert head(ws) == start
    again = qem("export")
    assert again.returncode == 0 and "unchanged" in again.stderr
    assert (ws / "MEMORY.md").read_bytes() == before


def test_checkin_without_a_path_refuses_to_guess_between_a_kept_edit_and_an_edited_mirror(seeded: Path, qem) -> None:
    assert qem("export").returncode == 0
    kept = Path(qem("checkout").stdout.strip())
    mirror = seeded / "MEMORY.md"
    mirror.write_text(mirror.read_text().replace("The lock order is A then B", "The lock order is B then A"))
    refused = qem("checkin", "-m", REASON, "--yes", input="")
    assert refused.returncode == 2
    assert "could be checked in" in refused.stderr and str(kept) in refused.stderr
    assert_nothing_written(seeded)
    done = qem("checkin", "--path", str(mirror), "-m", REASON, "--yes", input="")
    assert done.returncode == 0, done.stderr
    assert notes(seeded)[ACTIVE_GOTCHA].state == "superseded"

"""Hostile and broken input: whatever a file or a store holds, qem applies exactly what the
file says or refuses with a message that names the line, and never half-writes.

- The check-in path is fuzzed (hypothesis) from three sides: random edits of random
  stores, planned and applied in-process and compared field by field with what the file
  says; arbitrary text and bytes checked in through the CLI code, where the only answers
  allowed are exit 0, 2 or 3 with the store untouched unless 0; and texts built to forge
  structure, which must round-trip through export → checkout → check-in unchanged.
- Huge, deep and binary files go through the real CLI.
- Store files that are not stores, come from a newer qem, are read-only, locked for long,
  or corrupt get a clear message, exit 2, no traceback, and the file's bytes unchanged.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import typer.main
from unittest import mock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _reliability import AT, fast_dir, no_traceback, python_env, record
from conftest import run_qem
from qem_edit import checkin, checkouts, errors, terminal
from qem_edit import store as store_mod
from qem_edit.cli import main as qem_main
from qem_edit.dump import dump_lines
from builders import render_text
from qem_edit.model import KINDS, LIVE_STATES, PRIORITIES, TextError, normalize_text
from qem_edit.export import render_store
from qem_edit.model import NewNote
from qem_edit.store import Store, Transaction
from qem_edit.workspace import Workspace
from qem_edit.reconciler.parse import clean_lines, parse
from qem_edit.renderer import Selection
from qem_edit.renderer.format import INDENT, ITEM_RE, escape_first_line

FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=150)

# Fragments of the file's own syntax, for texts that try to forge structure.
FORGERIES = [
    "- ", "## ", "## Tasks", "## Bogus", "# ", "[#1] ", "- [#1] 2026-07-27 · high · agent · x",
    "- [#2] FORGOTTEN 2026-07-27", " · ", "REVOKED", "REVOKED (x) · ", "STALE · ", "STALE (why) · ",
    "EXPIRED · ", "SUPERSEDED by #2 · ", "supersedes #1 · ", "FORGOTTEN", "DISPUTED with #2 (dispute 3) · ",
    "\\", "\\\\", "(", ")", "<!-- qem base=1 -->", "<!-- qem base=999999 · x -->", "<!-- qem:errors", "-->",
    "<<<<<<< yours", "=======", ">>>>>>> theirs", "||||||| base", "```", "  ", "\t", "*", "+ ", "·",
    "high · ", "low · ", "\u00a0", "\u2028", "\u2029", "\ufeff", "\x85", "\x0b", "\x0c", "é", "😀",
]
LINE_BREAKS = ["\n", "\n\n", "\r\n", "\r", "\n  ", "\n- ", "\n## ", "\n\t"]
TEXT_PIECES = st.one_of(
    st.sampled_from(FORGERIES), st.sampled_from(LINE_BREAKS),
    st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8),
)
HOSTILE_TEXT = st.lists(TEXT_PIECES, min_size=1, max_size=8).map("".join)


def storable(text: str) -> str | None:
    try:
        return normalize_text(text)
    except TextError:
        return None


STORABLE_TEXT = HOSTILE_TEXT.map(storable).filter(lambda t: t is not None)


_COMMANDS: dict = {}
_get_command = typer.main.get_command


def _cached_command(app):
    # typer rebuilds the click command on every call (~45 ms); a fuzzer calls main
    # thousands of times, so build it once (click commands are reusable)
    # keyed by the commands it holds: qem builds a one-command app per run, and a
    # short-lived app's id can be reused by the next one
    key = tuple(id(info) for info in app.registered_commands)
    if key not in _COMMANDS:
        _COMMANDS[key] = _get_command(app)
    return _COMMANDS[key]


def cli(*argv: str) -> tuple[int, str, str]:
    """qem's own entry point, in-process: any exception but SystemExit fails the test (a
    traceback is exactly what a user must never see)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(typer.main, "get_command", _cached_command):
        try:
            qem_main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out.flush()
    return code, out.buffer.getvalue().decode("utf-8", "replace"), err.getvalue()  # type: ignore[attr-defined]


def log_of(path: Path) -> str:
    with Store.open(path) as store:
        return "".join(dump_lines(store))


# -- random stores ------------------------------------------------------------------------------

MOVES = ("none", "none", "stale", "revoked", "expired", "superseded", "forgotten")
NOTE_SPECS = st.lists(
    st.tuples(st.sampled_from(KINDS), st.sampled_from(PRIORITIES),
              st.sampled_from(("agent", "auto", "user-stated")), STORABLE_TEXT, st.sampled_from(MOVES)),
    min_size=1, max_size=8,
)


def build_store(path: Path, specs) -> None:
    def work(tx: Transaction) -> None:
        for kind, priority, provenance, text, move in specs:
            note = tx.create(NewNote(kind, priority, provenance, text), "builder")
            if move == "superseded":
                tx.create(NewNote(kind, priority, provenance, text + " (v2)", note.id), "builder")
            elif move == "forgotten":
                tx.forget(note.id, "builder", "held a secret")
            elif move != "none":
                tx.emit(note.id, {"stale": "stale_flagged", "revoked": "revoked", "expired": "expired"}[move],
                        "builder", "because (it was so)")

    with Store.open(path, create=True) as store:
        store.write(work, at=AT)


# -- random edits -----------------------------------------------------------------------------


def blocks_of(text: str) -> list[list[str]]:
    """The file as blocks: a column-0 line with the indented and blank lines after it."""
    out: list[list[str]] = []
    for line in text.split("\n"):
        if out and (not line or line.startswith((" ", "\t"))):
            out[-1].append(line)
        else:
            out.append([line])
    return out


def item_lines(prefix: str, text: str) -> list[str]:
    first, *more = text.split("\n")
    return [prefix + escape_first_line(first)] + [INDENT + line if line else "" for line in more]


MARKER_RE = re.compile(r"(?:REVOKED|STALE|EXPIRED)(?: \d{4}-\d{2}-\d{2})?(?: \((?:[^\\()]|\\.)*\))? · ")

EDIT = st.one_of(
    st.tuples(st.just("retext"), st.integers(0, 99), STORABLE_TEXT),
    st.tuples(st.just("delete"), st.integers(0, 99)),
    st.tuples(st.just("add"), st.integers(0, 99), STORABLE_TEXT, st.sampled_from(("", "high · ", "low · ", "medium · "))),
    st.tuples(st.just("mark"), st.integers(0, 99), st.sampled_from(("STALE (r) · ", "REVOKED (why) · ", "EXPIRED · ", "REVOKED · "))),
    st.tuples(st.just("unmark"), st.integers(0, 99)),
    st.tuples(st.just("priority"), st.integers(0, 99), st.sampled_from(("high", "low", "medium", "urgent"))),
    st.tuples(st.just("provenance"), st.integers(0, 99), st.sampled_from(("human", "agent", "robot"))),
    st.tuples(st.just("move"), st.integers(0, 99), st.integers(0, 99)),
    # chaos: lines no careful editor writes
    st.tuples(st.just("raw"), st.integers(0, 99), HOSTILE_TEXT),
    st.tuples(st.just("chop"), st.integers(0, 99), st.integers(1, 12)),
)


def apply_edits(text: str, edits) -> str:
    blocks = blocks_of(text)
    for edit in edits:
        kind, i = edit[0], edit[1] % len(blocks)
        block = blocks[i]
        first = block[0]
        match = ITEM_RE.match(first)
        if kind == "retext" and first.startswith("- "):
            prefix = first[: match.start("rest")] if match else "- "
            blocks[i] = item_lines(prefix, edit[2])
        elif kind == "delete" and i > 0:
            del blocks[i]
        elif kind == "add":
            blocks.insert(i + 1, item_lines("- " + edit[3], edit[2]))
        elif kind == "mark" and match:
            at = match.start("rest")
            block[0] = first[:at] + edit[2] + first[at:]
        elif kind == "unmark" and match:
            at = match.start("rest")
            block[0] = first[:at] + MARKER_RE.sub("", first[at:], count=1)
        elif kind == "priority" and match:
            block[0] = first[: match.start("priority")] + edit[2] + first[match.end("priority"):]
        elif kind == "provenance" and match:
            block[0] = first[: match.start("provenance")] + edit[2] + first[match.end("provenance"):]
        elif kind == "move" and i > 0:
            moved = blocks.pop(i)
            blocks.insert(edit[2] % len(blocks) + 1, moved)
        elif kind == "raw":
            block.insert(1, edit[2].split("\n")[0])
        elif kind == "chop":
            block[0] = first[: -edit[2]]
    return "\n".join(line for block in blocks for line in block)


def check_applied_exactly(edited: str, before: dict, after: dict, created: list[int]) -> None:
    """The store after the check-in is what the file says, note by note."""
    parsed = parse(edited)
    assert parsed.errors == []
    in_file = set()
    new_ids = set(created)
    used = set()
    for item in parsed.items:
        content = (item.kind, item.priority, normalize_text(item.text) if item.text is not None else None)
        if item.note_id is None:
            match = [n for n in new_ids - used
                     if (after[n].kind, after[n].priority, after[n].text) == content and after[n].supersedes is None]
            assert match, f"new note {content} not created"
            used.add(match[0])
            assert after[match[0]].state == "active" and after[match[0]].provenance == "human"
            continue
        in_file.add(item.note_id)
        old, new = before[item.note_id], after[item.note_id]
        if old.state == "forgotten":
            assert new == old
            continue
        if item.provenance == "human":
            assert new.provenance == "human"
        else:
            assert new.provenance == old.provenance
        if content != (old.kind, old.priority, old.text):
            assert new.state == "superseded", (item, new)
            successor = after[new.superseded_by]
            assert (successor.kind, successor.priority, successor.text) == content
            assert successor.state == "active" and successor.provenance == "human"
            assert successor.id in new_ids
            used.add(successor.id)
        else:
            assert new.state == item.state, (item, old, new)
            assert new.text == old.text
    for note_id, old in before.items():
        if note_id not in in_file and old.id not in new_ids:
            assert old.state in LIVE_STATES
            assert after[note_id].state == "revoked", "a deleted item is revoked"
    assert used == new_ids, "the check-in created notes the file does not hold"


def names_a_line(error, lines: int) -> bool:
    return 1 <= error.line <= lines or (error.line == 0 and "#" in error.message)


def test_the_parser_takes_anything(tmp_path):
    """reconciler.parse on arbitrary text: never an exception, every problem and every
    item on a real line (or, for a problem of the file as a whole, line 0)."""
    tried = Counter()

    @settings(FUZZ, max_examples=200)
    @given(text=st.one_of(HOSTILE_TEXT, st.lists(HOSTILE_TEXT, max_size=30).map("\n".join),
                          st.text(max_size=400)))
    def run(text):
        parsed = parse(text)
        lines = clean_lines(text)
        assert all(0 <= e.line <= len(lines) for e in parsed.errors)
        assert all(1 <= i.line <= len(lines) for i in parsed.items)
        tried["parsed"] += 1

    run()
    record("test_the_parser_takes_anything", "examples", tried["parsed"])


def test_random_edits_of_random_stores(scratch):
    """Plan and apply in-process: applied exactly as the file says, or refused naming a line."""
    tried = Counter()
    counter = iter(range(10**9))

    @settings(FUZZ, max_examples=250)
    @given(specs=NOTE_SPECS, edits=st.lists(EDIT, min_size=1, max_size=5))
    def run(specs, edits):
        path = scratch / f"s{next(counter)}.db"
        build_store(path, specs)
        with Store.open(path) as store:
            head, rendered = render_text(store)
            edited = apply_edits(rendered, edits)
            before = {n.id: n for n in store.notes()}
            for base_text in (rendered, None):  # a checkout (base.md at hand), or a bare file
                try:
                    planned = checkin.propose(store, edited, base_text)
                except errors.BadInput as exc:  # not a qem file at all: refused as a whole
                    assert re.search(r"line \d+:|nothing to check in", str(exc)), exc
                    assert store.head() == head
                    tried["refused"] += 1
                    return
                plan = planned.plan
                assert not plan.conflicts  # nobody else wrote
                if not plan.ok:
                    n = len(clean_lines(edited))
                    assert all(names_a_line(e, n) for e in plan.errors), plan.errors
            if plan.ok and plan.ops:
                _, created = checkin.apply_plan(store, plan, "fuzzer", "fuzz")
                assert store.verify() == []
                after = {n.id: n for n in store.notes()}
                check_applied_exactly(edited, before, after, created)
                # and the result reads back clean: nothing left to check in
                again = checkin.propose(store, render_store(store)[1].decode('utf-8'))
                assert again.plan.ok and not again.plan.ops
                tried["applied"] += 1
            elif plan.ok:
                assert store.head() == head
                tried["nothing to do"] += 1
            else:
                assert store.head() == head
                tried["refused"] += 1
        path.unlink()

    run()
    assert tried["applied"] >= 10 and tried["refused"] >= 10, tried
    record("test_random_edits_of_random_stores", "examples", sum(tried.values()))
    record("test_random_edits_of_random_stores", "outcomes", dict(tried))


def test_forged_structure_round_trips(scratch):
    """Texts made of the file's own syntax: export → checkout → check-in changes nothing,
    and an edit elsewhere never creates, hides or alters one of them."""
    tried = Counter()
    counter = iter(range(10**9))

    @FUZZ
    @given(texts=st.lists(STORABLE_TEXT, min_size=1, max_size=5), kinds=st.lists(st.sampled_from(KINDS), min_size=5, max_size=5))
    def run(texts, kinds):
        root = scratch / f"w{next(counter)}"
        (root / ".qem").mkdir(parents=True)
        place = Workspace(root, root / ".qem" / "memory.db")
        with Store.open(place.store_path, create=True) as store:
            store.write(lambda tx: [tx.create(NewNote(k, "medium", "agent", t), "forger") for t, k in zip(texts, kinds)], at=AT)
            before = {n.id: n for n in store.notes()}
            kept = checkouts.new_checkout(store, place, Selection())
            shown = kept.file.read_text("utf-8")
            items = {i.note_id: i for i in parse(shown).items}
            assert len(items) == len(texts) and None not in items
            for note_id, note in before.items():
                assert items[note_id].text == note.text and items[note_id].state == "active"
            # unchanged: nothing to write
            planned = checkin.propose(store, shown, kept.base_file.read_text("utf-8"))
            assert planned.plan.ok and not planned.plan.ops and not planned.plan.agreed
            # one note added elsewhere: exactly one new note, the forged ones untouched
            edited = shown.replace("\n## Tasks\n", "\n## Tasks\n\n- an honest note\n", 1)
            kept.file.write_text(edited, "utf-8")
            head = store.head()
            assert terminal.run_checkin(store, place, kept.file, "fuzz", True, False, "forger").status == "applied"
            after = {n.id: n for n in store.notes()}
            assert {k: v for k, v in after.items() if k in before} == before
            (new,) = [n for n in after.values() if n.id not in before]
            assert new.text == "an honest note" and new.kind == "task"
            assert store.head() == head + 1
        tried["round trips"] += 1
        shutil.rmtree(root)

    run()
    record("test_forged_structure_round_trips", "examples", tried["round trips"])


# -- the CLI check-in path with arbitrary input ------------------------------------------------------


@pytest.fixture
def scratch(tmp_path):
    """Where the fuzzers make their stores: tmpfs when there is one."""
    where = fast_dir(tmp_path / "scratch")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def seed_workspace(root: Path) -> Path:
    (root / ".qem").mkdir(parents=True)
    build_store(root / ".qem" / "memory.db", [
        ("task", "high", "agent", "Review the retry PR", "none"),
        ("gotcha", "medium", "agent", "The lock order is A then B", "none"),
        ("finding", "low", "agent", "Builds take 41 s", "stale"),
        ("decision", "medium", "agent", "Use JSON for the dump", "superseded"),
        ("reference", "low", "agent", "a secret", "forgotten"),
        ("operational", "medium", "agent", "Freeze until Friday", "expired"),
    ])
    return root


@pytest.fixture
def seeded(tmp_path):
    return seed_workspace(tmp_path / "ws")


def decode_error_line(data: bytes) -> int | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data[: exc.start].count(b"\n") + 1
    return None


def test_arbitrary_files_through_the_cli(scratch):
    """`qem checkin --path FILE` on arbitrary bytes and mangled renderings: exit 0, 2 or 3
    only, a refusal names a line, and a refused check-in leaves store and file as they were."""
    ws = seed_workspace(scratch / "ws")
    store_path = ws / ".qem" / "memory.db"
    rendered = run_qem("export", "--stdout", cwd=ws).stdout
    tried = Counter()
    target = scratch / "edit.md"

    content = st.one_of(
        st.binary(max_size=300),
        st.lists(EDIT, min_size=1, max_size=4).map(lambda e: apply_edits(rendered, e).encode("utf-8")),
        st.tuples(st.lists(EDIT, max_size=3), st.integers(0, 10**6), st.binary(min_size=1, max_size=4)).map(
            lambda t: (lambda b: b[: t[1] % (len(b) + 1)] + t[2] + b[t[1] % (len(b) + 1):])(
                apply_edits(rendered, t[0]).encode("utf-8"))),
    )

    @FUZZ
    @given(data=content)
    def run(data):
        log = log_of(store_path)
        target.write_bytes(data)
        code, out, err = cli("checkin", "--path", str(target), "-m", "fuzz", "--yes", "--workspace", str(ws))
        assert code in (0, 2, 3), (code, err)
        if code == 0:
            tried["applied" if "checked in" in err else "nothing to do"] += 1
            return
        tried["refused"] += 1
        assert log_of(store_path) == log, "a refused check-in wrote"
        assert target.read_bytes() == data, "a refused check-in changed the file"
        assert err.startswith(("qem: error:", "  ")), err
        bad_line = decode_error_line(data)
        if bad_line is not None:
            assert f"line {bad_line}: not UTF-8" in err, err
        else:
            assert re.search(r"line \d+|#\d+|nothing to check in|header", err), err

    run()
    with Store.open(store_path) as store:
        assert store.verify() == []
    assert tried["refused"] >= 50, tried
    record("test_arbitrary_files_through_the_cli", "examples", sum(tried.values()))
    record("test_arbitrary_files_through_the_cli", "outcomes", dict(tried))


# -- huge, deep and binary files, through the real CLI -----------------------------------------------


def checkin_file(ws: Path, tmp_path: Path, text: bytes, timeout: float = 60) -> subprocess.CompletedProcess:
    path = tmp_path / "edited.md"
    path.write_bytes(text)
    return run_qem("checkin", "--path", str(path), "-m", "big", "--yes", cwd=ws, timeout=timeout)


def test_invalid_utf8_names_its_line(seeded, tmp_path):
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout.encode()
    lines = rendered.split(b"\n")
    lines.insert(6, b"- a new note with a bad byte \xff\xfe here")
    log = log_of(seeded / ".qem" / "memory.db")
    done = checkin_file(seeded, tmp_path, b"\n".join(lines))
    assert done.returncode == 2
    assert "line 7: not UTF-8" in done.stderr
    no_traceback(done.stderr)
    assert log_of(seeded / ".qem" / "memory.db") == log
    record("test_invalid_utf8_names_its_line", "bad inputs refused", 1)


def test_huge_lines(seeded, tmp_path):
    """A 1 MB note text goes in and comes back byte for byte; a 1 MB stray line is refused
    by its line number; both in seconds."""
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    huge = "x" * 500_000 + " · REVOKED (" + "é" * 250_000
    started = time.monotonic()
    done = checkin_file(seeded, tmp_path, rendered.replace("## Tasks\n", f"## Tasks\n\n- {huge}\n", 1).encode())
    assert done.returncode == 0, done.stderr
    with Store.open(seeded / ".qem" / "memory.db") as store:
        (note,) = [n for n in store.notes() if n.text and len(n.text) > 1000]
        assert note.text == huge
    stray = "y" * 1_000_000
    log = log_of(seeded / ".qem" / "memory.db")
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    done = checkin_file(seeded, tmp_path, (rendered + stray + "\n").encode())
    assert done.returncode == 2
    assert f"line {rendered.count(chr(10)) + 1}:" in done.stderr
    assert len(done.stderr) < 5_000, "the message must not echo a megabyte"
    assert log_of(seeded / ".qem" / "memory.db") == log
    assert time.monotonic() - started < 30
    no_traceback(done.stderr)
    record("test_huge_lines", "bad inputs refused", 1)


def test_deep_nesting(seeded, tmp_path):
    """3,000 indented lines (ever deeper), 2,000 nested list markers and 2,000 headings."""
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    deep = "\n".join(["a list, deeper and deeper:"] + [" " * i + "- level %d" % i for i in range(3000)])
    nested = "\n".join("- " * (i % 50 + 2) + f"nested {i}" for i in range(2000))
    text = rendered.replace("## Tasks\n", "## Tasks\n\n" + "\n".join(item_lines("- ", deep)) + "\n" + nested + "\n", 1)
    done = checkin_file(seeded, tmp_path, text.encode())
    assert done.returncode == 0, done.stderr[-2000:]
    with Store.open(seeded / ".qem" / "memory.db") as store:
        texts = [n.text for n in store.notes()]
    assert deep in texts
    assert sum(1 for t in texts if t and t.startswith("- ") and "nested" in t) == 2000
    log = log_of(seeded / ".qem" / "memory.db")
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    headings = "\n".join("#" * (i % 7 + 1) + f" heading {i}" for i in range(2000))
    done = checkin_file(seeded, tmp_path, (rendered + headings + "\n").encode())
    assert done.returncode == 2
    assert "not a qem section heading" in done.stderr
    assert log_of(seeded / ".qem" / "memory.db") == log
    no_traceback(done.stderr)
    record("test_deep_nesting", "bad inputs refused", 1)


@pytest.mark.parametrize("data", [
    b"", b"\x00" * 1000, bytes(range(256)) * 4, b"\xef\xbb\xbf", b"\n\n\n", b"<!-- qem base=1 -->",
    b"<!-- qem base=99999 -->\n## Tasks\n- x\n", b"## Tasks\n- no header\n", b"\x89PNG\r\n\x1a\n" + b"\x00" * 50,
], ids=["empty", "nuls", "binary", "bom", "blank", "header-only", "future-base", "no-header", "png"])
def test_files_that_are_not_checkouts(seeded, data):
    ws = seeded
    path = ws / "thing.md"
    path.write_bytes(data)
    log = log_of(ws / ".qem" / "memory.db")
    code, out, err = cli("checkin", "--path", str(path), "-m", "x", "--yes", "--workspace", str(ws))
    assert code in (0, 2), err
    if data == b"<!-- qem base=1 -->":
        # a header with no sections is a file cut short, not every note deleted
        assert code == 2 and "the section `## Directives` is missing" in err, err
    assert log_of(ws / ".qem" / "memory.db") == log
    assert path.read_bytes() == data
    if code == 2:
        assert err.startswith("qem: error:") or err.startswith("  "), err
    record(f"test_files_that_are_not_checkouts[{data[:8]!r}]", "bad inputs refused", int(code == 2))


# -- store files that are not (good) stores ------------------------------------------------------------

READS = [["list"], ["show", "1"], ["log"], ["export", "--stdout"], ["export", "--check"], ["dump"],
         ["query", "kind=task"], ["status", "1"], ["checkout"], ["verify"]]
WRITES = [["checkin", "--path", "MEMORY.md", "-m", "x", "--yes"], ["add", "x", "--kind", "task"],
          ["revoke", "1", "-m", "x"], ["export"], ["init"], ["edit", "-m", "x", "--yes"]]


def good_store(root: Path, notes: int = 6) -> Path:
    (root / ".qem").mkdir(parents=True, exist_ok=True)
    path = root / ".qem" / "memory.db"
    build_store(path, [("task", "medium", "agent", f"note {i} " + "lorem ipsum " * 20, "none") for i in range(notes)])
    (root / "MEMORY.md").write_text(run_qem("export", "--stdout", cwd=root).stdout)
    return path


def run_all(root: Path, store: Path, commands, monkeypatch) -> list[tuple[list[str], int, str]]:
    """Each command on `store`: no traceback, and the file's bytes unchanged by a failure."""
    monkeypatch.setenv("QEM_EDITOR", "true")
    monkeypatch.chdir(root)
    results = []
    for argv in commands:
        before = store.read_bytes()
        code, out, err = cli(*argv, "--workspace", str(root), "--store", str(store))
        if code != 0:
            assert store.read_bytes() == before, f"`qem {' '.join(argv)}` failed and changed the store"
            if code == 1:  # a check that found a difference: only verify and export --check
                assert argv in (["verify"], ["export", "--check"]), (argv, err)
            elif code == 3:  # export keeps a hand-edited mirror rather than discard the edit
                assert argv == ["export"] and "edited by hand" in err, (argv, err)
            else:
                assert code == 2 and "qem: error:" in err, (argv, code, err)
        results.append((argv, code, err))
    return results


def other_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE events (x); INSERT INTO events VALUES (1); PRAGMA user_version = 3;")
    conn.close()


@pytest.mark.parametrize("kind", ["text", "other-sqlite", "other-sqlite-with-id", "newer-schema", "directory"])
def test_not_a_store(tmp_path, monkeypatch, kind):
    root = tmp_path / "ws"
    root.mkdir()
    store = root / "store.db"
    if kind == "text":
        store.write_text("these are my notes, not a database\n" * 200)
    elif kind == "other-sqlite":
        other_sqlite(store)
    elif kind == "other-sqlite-with-id":
        other_sqlite(store)
        conn = sqlite3.connect(store)
        conn.execute("PRAGMA application_id = 12345")
        conn.close()
    elif kind == "newer-schema":
        good_store(root)
        shutil.move(root / ".qem" / "memory.db", store)
        conn = sqlite3.connect(store)
        conn.execute(f"PRAGMA user_version = {store_mod.SCHEMA_VERSION + 1}")
        conn.close()
    else:
        store.mkdir()
    (root / "MEMORY.md").write_text("<!-- qem base=0 -->\n## Tasks\n- x\n")
    if kind == "directory":
        for argv in READS + WRITES:
            code, _, err = cli(*argv, "--workspace", str(root), "--store", str(store))
            assert code == 2 and "is a directory" in err, (argv, err)
        return
    results = run_all(root, store, READS + WRITES, monkeypatch)
    for argv, code, err in results:
        assert code == 2, (argv, code, err)
        if kind == "newer-schema":
            assert "schema" in err and "upgrade qem" in err
        else:
            assert "not a qem store" in err, err
    assert not (root / ".qem" / "checkouts").exists()
    record(f"test_not_a_store[{kind}]", "bad inputs refused", len(results))


def test_empty_store_file(tmp_path, monkeypatch):
    """An empty file: reads say it is not yet a store; the first write makes it one."""
    root = tmp_path / "ws"
    root.mkdir()
    store = root / "store.db"
    store.touch()
    for argv, code, err in run_all(root, store, READS, monkeypatch):
        assert code == 2 and "empty file" in err, (argv, err)
    assert store.read_bytes() == b""
    code, out, err = cli("add", "first", "--kind", "task", "--store", str(store), "--workspace", str(root))
    assert code == 0 and out.strip() == "1"
    with Store.open(store) as handle:
        assert handle.verify() == []
    record("test_empty_store_file", "bad inputs refused", len(READS))


CORRUPTIONS = ["truncate-60%", "truncate-1k", "zero-a-page", "garble-a-page", "garble-header", "garble-64-bytes"]


def corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    page = 4096
    middle = (len(data) // page // 2) * page
    if how == "truncate-60%":
        data = data[: (len(data) * 6 // 10) // page * page]
    elif how == "truncate-1k":
        data = data[:1000]
    elif how == "zero-a-page":
        data[middle: middle + page] = bytes(page)
    elif how == "garble-a-page":
        data[middle: middle + page] = bytes((i * 37 + 11) % 256 for i in range(page))
    elif how == "garble-header":
        data[0:16] = b"not an sqlite db"
    else:
        data[middle + 1000: middle + 1064] = bytes((i * 91 + 7) % 256 for i in range(64))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_corrupt_store(tmp_path, monkeypatch, how):
    """Clear message, exit 2 (verify: 1 or 2), no traceback, the bytes unchanged."""
    root = tmp_path / "ws"
    store = good_store(root, notes=120)
    assert store.stat().st_size > 8 * 4096
    corrupt(store, how)
    results = run_all(root, store, READS + WRITES, monkeypatch)
    failed = [argv for argv, code, _ in results if code != 0]
    verify = [code for argv, code, _ in results if argv == ["verify"]][0]
    assert verify in (1, 2), "verify must notice the corruption"
    for argv, code, err in results:
        assert code in (0, 2) or argv == ["verify"], (argv, code, err)
    assert failed
    record(f"test_corrupt_store[{how}]", "bad inputs refused", len(failed))


# -- a read-only store -------------------------------------------------------------------------------


@contextlib.contextmanager
def read_only(*paths: Path):
    """Make `paths` unwritable.  As root, chmod does not stop a write, so the files are made
    immutable (chattr +i); where that is not possible the test is skipped, saying why."""
    if os.geteuid() != 0:
        modes = [p.stat().st_mode for p in paths]
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in zip(paths, modes):
                p.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root (chmod cannot stop root) and chattr is not installed")
    done = subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"running as root and `chattr +i` failed here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", *map(str, paths)], check=True)


@pytest.mark.parametrize("what", ["file", "file-and-directory"])
def test_read_only_store(tmp_path, monkeypatch, what):
    """Reads work on a read-only store file and in a read-only directory (where SQLite
    cannot make the -shm file a WAL reader wants, the store is read read-only, or as an
    immutable file); every write is refused, nothing changes."""
    root = tmp_path / "ws"
    store = good_store(root)
    edit = root / "MEMORY.md"
    edit.write_text(edit.read_text().replace("## Tasks\n", "## Tasks\n\n- one more\n"))
    paths = (store,) if what == "file" else (store, store.parent)
    with read_only(*paths):
        reads = run_all(root, store, [r for r in READS if r != ["checkout"]], monkeypatch)
        for argv, code, err in reads:
            assert code == 0 or (argv == ["export", "--check"] and code == 1), (argv, err)
        writes = run_all(root, store, WRITES + [["checkout"]], monkeypatch)
        for argv, code, err in writes:
            if what == "file" and argv[0] in ("init", "checkout", "export", "edit"):
                # nothing to write in the store (it exists; the edit changed nothing), or
                # the writing happens beside it (export: 3 keeps the hand-edited mirror)
                assert code == 0 or (argv == ["export"] and code == 3), (argv, err)
                continue
            assert code == 2, (argv, code, err)
            assert re.search(r"read-only|cannot (create|export|open)|not permitted|denied", err), err
    with Store.open(store) as handle:
        assert handle.verify() == [] and handle.head() == 6
    record(f"test_read_only_store[{what}]", "bad inputs refused", sum(1 for _, c, _ in reads + writes if c))


# -- a store locked by another process ---------------------------------------------------------------

HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def held(store: Path, seconds: float):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    try:
        yield holder
    finally:
        holder.wait(timeout=60)


def test_qem_outlasts_a_short_lock(tmp_path):
    root = tmp_path / "ws"
    store = good_store(root)
    with held(store, 1.5):
        started = time.monotonic()
        reader = run_qem("list", cwd=root)  # WAL: reading is not blocked
        writer = run_qem("add", "written after the lock", "--kind", "task", cwd=root)
        waited = time.monotonic() - started
    assert reader.returncode == 0 and "note 0" in reader.stdout
    assert writer.returncode == 0, writer.stderr
    assert waited > 1.0
    assert "locked" not in writer.stderr.lower() and "busy" not in writer.stderr.lower()
    with Store.open(store) as handle:
        assert handle.notes()[-1].text == "written after the lock"


def test_the_retry_loop_outlasts_the_busy_timeout(tmp_path, monkeypatch):
    """SQLite's own wait is cut to 50 ms: qem's retry loop must carry the write through."""
    root = tmp_path / "ws"
    store = good_store(root)
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 50)
    with Store.open(store) as handle:
        with held(store, 1.0):
            started = time.monotonic()
            note = handle.write(lambda tx: tx.create(NewNote("task", "low", "agent", "patient"), "me"))
            assert time.monotonic() - started > 0.7
        assert handle.note(note.id).text == "patient"


def test_qem_gives_up_on_a_long_lock(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    store = good_store(root)
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(store_mod, "WRITE_PATIENCE_S", 0.5)
    log = log_of(store)
    with held(store, 2.0):
        started = time.monotonic()
        code, out, err = cli("add", "never", "--kind", "task", "--workspace", str(root))
        gave_up = time.monotonic() - started
    assert code == 2
    assert "stayed locked by another process" in err and "nothing was written" in err
    assert gave_up < 1.8
    assert log_of(store) == log
    record("test_qem_gives_up_on_a_long_lock", "bad inputs refused", 1)


def test_a_refused_write_leaves_nothing_behind(tmp_path):
    """A write refused halfway (after some events) is rolled back whole: the same handle
    then reads no trace of it and writes again at once."""
    root = tmp_path / "ws"
    store_path = good_store(root)
    with Store.open(store_path) as store:
        head, log = store.head(), log_of(store_path)

        def half(tx: Transaction) -> None:
            tx.create(NewNote("task", "low", "agent", "first of three"), "me")
            tx.emit(1, "revoked", "me", "second of three")
            tx.emit(1, "revoked", "me", "third: refused, #1 is revoked already")

        with pytest.raises(errors.Refused):
            store.write(half)
        assert store.head() == head and not store.conn.in_transaction
        assert [n.text for n in store.notes() if n.text == "first of three"] == []
        assert store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after"), "me")).id == 7
        assert store.verify() == []
    assert log_of(store_path).startswith(log)
    record("test_a_refused_write_leaves_nothing_behind", "bad inputs refused", 1)

"""Hostile and broken input: whatever a file or a store holds, qem applies exactly what the
file says or refuses with a message that names the line, and never half-writes.

- The check-in path is fuzzed (hypothesis) from three sides: random edits of random
  stores, planned and applied in-process and compared field by field with what the file
  says; arbitrary text and bytes checked in through the CLI code, where the only answers
  allowed are exit 0, 2 or 3 with the store untouched unless 0; and texts built to forge
  structure, which must round-trip through export → checkout → check-in unchanged.
- Huge, deep and binary files go through the real CLI.
- A memory directory that is not one (a file, an SQLite file, an old qem's store), a
  damaged or missing local index, a read-only memory, a memory locked for long: a clear
  message (or the index rebuilt from the log), no traceback, the log's bytes unchanged.
- A clone's memory is untrusted input: hostile log files in `.qem/events`, `.qem/texts`
  and `.qem/packs` (a wrong hash, not canonical, huge, binary, links, odd names, unknown
  event types, pointers to notes the log does not hold) are set aside with a message
  naming the file; no command crashes or writes outside `.qem/`, and `qem verify` lists
  each with exit 1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
import typer.main
from _reliability import AT, fast_dir, log_names, no_traceback, python_env, record, verify
from builders import render_text
from conftest import run_qem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qem_edit.reconciler.parse import clean_lines, parse
from qem_edit.renderer import Selection
from qem_edit.renderer.format import INDENT, ITEM_RE, escape_first_line, escape_text_line

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.base.stored_form import normalize_text
from qem_edit.base.vocabulary import KINDS, LIVE_STATES, PRIORITIES, TextError
from qem_edit.mirror.export import render_store
from qem_edit.shells import terminal
from qem_edit.shells.cli import main as qem_main
from qem_edit.storage import store as store_mod
from qem_edit.storage.logtree import canonical, event_object
from qem_edit.storage.store import Store
from qem_edit.storage.transaction import Transaction
from qem_edit.system import db
from qem_edit.system.workspace import Workspace
from qem_edit.transfer.dump import dump_lines
from qem_edit.writes import checkin, kept_edits
from qem_edit.writes.checkin_plan import propose

FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=150)

# Fragments of the file's own syntax, for texts that try to forge structure.
FORGERIES = [
    "- ", "## ", "## Tasks", "## Bogus", "# ", "[#1] ", "[#k3f9] ", "- [#k3f9] 2026-07-27 · high · agent · x",
    "- [#1] 2026-07-27 · high · agent · x", "- [#m2n8] FORGOTTEN 2026-07-27", " · ", "REVOKED", "REVOKED (x) · ",
    "STALE · ", "STALE (why) · ", "EXPIRED · ", "SUPERSEDED by #m2n8 · ", "supersedes #k3f9 · ", "FORGOTTEN",
    "DISPUTED with #m2n8 (dispute 9xq1ab) · ", "\\", "\\\\", "(", ")", "<!-- qem memory=k3f9m2n8 -->",
    "<!-- qem memory=zzzz · x -->", "<!-- qem:errors", "-->",
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
    return [prefix + escape_first_line(first)] + [INDENT + escape_text_line(line) if line else "" for line in more]


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


def check_applied_exactly(edited: str, before: dict, after: dict, created: list[str]) -> None:
    """The store after the check-in is what the file says, note by note (the file names
    notes by the short ids `before` shows them by)."""
    parsed = parse(edited)
    assert parsed.errors == []
    full = {n.shown: n.id for n in before.values()}
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
        in_file.add(full[item.note_id])
        old, new = before[full[item.note_id]], after[full[item.note_id]]
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
        path = scratch / f"s{next(counter)}"
        build_store(path, specs)
        with Store.open(path) as store:
            head, rendered = render_text(store)
            edited = apply_edits(rendered, edits)
            before = {n.id: n for n in store.notes()}
            for base_text in (rendered, None):  # a checkout (base.md at hand), or a bare file
                try:
                    planned = propose(store, edited, base_text)
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
                assert verify(store) == []
                after = {n.id: n for n in store.notes()}
                check_applied_exactly(edited, before, after, created)
                # and the result reads back clean: nothing left to check in
                again = propose(store, render_store(store)[1].decode('utf-8'))
                assert again.plan.ok and not again.plan.ops
                tried["applied"] += 1
            elif plan.ok:
                assert store.head() == head
                tried["nothing to do"] += 1
            else:
                assert store.head() == head
                tried["refused"] += 1
        shutil.rmtree(path)

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
        place = Workspace(root, root / ".qem")
        with Store.open(place.store_path, create=True) as store:
            store.write(lambda tx: [tx.create(NewNote(k, "medium", "agent", t), "forger") for t, k in zip(texts, kinds)], at=AT)
            before = {n.id: n for n in store.notes()}
            kept = kept_edits.new_checkout(store, place, Selection())
            shown = kept.file.read_text("utf-8")
            items = {i.note_id: i for i in parse(shown).items}
            assert len(items) == len(texts) and None not in items
            for note in before.values():
                assert items[note.shown].text == note.text and items[note.shown].state == "active"
            # unchanged: nothing to write
            planned = propose(store, shown, kept.base_file.read_text("utf-8"))
            assert planned.plan.ok and not planned.plan.ops and not planned.plan.agreed
            # one note added elsewhere: exactly one new note, the forged ones untouched
            edited = shown.replace("\n## Tasks\n", "\n## Tasks\n\n- an honest note\n", 1)
            kept.file.write_text(edited, "utf-8")
            count = len(store.events())
            assert terminal.run_checkin(store, place, kept.file, "fuzz", True, False, "forger").status == "applied"
            after = {n.id: n for n in store.notes()}
            # (a short id may have grown: the new note's id can share a prefix)
            assert {k: v._replace(short="") for k, v in after.items() if k in before} == {
                k: v._replace(short="") for k, v in before.items()}
            (new,) = [n for n in after.values() if n.id not in before]
            assert new.text == "an honest note" and new.kind == "task"
            assert len(store.events()) == count + 1
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
    build_store(root / ".qem", [
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
    only, a refusal names a line, and a refused check-in leaves store and file as they were.
    (A file checked in with no known base is read against the memory now, so each mangled
    rendering is made from the rendering of the memory as it is when the example runs.)"""
    ws = seed_workspace(scratch / "ws")
    store_path = ws / ".qem"
    tried = Counter()
    target = scratch / "edit.md"

    def now() -> str:
        with Store.open(store_path) as store:
            return render_store(store)[1].decode("utf-8")

    def spliced(edits, at: int, junk: bytes) -> bytes:
        data = apply_edits(now(), edits).encode("utf-8")
        at %= len(data) + 1
        return data[:at] + junk + data[at:]

    content = st.one_of(
        st.binary(max_size=300).map(lambda b: lambda: b),
        st.lists(EDIT, min_size=1, max_size=4).map(lambda e: lambda: apply_edits(now(), e).encode("utf-8")),
        st.tuples(st.lists(EDIT, max_size=3), st.integers(0, 10**6), st.binary(min_size=1, max_size=4)).map(
            lambda t: lambda: spliced(*t)),
    )

    @FUZZ
    @given(make=content)
    def run(make):
        data = make()
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
            assert re.search(r"line \d+|#[0-9a-z]+|nothing to check in|header", err), err

    run()
    with Store.open(store_path) as store:
        assert verify(store) == []
    assert tried["refused"] >= 50, tried
    record("test_arbitrary_files_through_the_cli", "examples", sum(tried.values()))
    record("test_arbitrary_files_through_the_cli", "outcomes", dict(tried))


# -- huge, deep and binary files, through the real CLI -----------------------------------------------


def checkin_file(ws: Path, tmp_path: Path, text: bytes, timeout: float = 60) -> subprocess.CompletedProcess:
    path = tmp_path / "edited.md"
    path.write_bytes(text)
    return run_qem("checkin", "--path", str(path), "-m", "big", "--yes", cwd=ws, timeout=timeout)


@pytest.mark.parametrize("line", [7, 1])
def test_invalid_utf8_names_its_line(seeded, tmp_path, line):
    """A byte that is not UTF-8 in a new note's line, or in the header line (found by the
    fuzzer below: the shortcut that parses only the changed blocks decoded the header)."""
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout.encode()
    lines = rendered.split(b"\n")
    if line == 1:
        lines[0] = lines[0][:32] + b"\x80" + lines[0][32:]
    else:
        lines.insert(6, b"- a new note with a bad byte \xff\xfe here")
    log = log_of(seeded / ".qem")
    done = checkin_file(seeded, tmp_path, b"\n".join(lines))
    assert done.returncode == 2
    assert f"line {line}: not UTF-8" in done.stderr
    no_traceback(done.stderr)
    assert log_of(seeded / ".qem") == log
    record(f"test_invalid_utf8_names_its_line[{line}]", "bad inputs refused", 1)


def test_huge_lines(seeded, tmp_path):
    """A 1 MB note text goes in and comes back byte for byte; a 1 MB stray line is refused
    by its line number; both in seconds."""
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    huge = "x" * 500_000 + " · REVOKED (" + "é" * 250_000
    started = time.monotonic()
    done = checkin_file(seeded, tmp_path, rendered.replace("## Tasks\n", f"## Tasks\n\n- {huge}\n", 1).encode())
    assert done.returncode == 0, done.stderr
    with Store.open(seeded / ".qem") as store:
        (note,) = [n for n in store.notes() if n.text and len(n.text) > 1000]
        assert note.text == huge
    stray = "y" * 1_000_000
    log = log_of(seeded / ".qem")
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    done = checkin_file(seeded, tmp_path, (rendered + stray + "\n").encode())
    assert done.returncode == 2
    assert f"line {rendered.count(chr(10)) + 1}:" in done.stderr
    assert len(done.stderr) < 5_000, "the message must not echo a megabyte"
    assert log_of(seeded / ".qem") == log
    assert time.monotonic() - started < 30
    no_traceback(done.stderr)
    record("test_huge_lines", "bad inputs refused", 1)


def test_deep_nesting(seeded, tmp_path):
    """3,000 indented lines (ever deeper), 2,000 nested list markers and 2,000 headings."""
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    deep = "\n".join(["a list, deeper and deeper:"] + [" " * i + "- level %d" % i for i in range(3000)])
    nested = "\n".join("- " * (i % 50 + 2) + f"nested {i}" for i in range(2000))
    text = rendered.replace("## Tasks\n", "## Tasks\n\n" + "\n".join(item_lines("- ", deep)) + "\n" + nested + "\n", 1)
    done = checkin_file(seeded, tmp_path, text.encode(), timeout=300)  # (~3 s on a quiet machine: room for a loaded one)
    assert done.returncode == 0, done.stderr[-2000:]
    with Store.open(seeded / ".qem") as store:
        texts = [n.text for n in store.notes()]
    assert deep in texts
    assert sum(1 for t in texts if t and t.startswith("- ") and "nested" in t) == 2000
    log = log_of(seeded / ".qem")
    rendered = run_qem("export", "--stdout", cwd=seeded).stdout
    headings = "\n".join("#" * (i % 7 + 1) + f" heading {i}" for i in range(2000))
    done = checkin_file(seeded, tmp_path, (rendered + headings + "\n").encode(), timeout=300)
    assert done.returncode == 2
    assert "not a qem section heading" in done.stderr
    assert log_of(seeded / ".qem") == log
    no_traceback(done.stderr)
    record("test_deep_nesting", "bad inputs refused", 1)


# Files that are no checkout of this memory, and the refusal some of them must get (the
# rest may also be read as a rendering that deletes every note, or as nothing to do).
NOT_CHECKOUTS = {
    "empty": (b"", None),
    "nuls": (b"\x00" * 1000, None),
    "binary": (bytes(range(256)) * 4, None),
    "bom": (b"\xef\xbb\xbf", None),
    "blank": (b"\n\n\n", None),
    # a header with no sections is a file cut short, not every note deleted
    "header-only": (b"@HEADER@", "the section `## Directives` is missing"),
    "other-memory": (b"<!-- qem memory=zzzzzzzzzzzz -->\n## Tasks\n- x\n", "another memory"),
    "old-header": (b"<!-- qem base=1 -->\n## Tasks\n- an old header\n", None),
    "no-header": (b"## Tasks\n- no header\n", None),
    "png": (b"\x89PNG\r\n\x1a\n" + b"\x00" * 50, None),
}


@pytest.mark.parametrize("data, refusal", NOT_CHECKOUTS.values(), ids=NOT_CHECKOUTS)
def test_files_that_are_not_checkouts(seeded, data, refusal):
    ws = seeded
    path = ws / "thing.md"
    header = run_qem("export", "--stdout", cwd=ws).stdout.split("\n", 1)[0].encode()
    data = data.replace(b"@HEADER@", header)
    path.write_bytes(data)
    log = log_of(ws / ".qem")
    code, out, err = cli("checkin", "--path", str(path), "-m", "x", "--yes", "--workspace", str(ws))
    assert code in (0, 2), err
    if refusal is not None:
        assert code == 2 and refusal in err, err
    assert log_of(ws / ".qem") == log
    assert path.read_bytes() == data
    if code == 2:
        assert err.startswith("qem: error:") or err.startswith("  "), err
    record(f"test_files_that_are_not_checkouts[{data[:8]!r}]", "bad inputs refused", int(code == 2))


# -- memories that are not (good) memories ----------------------------------------------------------

READS = [["list"], ["show", "@NOTE"], ["log"], ["export", "--stdout"], ["export", "--check"], ["dump"],
         ["query", "kind=task"], ["status", "@NOTE"], ["checkout"], ["verify"]]
WRITES = [["checkin", "--path", "MEMORY.md", "-m", "x", "--yes"], ["add", "x", "--kind", "task"],
          ["revoke", "@NOTE", "-m", "x"], ["export"], ["init"], ["edit", "-m", "x", "--yes"]]
LOCAL = ("index.db", "index.db-wal", "index.db-shm", "write.lock", "export.lock", "mirror-base.md")


def good_store(root: Path, notes: int = 6) -> Path:
    """A workspace whose memory holds `notes` task notes (one pack) and a mirror; returns
    the memory directory."""
    (root / ".qem").mkdir(parents=True, exist_ok=True)
    path = root / ".qem"
    build_store(path, [("task", "medium", "agent", f"note {i} " + "lorem ipsum " * 20, "none") for i in range(notes)])
    (root / "MEMORY.md").write_text(run_qem("export", "--stdout", cwd=root).stdout)
    return path


def snapshot(path: Path) -> dict[str, bytes]:
    """What qem must not change: a file's bytes, or every file of a memory directory but
    the local ones (the index, the locks, export's private copy; kept edits)."""
    if path.is_symlink() or path.is_file():
        return {"": path.read_bytes()}
    if not path.is_dir():
        return {}
    out = {}
    for p in sorted(path.rglob("*")):
        name = str(p.relative_to(path))
        if p.is_file() and not p.is_symlink() and name not in LOCAL and not name.startswith("checkouts"):
            out[name] = p.read_bytes()
    return out


def first_note(memory: Path) -> str:
    try:
        with Store.open(memory) as store:
            notes = store.notes()
            return notes[0].shown if notes else "k3f9"
    except errors.QemError:
        return "k3f9"


def run_all(root: Path, store: Path, commands, monkeypatch, note: str = "k3f9") -> list[tuple[list[str], int, str]]:
    """Each command on the memory `store`: no traceback, and what it holds unchanged by a
    failure."""
    monkeypatch.setenv("QEM_EDITOR", "true")
    monkeypatch.chdir(root)
    results = []
    for argv in commands:
        argv = [note if a == "@NOTE" else a for a in argv]
        before = snapshot(store)
        code, out, err = cli(*argv, "--workspace", str(root), "--store", str(store))
        if code != 0:
            assert snapshot(store) == before, f"`qem {' '.join(argv)}` failed and changed the memory"
            if code == 1:  # a check that found a difference: only verify and export --check
                assert argv in (["verify"], ["export", "--check"]), (argv, err)
            elif code == 3:  # export keeps a hand-edited mirror rather than discard the edit
                assert argv == ["export"] and "edited by hand" in err, (argv, err)
            else:
                assert code == 2 and "qem: error:" in err, (argv, code, err)
        results.append((argv, code, out + err))
    return results


def other_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE events (x); INSERT INTO events VALUES (1); PRAGMA user_version = 3;")
    conn.close()


@pytest.mark.parametrize("kind", ["text-file", "sqlite-file", "old-store"])
def test_not_a_memory(tmp_path, monkeypatch, kind):
    """`--store` names what is not a memory directory: a file of notes, an SQLite file (a
    memory is a directory now; SQLite holds only its local index), or an old qem's store
    (one SQLite file, `memory.db`): every command says so, exit 2, and changes nothing."""
    root = tmp_path / "ws"
    root.mkdir()
    store = root / "store"
    if kind == "text-file":
        store.write_text("these are my notes, not a memory\n" * 200)
    elif kind == "sqlite-file":
        other_sqlite(store)
    else:
        store.mkdir()
        other_sqlite(store / "memory.db")
    (root / "MEMORY.md").write_text("<!-- qem memory=zzzz -->\n## Tasks\n- x\n")
    results = run_all(root, store, READS + WRITES, monkeypatch)
    for argv, code, err in results:
        assert code == 2, (argv, code, err)
        if kind == "old-store":
            assert "older qem" in err and "qem migrate" in err, err
        else:
            assert str(store) in err and re.search(r"no qem memory|not a directory|cannot create", err, re.I), err
    assert not (root / ".qem").exists()
    record(f"test_not_a_memory[{kind}]", "bad inputs refused", len(results))


def test_an_empty_directory_becomes_a_memory_on_the_first_write(tmp_path, monkeypatch):
    """An empty memory directory: reads say there is no memory yet (and create nothing);
    the first write makes it one."""
    root = tmp_path / "ws"
    root.mkdir()
    store = root / "memory"
    store.mkdir()
    for argv, code, err in run_all(root, store, [r for r in READS if r != ["checkout"]], monkeypatch):
        assert code == 2 and "no qem memory" in err, (argv, err)
    assert list(store.iterdir()) == []
    code, out, err = cli("add", "first", "--kind", "task", "--store", str(store), "--workspace", str(root))
    assert code == 0, err
    with Store.open(store) as handle:
        assert verify(handle) == []
        assert [n.text for n in handle.notes()] == ["first"] and handle.notes()[0].shown == out.strip()
    record("test_an_empty_directory_becomes_a_memory_on_the_first_write", "bad inputs refused", len(READS) - 1)


PAGE = 4096


def overwritten(at, junk: bytes):  # type: ignore[no-untyped-def]
    """A damage to a file's bytes: `junk` written over them from `at(data)` on."""
    return lambda data: data[: at(data)] + junk + data[at(data) + len(junk):]


def middle(data: bytes) -> int:
    """The start of the page halfway through the file."""
    return (len(data) // PAGE // 2) * PAGE


def rewritten(damage):  # type: ignore[no-untyped-def]
    return lambda path: path.write_bytes(damage(path.read_bytes()))


def into_a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


# How the local index is damaged (its -wal and -shm files are removed first).
CORRUPTIONS = {
    "truncate-60%": rewritten(lambda data: data[: (len(data) * 6 // 10) // PAGE * PAGE]),
    "truncate-1k": rewritten(lambda data: data[:1000]),
    "zero-a-page": rewritten(overwritten(middle, bytes(PAGE))),
    "garble-a-page": rewritten(overwritten(middle, bytes((i * 37 + 11) % 256 for i in range(PAGE)))),
    "garble-header": rewritten(overwritten(lambda data: 0, b"not an sqlite db")),
    "garble-64-bytes": rewritten(overwritten(lambda data: middle(data) + 1000,
                                             bytes((i * 91 + 7) % 256 for i in range(64)))),
    "missing": Path.unlink,
    "empty": lambda path: path.write_bytes(b""),
    "a-directory": into_a_directory,
}


def corrupt(path: Path, how: str) -> None:
    for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        extra.unlink(missing_ok=True)
    CORRUPTIONS[how](path)


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Workspaces made once per module and copied by each test that starts from one."""
    made: dict[str, Path] = {}

    def copy(name: str, make, to: Path) -> Path:  # type: ignore[no-untyped-def]
        if name not in made:
            made[name] = tmp_path_factory.mktemp(f"template-{name}") / "ws"
            make(made[name])
        shutil.copytree(made[name], to, symlinks=True)
        return to / ".qem"

    return copy


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_damaged_index(tmp_path, monkeypatch, how, templates):
    """The local index (`.qem/index.db`) damaged or gone: it is only a cache of the log.
    No command shows a traceback or changes the log; a command either works (the index
    rebuilt from the log) or, where the damage lies deeper than qem looks on opening,
    exits 2 naming the index and how to rebuild it; `qem verify --repair` always brings
    every note back."""
    root = tmp_path / "ws"
    memory = templates("120 notes", lambda ws: good_store(ws, notes=120), root)
    index = memory / "index.db"
    assert index.stat().st_size > 8 * 4096
    log = snapshot(memory)
    corrupt(index, how)
    results = run_all(root, memory, READS + WRITES, monkeypatch, note=first_note_of_log(memory))
    failed = [argv for argv, code, _ in results if code not in (0, 1, 3)]
    for argv, code, err in results:
        if code == 2:  # named: damaged (qem rebuilds it), or, a folder in its place, cannot be opened
            assert "index.db" in err, (argv, err)
    # the log held every note throughout (the writes that worked added to it)
    assert all(snapshot(memory).get(name) == data for name, data in log.items())
    if how == "a-directory":
        shutil.rmtree(index)  # not a file qem made: the person clears it
    code, out, err = cli("verify", "--repair", "--workspace", str(root))
    assert code in (0, 1), err
    with Store.open(memory) as handle:
        problems = verify(handle)
        assert problems == [], problems
        assert sum(1 for n in handle.notes() if n.text.startswith("note ")) == 120
    record(f"test_damaged_index[{how}]", "bad inputs refused", len(failed))
    record(f"test_damaged_index[{how}]", "commands that worked", len(results) - len(failed))


def first_note_of_log(memory: Path) -> str:
    """A note's short id, read from the log alone (the index may be damaged)."""
    from qem_edit.storage.logtree import LogTree

    tree = LogTree(memory)
    for name in sorted(tree.names()):
        events, _ = tree.read(name)
        created = [e.id for e in events if e.type == "created"]
        if created:
            return min(created)[:8]
    return "k3f9"


def test_a_write_that_reached_the_log_stands_when_the_index_fails(tmp_path, monkeypatch):
    """The index fails after the write's event file is in place (a damaged page met while
    recording it): the write is in the log, so it is reported as written (not "nothing was
    written", which would have the person write it twice), and the index catches up."""
    from qem_edit.storage import index as index_mod

    root = tmp_path / "ws"
    memory = good_store(root)
    real = index_mod.Index.refold
    failed = []

    def refold_once(self, note_ids):  # type: ignore[no-untyped-def]
        if not failed:
            failed.append(True)
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, note_ids)

    monkeypatch.setattr(index_mod.Index, "refold", refold_once)
    with Store.open(memory) as store:
        note = store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "written once"), "me"))
        assert failed and store.note(note.id).text == "written once"
    with Store.open(memory) as store:
        assert [n.text for n in store.notes()].count("written once") == 1
        assert verify(store) == []
    record("test_a_write_that_reached_the_log_stands_when_the_index_fails", "bad inputs refused", 0)


# -- a read-only memory --------------------------------------------------------------------------------


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


@pytest.mark.parametrize("what", ["the log", "the whole memory"])
def test_read_only_memory(tmp_path, monkeypatch, what):
    """The log read-only (its folders and files; the index beside it writable), or the
    whole memory directory with its index (a read-only mount: reads build an index in
    memory): reads work, every write to the log is refused with exit 2, nothing changes."""
    root = tmp_path / "ws"
    memory = good_store(root)
    edit = root / "MEMORY.md"
    edit.write_text(edit.read_text().replace("## Tasks\n", "## Tasks\n\n- one more\n"))
    note = first_note(memory)
    log = [memory / d for d in ("events", "texts", "packs")]
    paths = log + [p for d in log for p in d.iterdir()] + [memory / "config.toml"]
    if what == "the whole memory":
        paths += [p for p in memory.iterdir() if p.is_file()] + [memory]
    before = snapshot(memory)
    with read_only(*dict.fromkeys(paths)):
        reads = run_all(root, memory, [r for r in READS if r != ["checkout"]], monkeypatch, note)
        for argv, code, err in reads:
            # (verify and export --check find the hand edit of the mirror: exit 1)
            assert code == 0 or (argv in (["export", "--check"], ["verify"]) and code == 1), (argv, err)
            if argv == ["verify"]:
                assert "edited by hand" in err and len(err.strip().splitlines()) == 2, err
        writes = run_all(root, memory, WRITES + [["checkout"]], monkeypatch, note)
        for argv, code, err in writes:
            if argv[0] == "init" or (what == "the log" and argv[0] in ("checkout", "edit", "export")):
                # nothing to write in the log (it exists; the edit changed nothing), or the
                # writing happens beside it (export: 3 keeps the hand-edited mirror)
                assert code == 0 or (argv == ["export"] and code == 3), (argv, err)
                continue
            assert code == 2, (argv, code, err)
            assert re.search(r"read-only|cannot (create|export|open|write|keep)|not permitted|denied", err), err
        assert snapshot(memory) == before
    with Store.open(memory) as handle:
        assert verify(handle) == [] and len(handle.notes()) == 6
    record(f"test_read_only_memory[{what}]", "bad inputs refused", sum(1 for _, c, _ in reads + writes if c))


# -- a memory locked by another process ------------------------------------------------------------

WRITER = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""
INDEX_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def held(what: Path, seconds: float, script: str = WRITER):
    """Another process holds `what` (the write lock, or with INDEX_HOLDER the index) for
    `seconds`."""
    holder = subprocess.Popen([sys.executable, "-c", script, str(what), str(seconds)],
                              stdout=subprocess.PIPE, text=True, env=python_env())
    assert holder.stdout.readline().strip() == "locked"
    try:
        yield holder
    finally:
        holder.wait(timeout=60)


def test_qem_outlasts_another_writer(tmp_path):
    """Another writer holds the memory's write lock for 4 s: reads answer while it holds
    it, a write waits its turn and lands, with no message (judged by the holder's state,
    not by a clock, so a busy machine cannot fail it)."""
    root = tmp_path / "ws"
    memory = good_store(root)
    with held(memory / store_mod.LOCK_NAME, 4) as holder:
        reader = run_qem("list", cwd=root)  # reading takes no lock
        held_after_read = holder.poll() is None
        writer = run_qem("add", "written after the lock", "--kind", "task", cwd=root)
        released_before_write = holder.poll() is not None
    assert reader.returncode == 0 and "note 0" in reader.stdout
    assert held_after_read, "a read waited for the writer"
    assert writer.returncode == 0, writer.stderr
    assert released_before_write, "the write did not wait for the lock"
    assert "locked" not in writer.stderr.lower() and "busy" not in writer.stderr.lower()
    with Store.open(memory) as handle:
        assert [n.text for n in handle.notes()].count("written after the lock") == 1


def test_the_retry_loop_outlasts_the_busy_timeout(tmp_path, monkeypatch):
    """Another process holds the index; SQLite's own wait is cut to 50 ms: qem's retry
    loop must carry the write through."""
    root = tmp_path / "ws"
    memory = good_store(root)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    with Store.open(memory) as handle:
        with held(memory / "index.db", 1.0, INDEX_HOLDER):
            started = time.monotonic()
            note = handle.write(lambda tx: tx.create(NewNote("task", "low", "agent", "patient"), "me"))
            assert time.monotonic() - started > 0.7
        assert handle.note(note.id).text == "patient"
        assert verify(handle) == []


@pytest.mark.parametrize("what", ["the write lock", "the index"])
def test_qem_gives_up_on_a_long_lock(tmp_path, monkeypatch, what):
    root = tmp_path / "ws"
    memory = good_store(root)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(db, "WRITE_PATIENCE_S", 0.5)
    monkeypatch.setattr(store_mod, "WRITE_PATIENCE_S", 0.5)
    log = log_of(memory)
    names = log_names(memory)
    holding = (memory / store_mod.LOCK_NAME, 4.0) if what == "the write lock" else (memory / "index.db", 4.0, INDEX_HOLDER)
    with held(*holding) as holder:
        code, out, err = cli("add", "never", "--kind", "task", "--workspace", str(root))
        gave_up_while_held = holder.poll() is None  # the holder's state, not a clock: a busy machine cannot fail it
    assert code == 2
    assert re.search(r"stayed locked by another (writer|process)", err), err
    if what == "the write lock":
        assert "nothing was written" in err
    assert gave_up_while_held, "it waited for the lock past its patience"
    assert log_of(memory) == log and log_names(memory) == names
    record(f"test_qem_gives_up_on_a_long_lock[{what}]", "bad inputs refused", 1)


def test_a_refused_write_leaves_nothing_behind(tmp_path):
    """A write refused halfway (after some events) leaves nothing: no log file, no trace
    in the index; the same handle then writes again at once."""
    root = tmp_path / "ws"
    store_path = good_store(root)
    with Store.open(store_path) as store:
        head, log, names = store.head(), log_of(store_path), log_names(store_path)
        first = store.notes()[0].id

        def half(tx: Transaction) -> None:
            tx.create(NewNote("task", "low", "agent", "first of three"), "me")
            tx.emit(first, "revoked", "me", "second of three")
            tx.emit(first, "revoked", "me", "third: refused, the note is revoked already")

        with pytest.raises(errors.Refused):
            store.write(half)
        assert store.head() == head and not store.conn.in_transaction
        assert log_names(store_path) == names
        assert [n.text for n in store.notes() if n.text == "first of three"] == []
        after = store.write(lambda tx: tx.create(NewNote("task", "low", "agent", "after"), "me"))
        assert store.note(after.id).text == "after" and len(store.notes()) == 7
        assert verify(store) == []
    assert log_of(store_path).startswith(log)
    assert not [p for d in ("events", "texts", "packs") for p in (store_path / d).glob(".*")], "temp files left"
    record("test_a_refused_write_leaves_nothing_behind", "bad inputs refused", 1)


# -- hostile log files: a clone's memory is untrusted input -----------------------------------------


def a_memory_with_loose_files(root: Path) -> Path:
    """A workspace with a memory of one pack (6 notes) and loose files (a note added, a
    note revoked: one event file each, and a text file), and its mirror exported."""
    memory = good_store(root)
    assert run_qem("add", "a loose note", "--kind", "gotcha", cwd=root).returncode == 0
    assert run_qem("revoke", first_note(memory), "-m", "loose", cwd=root).returncode == 0
    assert run_qem("export", "--force", cwd=root).returncode == 0
    return memory


def event_like(memory: Path, **changes) -> dict:
    """A stored event object (the log's first `created` event), changed."""
    with Store.open(memory) as store:
        created = next(e for e in store.events() if e.type == "created")
    obj = event_object(created)
    obj.update(changes)
    return obj


def write_named(memory: Path, folder: str, data: bytes, pack: str | None = None) -> str:
    """`data` under the name its hash gives it (an event file, or a pack of `pack` kind)."""
    name = f"{folder}/{ids.content_id(data)}" if pack is None else f"packs/{pack}-{ids.content_id(data)}.jsonl"
    (memory / name).write_bytes(data)
    return name


RANDOM_ID = ids.encode(bytes(range(17)))  # a well-formed id no note of the log has
BINARY = bytes((i * 131 + 7) % 256 for i in range(4096))


def hashed(folder: str, make, says: str, pack: str | None = None):  # type: ignore[no-untyped-def]
    """A planter of the bytes `make(memory)`, under the name their hash gives them."""
    return lambda memory, outside: (write_named(memory, folder, make(memory), pack), says)


def placed(name: str, make, says: str):  # type: ignore[no-untyped-def]
    """A planter that makes the file `name` with `make(path, outside)`."""
    return lambda memory, outside: (make(memory / name, outside), (name, says))[1]


def huge(path: Path, outside: Path) -> None:
    with open(path, "wb") as out:
        out.truncate((16 << 20) + 1)


def a_folder(path: Path, outside: Path) -> None:
    path.mkdir()
    (path / "x").write_bytes(b"{}\n")


def by_text(folder: str, text: str, memory: Path) -> str:
    """The name of the `folder` file named by the note whose text is `text`."""
    with Store.open(memory) as store:
        return f"{folder}/" + next(n.id for n in store.notes() if n.text == text)


def _wrong_hash(memory: Path, outside: Path) -> tuple[str, str]:
    name = f"events/{ids.content_id(b'something else')}"
    (memory / name).write_bytes(canonical(event_like(memory, actor="mallory")))
    return name, "do not hash to its name"


def _edited_by_hand(memory: Path, outside: Path) -> tuple[str, str]:  # the loose note's created event
    name = by_text("events", "a loose note", memory)
    path = memory / name
    path.write_bytes(path.read_bytes().replace(b'"actor":"', b'"actor":"mallory, ', 1))
    return name, "do not hash to its name"


def _pack_with_a_bad_line(memory: Path, outside: Path) -> tuple[str, str]:
    good = canonical(event_like(memory, actor="mallory"))
    bad = json.dumps(event_like(memory, actor="mallory too"), indent=None).encode() + b"\n"
    name = write_named(memory, "packs", good + bad, pack="e")
    return name, f"{name}:2: not in canonical form"


def _link_to_a_file_outside(memory: Path, outside: Path) -> tuple[str, str]:
    data = canonical(event_like(memory, actor="mallory"))
    target = outside / "event"
    target.write_bytes(data)  # a valid event: only the link is wrong
    name = f"events/{ids.content_id(data)}"
    (memory / name).symlink_to(target)
    return name, "not a regular file"


def _odd_names(memory: Path, outside: Path) -> tuple[str, str]:
    for name in ("events/not..an..id", "packs/e-..jsonl", "texts/..%2f..%2fetc%2fpasswd", "events/README.md"):
        (memory / name).write_bytes(canonical(event_like(memory)))
    return "events/not..an..id", "packs/e-..jsonl"


def _supersedes_a_missing_note(memory: Path) -> bytes:
    obj = event_like(memory)
    obj["data"] = {**obj["data"], "supersedes": RANDOM_ID}
    return canonical(obj)


def _superseded_by_a_missing_note(memory: Path) -> bytes:
    with Store.open(memory) as store:
        note = next(n for n in store.notes() if n.state == "active")
        tips = store.tips(note.id)
    return canonical(event_like(memory, type="superseded", note=note.id, prev=tips, data={"by": RANDOM_ID}, reason="x"))


def _text_of_another_text(memory: Path, outside: Path) -> tuple[str, str]:  # the loose note's text
    name = by_text("texts", "a loose note", memory)
    (memory / name).write_bytes(canonical({"key": "k", "text": "a text its note never had"}))
    return name, "its text is missing from the log"


# Each hostile log file: how it is planted in a memory (given the folder outside it),
# returning its name under `.qem/` and what `qem verify` must say about it.
HOSTILE_LOG_FILES = {
    "wrong-hash": _wrong_hash,
    "edited-by-hand": _edited_by_hand,
    "not-canonical": hashed("events", lambda m: json.dumps(event_like(m, actor="mallory"), indent=1).encode(),
                            "not in canonical form"),
    "huge-event": hashed("events", lambda m: b"{" + b" " * (1 << 20) + b"}\n", "over the"),
    "huge-text": placed(f"texts/{RANDOM_ID}", huge, "over the"),
    "binary-event": hashed("events", lambda m: BINARY, "not JSON"),
    "binary-pack": hashed("packs", lambda m: BINARY + b"\n", "not JSON", pack="e"),
    "binary-text": placed(f"texts/{RANDOM_ID}", lambda path, _: path.write_bytes(b"\xff\xfe\x00" * 100), "not JSON"),
    "pack-with-a-bad-line": _pack_with_a_bad_line,
    "pack-cut-short": hashed("packs", lambda m: canonical(event_like(m, actor="mallory"))[:-20], "cut short", pack="e"),
    "link-to-a-file-outside": _link_to_a_file_outside,
    "link-to-a-folder-outside": placed(f"packs/e-{RANDOM_ID}.jsonl", Path.symlink_to, "not a regular file"),
    "a-folder": placed(f"events/{RANDOM_ID}", a_folder, "not a regular file"),
    "odd-names": _odd_names,
    "unknown-event-type": hashed("events", lambda m: canonical(event_like(m, type="exploded")), "unknown event type"),
    "newer-format": hashed("events", lambda m: canonical(event_like(m, v=2)), "this qem reads format 1"),
    "missing-note": hashed("events", lambda m: canonical(event_like(
        m, type="revoked", note=RANDOM_ID, prev=[RANDOM_ID], data={}, reason="gone")),
        f"names note {RANDOM_ID[:8]}, whose creation the log does not hold"),
    "supersedes-a-missing-note": hashed("events", _supersedes_a_missing_note, RANDOM_ID[:4]),
    "superseded-by-a-missing-note": hashed("events", _superseded_by_a_missing_note, RANDOM_ID[:4]),
    "text-of-another-text": _text_of_another_text,
}


def outside_state(tmp_path: Path, root: Path) -> dict[str, bytes]:
    """Every file outside the memory directory qem could write to: the workspace's (but
    the mirror, which qem writes) and the test's outside folder."""
    out = {}
    for base in (root, tmp_path / "outside"):
        for p in sorted(base.rglob("*")):
            if ".qem" in p.relative_to(base).parts or p == root / "MEMORY.md":
                continue
            out[str(p)] = p.read_bytes() if p.is_file() else b"<dir>"
    return out


@pytest.mark.parametrize("kind", HOSTILE_LOG_FILES)
def test_hostile_log_file(tmp_path, monkeypatch, kind, templates):
    """One hostile file in the log of a cloned memory: every command works on the rest of
    the log (exit 0, or 1 for a check, 3 for export keeping the hand-edited mirror), with
    no traceback; the file is left where it is, unchanged; nothing is written outside
    `.qem/` but the mirror; `qem verify` exits 1 and names it."""
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"do not touch\n")
    memory = templates("loose files", a_memory_with_loose_files, root)
    name, says = HOSTILE_LOG_FILES[kind](memory, outside)
    planted = memory / name
    kept = os.readlink(planted) if planted.is_symlink() else (None if planted.is_dir() else planted.read_bytes())
    around = outside_state(tmp_path, root)
    note = next(n for n in first_note_of_log_all(memory) if n)
    edit = root / "MEMORY.md"
    edit.write_text(edit.read_text().replace("## Tasks\n", "## Tasks\n\n- one more\n"))
    monkeypatch.setenv("QEM_EDITOR", "true")
    monkeypatch.chdir(root)
    results = []
    for argv in READS + WRITES + [["verify"], ["verify", "--repair"], ["pack"], ["verify"]]:
        argv = [note if a == "@NOTE" else a for a in argv]
        if argv == ["pack"]:  # (packing moves a valid loose event into a pack: it is not kept as it was)
            now = os.readlink(planted) if planted.is_symlink() else (None if planted.is_dir() else planted.read_bytes())
            assert now == kept, "qem changed a hostile log file"
        code, out, err = cli(*argv, "--workspace", str(root))
        results.append((argv, code, out, err))
        if argv[0] == "verify":
            assert code == 1, (kind, out, err)
            # names it: the file, or what it says (a file changed in place since the index
            # read it: the note the index disagrees about, until --repair)
            assert name in out or says in out or f"note {name.split('/')[-1][:8]}: the index disagrees" in out, (
                kind, name, out)
            if argv == ["verify", "--repair"]:
                assert says in out, (kind, says, out)
        elif argv == ["export", "--check"]:
            assert code in (0, 1), (argv, err)
        elif argv == ["export"]:
            assert code in (0, 3), (argv, err)
        else:
            assert code == 0, (kind, argv, code, err)
    assert outside_state(tmp_path, root) == around, "qem wrote outside .qem/"
    with Store.open(memory) as store:
        texts = [n.text for n in store.notes()]
        # (a file changed in place held the loose note's event or text: set aside since --repair)
        assert ("a loose note" in texts) != (kind in ("edited-by-hand", "text-of-another-text"))
        assert "x" in texts and "one more" in texts
        assert not any("mallory" in e.actor for e in store.events()), "a hostile event was read"
        assert "a text its note never had" not in texts
    record(f"test_hostile_log_file[{kind}]", "commands run", len(results))


def first_note_of_log_all(memory: Path) -> list[str]:
    with Store.open(memory) as store:
        return [n.shown for n in store.notes() if n.state == "active"]


@pytest.mark.parametrize("name", [
    "events/../../etc/passwd", "events/../config.toml", "packs/../events/x", "texts/a/b", "../events/x",
    "events/", "notes/x", "events/..", "packs/e-../../x.jsonl", "/etc/passwd",
])
def test_log_names_from_a_git_tree_never_leave_the_log(name):
    """Names read from a git revision (`--at REV`) are only ever names of the log's own
    kinds: anything else, `..` and absolute paths included, is set aside."""
    from qem_edit.storage.logtree import LogFileError, records_from

    with pytest.raises(LogFileError):
        records_from(name, canonical({"key": "k", "text": "t"}))


@pytest.mark.parametrize("folder", ["events", "texts", "packs"])
def test_a_linked_log_folder_is_not_written_through(tmp_path, folder):
    """`.qem/events`, `texts` or `packs` replaced by a link to a folder elsewhere, as a
    hostile clone might commit it: qem writes nothing there (no note text, no event, no
    pack); the write is refused, exit 2, naming the link."""
    root = tmp_path / "ws"
    memory = good_store(root)
    assert run_qem("add", "a loose note", "--kind", "task", cwd=root).returncode == 0  # something to pack
    elsewhere = tmp_path / "outside" / folder
    elsewhere.parent.mkdir()
    (memory / folder).rename(elsewhere)
    (memory / folder).symlink_to(elsewhere)
    before = snapshot(elsewhere)
    for argv in (["add", "a secret that must stay inside", "--kind", "task"], ["pack"],
                 ["checkin", "--path", "MEMORY.md", "-m", "x", "--yes"]):
        if argv[0] == "checkin":
            (root / "MEMORY.md").write_text(run_qem("export", "--stdout", cwd=root).stdout.replace(
                "## Tasks\n", "## Tasks\n\n- one more\n- and another\n"))
        done = run_qem(*argv, cwd=root)
        no_traceback(done.stderr)
        assert snapshot(elsewhere) == before, f"`qem {argv[0]}` wrote through the linked {folder}"
        assert done.returncode == 2 and f"{folder} is a symbolic link" in done.stderr, (argv, done.stderr)
    record(f"test_a_linked_log_folder_is_not_written_through[{folder}]", "bad inputs refused", 3)

"""The `qem` command line, run as a user runs it (a child process), except for bulk setup,
which goes through the store in-process to keep the suite fast.

Every refusal is checked for its exit code, the key words of its message, the absence of a
traceback, and a memory left byte-for-byte as it was: its dump, its notes, and every file
of its log (`.qem/events`, `texts`, `packs`) and its `config.toml`, by name and bytes.
The local index (`.qem/index.db`) is not the memory: any command may bring it up to date.

Notes are named on the command line by their short ids (as `qem add` prints them and
MEMORY.md shows them); messages name them the same way.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from builders import AT, add, emit, forget, store_path
from conftest import CORPUS, run_qem

from qem_edit.base import ids
from qem_edit.mirror.verify import verify_report
from qem_edit.shells import cli
from qem_edit.storage.logtree import LogTree, canonical
from qem_edit.storage.store import Store
from qem_edit.transfer.dump import dump_lines

VERBS = ("init", "add", "supersede", "revoke", "flag-stale", "reinstate", "promote", "expire",
         "forget", "show", "list", "log", "verify", "dump", "load")
NOTE_KEYS = {"id", "short", "alias", "kind", "priority", "text", "provenance", "state", "created_at", "actor",
             "supersedes", "superseded_by"}
EVENT_KEYS = {"id", "note", "type", "at", "actor", "reason", "checkin", "clock", "prev", "data"}


# -- helpers --------------------------------------------------------------------------------


def open_store(root: Path) -> Store:
    return Store.open(store_path(root), create=True)


_TEMPLATE: dict[str, object] = {}


def populate(root: Path) -> dict[str, str]:
    """One note in every state, plus a human one; returns their short ids by name (their
    full ids: `full_ids()`).

    Built once per session and copied: a dozen committed transactions per test add up."""
    if "files" not in _TEMPLATE:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            _TEMPLATE["full"] = _build_population(Path(scratch))
            memory = store_path(Path(scratch))
            _TEMPLATE["files"] = {p.relative_to(memory): p.read_bytes() for p in memory.rglob("*") if p.is_file()}
    for name, data in _TEMPLATE["files"].items():  # type: ignore[union-attr]
        (store_path(root) / name).parent.mkdir(parents=True, exist_ok=True)
        (store_path(root) / name).write_bytes(data)
    with Store.open(store_path(root)) as s:
        return {name: s.note(full).shown for name, full in full_ids().items()}


def full_ids() -> dict[str, str]:
    """The populated notes' full ids by name (the same in every copy)."""
    return dict(_TEMPLATE["full"])  # type: ignore[arg-type]


def _build_population(root: Path) -> dict[str, str]:
    with open_store(root) as s:
        ids_ = {name: add(s, f"the {name} note", kind, actor="setup") for name, kind in [
            ("active", "directive"), ("stale", "task"), ("superseded", "gotcha"),
            ("revoked", "finding"), ("expired", "reference"), ("forgotten", "decision"),
            ("human", "operational")]}
        emit(s, ids_["stale"], "stale_flagged", "setup", actor="setup")
        ids_["successor"] = add(s, "the successor note", supersedes=ids_["superseded"], actor="setup")
        emit(s, ids_["revoked"], "revoked", "setup", actor="setup")
        emit(s, ids_["expired"], "expired", "setup", actor="setup")
        forget(s, ids_["forgotten"], "secret", actor="setup")
        emit(s, ids_["human"], "promoted", "setup", actor="setup")
        for name, note_id in ids_.items():
            assert s.note(note_id).state == {"human": "active", "successor": "active"}.get(name, name)
    return ids_


def log_bytes(root: Path) -> dict[str, bytes]:
    """Every file of the memory's log, and its config, by name: what a write changes."""
    memory = store_path(root)
    files = {name: (memory / name).read_bytes() for name in sorted(LogTree(memory).names())}
    config = memory / "config.toml"
    if config.exists():
        files["config.toml"] = config.read_bytes()
    return files


def snapshot(root: Path) -> tuple[str, list, str]:
    """The dump (what `qem dump` prints), the notes, and a hash of the log's files."""
    with Store.open(store_path(root)) as s:
        state = "".join(dump_lines(s)), [n.to_json() for n in s.notes()]
    digest = hashlib.sha256()
    for name, data in log_bytes(root).items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return (*state, digest.hexdigest())


def verified(root: Path) -> list[str]:
    """What `qem verify` reports for the workspace's memory: problems and open disputes."""
    with Store.open(store_path(root)) as s:
        report = verify_report(s)
        return report.problems + report.disputes


def refused(proc: subprocess.CompletedProcess, *words: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    message = proc.stderr.lower()
    for word in words:
        assert word.lower() in message, (word, proc.stderr)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


def short_id(proc: subprocess.CompletedProcess) -> str:
    """The short id a write printed (`qem add`, `qem supersede`)."""
    shown = ok(proc).stdout.strip()
    assert ids.is_prefix(shown) and not shown.isdigit() and len(shown) >= ids.MIN_SHORT, shown
    return shown


def by_args(*rows) -> list:  # type: ignore[no-untyped-def]
    """Table rows whose first item is a command line, each case named by it."""
    return [pytest.param(*row, id=" ".join(row[0])) for row in rows]


def run_bytes(args, cwd: Path, data: bytes) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=cwd, input=data,
                          capture_output=True)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))
@pytest.fixture
def qem_here(ws, monkeypatch, capsys):
    """`cli.main` in this process, in the workspace: same code, same messages, same exit code,
    without a child process's startup.  For the long refusal tables; each table also has a
    few cases run through the real entry point (`qem`), to prove the two agree."""
    monkeypatch.chdir(ws)

    def call(*args: str, input: str | bytes | None = None) -> subprocess.CompletedProcess:
        data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            cli.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, exit_.value.code, out.out, out.err)

    return call


# -- help ------------------------------------------------------------------------------------


def test_top_level_help_lists_the_verbs_and_exit_codes(qem):
    out = ok(qem("--help")).stdout
    for verb in VERBS:
        assert verb in out
    assert "Exit codes" in out
    for code, words in [("0", "ok"), ("1", "difference"), ("2", "bad usage"), ("3", "conflict"),
                        ("130", "interrupted")]:
        assert any(line.split()[:1] == [code] and words in line for line in out.splitlines()), code


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help_with_an_example(verb, capsys):
    # in-process: `--help` is pure output, and 15 child processes would cost seconds
    with pytest.raises(SystemExit) as exit_:
        cli.main([verb, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "Example:" in out and f"qem {verb}" in out.split("Example:", 1)[1]


def test_no_arguments_shows_usage_not_a_traceback(qem):
    proc = qem()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Usage" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["frobnicate"], ["no such command"]),
        (["show"], ["missing"]),
        (["show", "1", "--at"], ["requires an argument"]),
        (["list", "--colour"], ["no such option"]),
        (["add", "text without a kind"], ["missing", "--kind"]),
        (["revoke"], ["missing"]),
    ],
)
def test_usage_errors_exit_2_without_traceback(qem_here, ws, args, words):
    populate(ws)
    before = snapshot(ws)
    refused(qem_here(*args), *words)
    assert snapshot(ws) == before


@pytest.mark.parametrize("args, words", by_args((["list", "--state"], ["requires an argument"]),
                                                 (["frobnicate"], ["no such command"])))
def test_usage_errors_through_the_real_entry_point(qem, ws, args, words):
    # typer vendors its own click: a usage error once escaped `main` as a traceback, exit 1
    refused(qem(*args), *words)


# -- where the memory lives ------------------------------------------------------------------


def test_init_creates_and_is_idempotent(qem, ws):
    first = ok(qem("init"))
    assert "created a new memory" in first.stdout and str(store_path(ws)) in first.stdout
    assert store_path(ws).is_dir() and (store_path(ws) / "events").is_dir()
    assert (store_path(ws) / "config.toml").read_text().count("[memory]") == 1
    config = (store_path(ws) / "config.toml").read_bytes()
    again = ok(qem("init"))
    assert "already exists" in again.stdout
    assert (store_path(ws) / "config.toml").read_bytes() == config  # the memory keeps its id
    assert ok(qem("verify")).stderr.startswith("ok: ")


def test_first_write_creates_the_store_and_says_so(qem, ws):
    first = qem("add", "the first note", "--kind", "task")
    one = short_id(first)
    assert "created a new memory" in first.stderr and str(store_path(ws)) in first.stderr
    second = qem("add", "the second note", "--kind", "task")
    two = short_id(second)
    assert "created" not in second.stderr and one != two


@pytest.mark.parametrize("args", [["show", "1"], ["list"], ["log"], ["verify"], ["dump"],
                                  ["log", "1"], ["list", "--json"]])
def test_reading_a_missing_store_says_how_to_create_one(qem_here, ws, args):
    refused(qem_here(*args), "no qem memory", str(store_path(ws)), "qem init")
    assert not (ws / ".qem").exists(), "a read must not create anything"


@pytest.mark.parametrize("args", [["revoke", "1", "-m", "x"], ["supersede", "1", "new text"],
                                  ["forget", "1", "-m", "x", "--yes"], ["reinstate", "1"],
                                  ["promote", "1"], ["expire", "1"], ["flag-stale", "1", "-m", "x"]])
def test_a_move_on_a_missing_store_creates_nothing(qem_here, ws, args):
    refused(qem_here(*args), "no qem memory", "qem init")
    assert not (ws / ".qem").exists()


@pytest.mark.parametrize("args, words", by_args((["list"], ["no qem memory", "{store}", "qem init"]),
                                                 (["revoke", "1", "-m", "x"], ["no qem memory", "qem init"])))
def test_a_missing_store_through_the_real_entry_point(qem, ws, args, words):
    refused(qem(*args), *[w.format(store=store_path(ws)) for w in words])
    assert not (ws / ".qem").exists()


def test_workspace_option_and_env(tmp_path, ws):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ok(run_qem("add", "via option", "-k", "task", "--workspace", str(ws), cwd=elsewhere))
    ok(run_qem("add", "via env", "-k", "task", cwd=elsewhere, env={"QEM_WORKSPACE": str(ws)}))
    other = tmp_path / "other"
    other.mkdir()
    # the option beats the environment
    ok(run_qem("add", "option wins", "-k", "task", "--workspace", str(other), cwd=elsewhere,
               env={"QEM_WORKSPACE": str(ws)}))
    assert not (elsewhere / ".qem").exists()
    with Store.open(store_path(ws)) as s:
        assert sorted(n.text for n in s.notes()) == ["via env", "via option"]
    with Store.open(store_path(other)) as s:
        assert [n.text for n in s.notes()] == ["option wins"]


def test_the_nearest_ancestor_holding_dot_qem_wins(qem, ws):
    ok(qem("init"))
    deep = ws / "a" / "b" / "c"
    deep.mkdir(parents=True)
    ok(run_qem("add", "from deep inside", "-k", "task", cwd=deep))
    assert not (deep / ".qem").exists()
    ok(run_qem("init", "--workspace", str(ws / "a"), cwd=deep))  # a nearer workspace now
    nearer = short_id(run_qem("add", "nearer", "-k", "task", cwd=deep))
    with Store.open(store_path(ws)) as s:
        assert [n.text for n in s.notes()] == ["from deep inside"]
    with Store.open(store_path(ws / "a")) as s:
        assert [n.text for n in s.notes()] == ["nearer"]
    assert ok(run_qem("show", nearer, cwd=deep / "..")).stdout.rstrip().endswith("nearer")


def test_without_any_dot_qem_the_current_directory_is_the_workspace(qem, ws):
    assert not any((p / ".qem").is_dir() for p in ws.resolve().parents), "a stray .qem above tmp"
    ok(qem("add", "here", "-k", "task"))
    assert store_path(ws).is_dir() and LogTree(store_path(ws)).names()


def test_store_option_and_env(tmp_path, qem, ws):
    by_option = tmp_path / "stores" / "opt"
    by_env = tmp_path / "env"
    ok(qem("add", "into option store", "-k", "task", "--store", str(by_option)))
    env_note = short_id(qem("add", "into env store", "-k", "task", env={"QEM_STORE": str(by_env)}))
    ok(qem("add", "option beats env", "-k", "task", "--store", str(by_option),
           env={"QEM_STORE": str(by_env)}))
    assert not (ws / ".qem").exists()
    assert (by_option / "events").is_dir() and (by_env / "events").is_dir()
    assert ok(qem("list", "--store", str(by_option))).stdout.count("\n") == 2
    shown = ok(qem("show", env_note, env={"QEM_STORE": str(by_env)})).stdout
    assert "into env store" in shown


@pytest.mark.parametrize("args, words", by_args((["list"], ["no qem memory", "{junk}"]),
                                                 (["add", "x", "-k", "task"], ["{junk}"])))
def test_a_file_that_is_not_a_store_is_refused(tmp_path, qem, args, words):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite " * 50)
    refused(qem(*args, "--store", str(junk)), *[w.format(junk=junk) for w in words])
    assert junk.read_bytes() == b"definitely not sqlite " * 50


def test_a_damaged_index_is_rebuilt_from_the_log(tmp_path, qem, ws):
    """(Was: a file that is not a store is refused.)  The one SQLite file is the index, a
    cache of the log: damaged, any command makes it anew, and the log is never touched."""
    names = populate(ws)
    before = log_bytes(ws)
    index = store_path(ws) / "index.db"
    for args in (["list"], ["verify"], ["revoke", names["active"], "-m", "after the damage"]):
        index.write_bytes(b"definitely not sqlite " * 50)
        proc = ok(qem(*args))
        assert "Traceback" not in proc.stderr
        if args == ["list"]:
            assert len(proc.stdout.splitlines()) == len(names)
    assert index.read_bytes().startswith(b"SQLite format 3\0")
    after = log_bytes(ws)
    assert {k: v for k, v in after.items() if k in before} == before  # the revocation only added a file
    assert len(after) == len(before) + 1
    assert json.loads(ok(qem("show", names["active"], "--json")).stdout)["state"] == "revoked"
    assert ok(qem("verify")).stderr.startswith("ok: ")


@pytest.mark.parametrize("args", [["list"], ["add", "x", "-k", "task"]], ids=" ".join)
def test_a_store_from_an_older_qem_is_refused_with_the_way_to_convert_it(qem, ws, args):
    (ws / ".qem").mkdir()
    (ws / ".qem" / "memory.db").write_bytes(b"an old store")
    refused(qem(*args), "memory.db", "older qem", "qem migrate")
    assert sorted(p.name for p in (ws / ".qem").iterdir()) == ["memory.db"]


# -- every move, allowed ---------------------------------------------------------------------


def test_the_lifecycle_through_the_cli(qem, ws):
    one = short_id(qem("add", "Run tests in the venv", "-k", "directive", "-p", "high"))
    flagged = ok(qem("flag-stale", one, "-m", "venv moved")).stdout
    assert flagged.startswith(f"#{one} stale_flagged (event ")
    # a stale note is still in force: it can be superseded
    two = short_id(qem("supersede", one, "Run tests in .venv", "-m", "path changed"))
    assert ok(qem("revoke", two, "-m", "wrong path")).stdout.startswith(f"#{two} revoked")
    assert ok(qem("reinstate", two, "-m", "right after all")).stdout.startswith(f"#{two} reinstated")
    assert ok(qem("promote", two, "-m", "I said so")).stdout.startswith(f"#{two} promoted")
    assert ok(qem("expire", two)).stdout.startswith(f"#{two} expired")
    three = short_id(qem("add", "x", "-k", "task", "--actor", "someone-else"))
    assert ok(qem("flag-stale", three, "-m", "check")).returncode == 0
    assert ok(qem("revoke", three, "-m", "stale notes can be revoked")).returncode == 0
    four = short_id(qem("add", "y", "-k", "task"))
    assert ok(qem("flag-stale", four, "-m", "check")).returncode == 0
    assert ok(qem("expire", four, "-m", "stale notes can expire")).returncode == 0
    assert len({one, two, three, four}) == 4

    notes = {n["short"]: n for n in json.loads(ok(qem("list", "--json")).stdout)}
    assert {i: n["state"] for i, n in notes.items()} == {
        one: "superseded", two: "expired", three: "revoked", four: "expired"}
    assert notes[two]["provenance"] == "human"
    assert (notes[two]["kind"], notes[two]["priority"], notes[two]["supersedes"]) == ("directive", "high", notes[one]["id"])
    assert notes[one]["superseded_by"] == notes[two]["id"] and notes[one]["text"] == "Run tests in the venv"
    assert notes[three]["actor"] == "someone-else" and notes[one]["actor"] == "tester"
    events = json.loads(ok(qem("log", "--json")).stdout)
    # one writer at a time: every event comes after the last, in the order every clone agrees on
    clocks = [e["clock"] for e in events]
    assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks) == 14
    for event in events:  # each event follows the note's previous one
        mine = [e["id"] for e in events if e["note"] == event["note"] and e["clock"] < event["clock"]]
        assert event["prev"] == ([] if event["type"] == "created" else mine[-1:])
    promoted = next(e for e in events if e["type"] == "promoted")
    assert promoted["data"] == {"from": "agent"} and promoted["reason"] == "I said so"
    assert verified(ws) == []


def test_supersede_options_and_stdin(qem, ws):
    names = populate(ws)
    new = short_id(qem("supersede", names["active"], "-", "--kind", "gotcha", "-p", "low", input="  from stdin  \r\n"))
    shown = json.loads(ok(qem("show", new, "--json")).stdout)
    assert (shown["text"], shown["kind"], shown["priority"], shown["supersedes"]) == (
        "  from stdin", "gotcha", "low", full_ids()["active"])


def test_show_and_list_and_log_text_output(qem, ws):
    names = populate(ws)
    shown = ok(qem("show", names["revoked"])).stdout
    assert f"#{names['revoked']} finding" in shown and "revoked" in shown and "setup" in shown
    assert f"id {full_ids()['revoked']}" in shown
    assert shown.rstrip().endswith("the revoked note")
    assert "forgotten" in ok(qem("show", names["forgotten"])).stdout
    # any unambiguous prefix of the full id, with or without `#`, names the note too
    assert ok(qem("show", "#" + full_ids()["revoked"][:12])).stdout == shown
    listed = ok(qem("list")).stdout.splitlines()
    kinds = [line.split("\t")[1] for line in listed]
    assert kinds == ["directive", "task", "gotcha", "gotcha", "finding", "reference", "decision",
                     "operational"]  # kind order, then id
    gotchas = [line.split("\t")[0] for line in listed if line.split("\t")[1] == "gotcha"]
    assert gotchas == [f"#{names[n]}" for n in sorted(("superseded", "successor"), key=full_ids().get)]
    assert ok(qem("list", "--state", "revoked")).stdout.startswith(f"#{names['revoked']}\t")
    assert len(ok(qem("list", "--kind", "gotcha")).stdout.splitlines()) == 2
    empty = ok(qem("list", "--kind", "task", "--state", "expired"))
    assert empty.stdout == "" and "no notes match" in empty.stderr
    log = ok(qem("log", names["superseded"])).stdout.splitlines()
    assert len(log) == 2 and "created" in log[0] and f"superseded by #{names['successor']}" in log[1]


# -- JSON shapes -----------------------------------------------------------------------------


def test_json_shapes(qem, ws):
    names, full = populate(ws), full_ids()
    one = json.loads(ok(qem("show", names["successor"], "--json")).stdout)
    assert NOTE_KEYS <= set(one)
    assert one["id"] == full["successor"] and one["short"] == names["successor"]
    assert one["supersedes"] == full["superseded"] and one["alias"] is None
    assert one["created_at"] == AT and one["actor"] == "setup" and one["state"] == "active"
    many = json.loads(ok(qem("list", "--json")).stdout)
    assert isinstance(many, list) and len(many) == len(names)
    assert all(NOTE_KEYS <= set(n) for n in many)
    assert next(n for n in many if n["id"] == full["forgotten"])["text"] is None
    events = json.loads(ok(qem("log", "--json")).stdout)
    assert all(EVENT_KEYS <= set(e) for e in events)
    dump = ok(qem("dump")).stdout.splitlines()
    assert json.loads(dump[0]) == {"memory": memory_of(ws)}  # the dump names its memory first
    assert len(events) == len(dump) - 1
    mine = json.loads(ok(qem("log", names["revoked"], "--json")).stdout)
    assert [(e["type"], e["reason"], e["note"]) for e in mine] == [
        ("created", None, full["revoked"]), ("revoked", "setup", full["revoked"])]
    assert mine[0]["id"] == full["revoked"]  # a note's id is its creation's


# -- every refusal ---------------------------------------------------------------------------

REFUSALS = [
    # lifecycle moves that make no sense for the note's state
    (["revoke", "{revoked}", "-m", "again"], ["cannot revoke note #{revoked}", "revoked"]),
    (["revoke", "{forgotten}", "-m", "again"], ["cannot revoke", "forgotten"]),
    (["supersede", "{superseded}", "newer"], ["cannot supersede note #{superseded}", "superseded"]),
    (["supersede", "{revoked}", "newer"], ["cannot supersede", "revoked"]),
    (["supersede", "{expired}", "newer"], ["cannot supersede", "expired"]),
    (["supersede", "{forgotten}", "newer"], ["cannot supersede", "forgotten"]),
    (["reinstate", "{active}"], ["cannot reinstate note #{active}", "active"]),
    (["reinstate", "{superseded}"], ["cannot reinstate", "superseded"]),
    (["flag-stale", "{stale}", "-m", "again"], ["cannot flag as stale note #{stale}", "stale"]),
    (["flag-stale", "{revoked}", "-m", "x"], ["cannot flag as stale", "revoked"]),
    (["expire", "{expired}"], ["cannot expire", "expired"]),
    (["expire", "{superseded}"], ["cannot expire", "superseded"]),
    (["promote", "{human}"], ["#{human}", "already provenance human"]),
    (["promote", "{forgotten}"], ["cannot promote", "forgotten"]),
    (["forget", "{forgotten}", "-m", "again", "--yes"], ["cannot forget", "forgotten"]),
    # unknown ids
    (["show", "99"], ["no note #99"]),
    (["log", "99"], ["no note #99"]),
    (["revoke", "99", "-m", "x"], ["no note #99"]),
    (["supersede", "99", "x"], ["no note #99"]),
    (["reinstate", "99"], ["no note #99"]),
    (["promote", "99"], ["no note #99"]),
    (["expire", "99"], ["no note #99"]),
    (["flag-stale", "99", "-m", "x"], ["no note #99"]),
    (["forget", "99", "-m", "x", "--yes"], ["no note #99"]),
    (["show", "99999999999999999999999"], ["no note"]),
    (["revoke", "99999999999999999999999", "-m", "x"], ["no note"]),
    (["show", "zzzzzzzz"], ["no note #zzzzzzzz"]),
    (["show", "k3f9!"], ["is not a note id"]),
    (["revoke", "not-an-id", "-m", "x"], ["is not a note id"]),
    # unknown names
    (["add", "x", "--kind", "rumour"], ["unknown kind 'rumour'", "directive", "operational"]),
    (["add", "x", "-k", "task", "-p", "urgent"], ["unknown priority 'urgent'", "high"]),
    (["add", "x", "-k", "task", "--provenance", "hearsay"], ["unknown provenance 'hearsay'"]),
    (["add", "x", "-k", "task", "--provenance", "human"], ["provenance human", "qem promote"]),
    (["supersede", "{active}", "x", "--kind", "rumour"], ["unknown kind"]),
    (["supersede", "{active}", "x", "-p", "urgent"], ["unknown priority"]),
    (["list", "--kind", "rumour"], ["unknown kind"]),
    (["list", "--state", "dormant"], ["unknown state", "active"]),
    # reasons and confirmation
    (["revoke", "{active}"], ["revoke needs a reason", "-m"]),
    (["revoke", "{active}", "-m", "   "], ["revoke needs a reason"]),
    (["flag-stale", "{active}"], ["flag-stale needs a reason", "-m"]),
    (["forget", "{active}", "--yes"], ["forget needs a reason", "-m"]),
    (["forget", "{active}", "-m", "a secret"], ["--yes", "for good"]),
    # texts
    (["add", "", "-k", "task"], ["empty"]),
    (["add", " \n\t\n  ", "-k", "task"], ["empty"]),
    (["supersede", "{active}", "  \n"], ["empty"]),
]


REAL_ENTRY_SAMPLE = {
    "revoke {revoked} -m again", "supersede {superseded} newer", "reinstate {active}",
    "flag-stale {stale} -m again", "promote {human}", "show 99", "add x --kind rumour",
    "add x -k task --provenance human", "revoke {active}", "forget {active} -m a secret",
    "add  -k task", "show k3f9!",
}
REAL_ENTRY_REFUSALS = [(a, w) for a, w in REFUSALS if " ".join(a) in REAL_ENTRY_SAMPLE]
assert len(REAL_ENTRY_REFUSALS) == len(REAL_ENTRY_SAMPLE), "the sample names a row the table lacks"


@pytest.mark.parametrize("args, words", REFUSALS, ids=[" ".join(a) for a, _ in REFUSALS])
def test_refusals_exit_2_and_leave_the_store_unchanged(qem_here, ws, args, words):
    names = populate(ws)
    before = snapshot(ws)
    proc = qem_here(*[a.format(**names) for a in args])
    refused(proc, *[w.format(**names) for w in words])
    assert proc.stdout == ""
    assert snapshot(ws) == before


@pytest.mark.parametrize("args, words", by_args(*REAL_ENTRY_REFUSALS))
def test_refusals_through_the_real_entry_point(qem, ws, args, words):
    """A sample of the table above, one of each kind, run as a user runs them."""
    names = populate(ws)
    before = snapshot(ws)
    proc = qem(*[a.format(**names) for a in args])
    refused(proc, *[w.format(**names) for w in words])
    assert proc.stdout == ""
    assert snapshot(ws) == before


BAD_STDIN = {
    "empty": (b"", ["empty"]),
    "blank": (b"\r\n  \r\n", ["empty"]),
    "nul": (b"before\x00after", ["NUL"]),
    "not-utf8": (b"not \xff utf-8", ["UTF-8"]),
}


@pytest.mark.parametrize("data, words", BAD_STDIN.values(), ids=BAD_STDIN)
def test_bad_text_on_stdin_is_refused(qem_here, ws, data, words):
    populate(ws)
    before = snapshot(ws)
    refused(qem_here("add", "-", "-k", "task", input=data), *words)
    assert snapshot(ws) == before


@pytest.mark.parametrize("case", ["nul", "not-utf8"])
def test_bad_text_on_stdin_through_the_real_entry_point(ws, case):
    data, words = BAD_STDIN[case]
    populate(ws)
    before = snapshot(ws)
    refused(run_bytes(["add", "-", "-k", "task"], ws, data), *words)
    assert snapshot(ws) == before


@pytest.mark.parametrize("args, word", [
    (["add", "-", "-k", "task"], "the note text"),
    (["supersede", "NOTE", "-", "-m", "newer"], "the note text"),
    (["load", "-"], "the log to load"),
    (["mcp"], "qem mcp talks over standard input"),
])
def test_a_closed_standard_input_is_named_not_a_traceback(ws, args, word):
    """`-` with standard input closed by the shell (`<&-`), where Python has no stdin at all."""
    populate(ws)
    note = json.loads(ok(run_qem("list", "--json", cwd=ws)).stdout)[0]["short"]
    before = snapshot(ws)
    line = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "qem_edit", *[note if a == "NOTE" else a for a in args]])
    done = subprocess.run(["sh", "-c", f"exec {line} <&-"], cwd=ws, capture_output=True, text=True, timeout=60)
    refused(done, word, "standard input", "closed")
    assert snapshot(ws) == before


BAD = os.fsdecode(b"caf\xe9")  # an argument that arrived as bytes that are not UTF-8


@pytest.mark.parametrize("args, word", [
    (["add", BAD, "-k", "task"], "UTF-8"),
    (["revoke", "{active}", "-m", BAD], "UTF-8"),
    (["add", "fine", "-k", "task", "--actor", BAD], "UTF-8"),
    (["show", BAD], "not a note id"),
], ids=["add text", "revoke reason", "add actor", "show id"])
def test_undecodable_arguments_are_refused_without_a_traceback(ws, args, word):
    """Arguments arrive as bytes; ones that are not UTF-8 must be refused, not crash."""
    names = populate(ws)
    before = snapshot(ws)
    args = [a.format(**names) for a in args]
    proc = subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=ws,
                          capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
    refused(subprocess.CompletedProcess(args, proc.returncode, proc.stdout.decode(),
                                        proc.stderr.decode("utf-8", "replace")), word)
    assert snapshot(ws) == before


# -- text normalization ----------------------------------------------------------------------


def test_text_is_normalized_on_add(qem, ws):
    raw = "\r\n\r\n    indented first line   \r\n\r\n\r\nafter two blanks\t \rold mac line\n\n  "
    made = [short_id(qem("add", raw, "-k", "finding")), short_id(qem("add", "-", "-k", "finding", input=raw))]
    want = "    indented first line\n\n\nafter two blanks\nold mac line"
    for note_id in made:
        assert json.loads(ok(qem("show", note_id, "--json")).stdout)["text"] == want
    dumped = [json.loads(line) for line in ok(qem("dump")).stdout.splitlines()[1:]]
    assert [e["text"]["text"] for e in dumped] == [want, want]  # each with its creation


def test_stdin_text_is_read_as_utf8_bytes(ws):
    proc = run_bytes(["add", "-", "-k", "reference"], ws, "Zoë's café ✅\r\nline two  \r\n".encode())
    note_id = short_id(proc)
    with Store.open(store_path(ws)) as s:
        assert s.note(s.resolve(note_id)).text == "Zoë's café ✅\nline two"


# -- forget ----------------------------------------------------------------------------------

SECRET = "ghp_R3allyS3cretT0ken"


def test_forget_erases_the_text_everywhere_and_leaves_a_tombstone(qem, ws):
    one = short_id(qem("add", f"The deploy token is {SECRET}", "-k", "operational"))
    two = short_id(qem("supersede", one, f"Rotate {SECRET} monthly"))
    three = short_id(qem("add", "an innocent note", "-k", "task"))
    ok(qem("forget", one, "-m", "contained a credential", "--yes", "--actor", "alice"))
    out = ok(qem("forget", two, "-m", "contained a credential", "--yes")).stdout
    assert out.startswith(f"#{two} forgotten")
    full = {n: json.loads(ok(qem("show", n, "--json")).stdout)["id"] for n in (one, two, three)}

    # no file of the memory holds it: not the log, not the index, not its config
    files = [p for p in (ws / ".qem").rglob("*") if p.is_file()]
    assert any(p.name == "index.db" for p in files) and any(p.parent.name == "texts" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert not (ws / ".qem" / "texts" / full[one]).exists()

    dumped = ok(qem("dump")).stdout
    assert SECRET not in dumped
    created = {e["id"]: e for e in map(json.loads, dumped.splitlines()[1:]) if e["type"] == "created"}
    assert "text" not in created[full[one]] and "text" not in created[full[two]]
    assert created[full[three]]["text"]["text"] == "an innocent note"

    tombs = [e for e in json.loads(ok(qem("log", "--json")).stdout) if e["type"] == "forgotten"]
    assert [(e["note"], e["actor"], e["reason"]) for e in tombs] == [
        (full[one], "alice", "contained a credential"), (full[two], "tester", "contained a credential")]
    assert all(e["data"] == {} for e in tombs)

    shown = json.loads(ok(qem("show", two, "--json")).stdout)
    assert (shown["state"], shown["text"], shown["supersedes"]) == ("forgotten", None, full[one])
    log = ok(qem("log")).stdout
    assert SECRET not in log and "forgotten by alice (contained a credential)" in log
    # the newest note was forgotten: the next note still gets a new id, never a forgotten one's
    ok(qem("forget", three, "-m", "tidy", "--yes"))
    four = short_id(qem("add", "an innocent note", "-k", "task"))
    assert json.loads(ok(qem("show", four, "--json")).stdout)["id"] not in full.values()
    assert verified(ws) == []


# -- dump and load ---------------------------------------------------------------------------


def test_dump_load_dump_is_byte_identical(tmp_path, qem, ws):
    populate(ws)
    with open_store(ws) as s:
        add(s, "ünïcødé ✅ \"quotes\" \\ and\n\n  indentation", kind="reference", actor="setup")
        active = full_ids()["active"]
        s.write(lambda tx: tx.emit(active, "stale_flagged", "reviewer", "check", checkin="ck-7"),
                at="2026-08-01T09:30:00Z")
    first = ok(qem("dump")).stdout
    backup = tmp_path / "backup.jsonl"
    ok(qem("dump", str(backup)))
    assert backup.read_bytes() == first.encode("utf-8")

    copy = tmp_path / "copy"
    copy.mkdir()
    loaded = ok(run_qem("load", str(backup), cwd=copy))
    assert f"loaded {len(first.splitlines()) - 1} new events" in loaded.stdout  # (the first line names the memory)
    assert ok(run_qem("dump", cwd=copy)).stdout == first  # the same memory id, taken by the empty memory
    with Store.open(store_path(copy)) as loaded_store, Store.open(store_path(ws)) as original:
        assert loaded_store.notes() == original.notes()
    assert verified(copy) == []
    again = ok(run_qem("load", str(backup), cwd=copy))  # an event already here is one event
    assert "loaded 0 new events" in again.stdout
    assert ok(run_qem("dump", cwd=copy)).stdout == first

    via_stdin = tmp_path / "via-stdin"
    via_stdin.mkdir()
    ok(run_qem("load", "-", cwd=via_stdin, input=first))
    assert ok(run_qem("dump", cwd=via_stdin)).stdout == first


@pytest.mark.skipif(not CORPUS.exists(), reason="fixture corpus not generated yet")
def test_the_fixture_corpus_loads(tmp_path, qem, ws):
    """The corpus is a numbered log: it is converted on load (each note keeps its number),
    the same way on every clone, and the converted log dumps and loads back unchanged."""
    raw = CORPUS.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    proc = ok(qem("load", str(CORPUS)))
    assert f"loaded {len(lines)} new events" in proc.stdout
    assert ok(qem("verify")).stderr.startswith("ok: ")
    dumped = subprocess.run([sys.executable, "-m", "qem_edit", "dump"], cwd=ws, capture_output=True)
    assert dumped.returncode == 0 and len(dumped.stdout.splitlines()) == len(lines) + 1  # and the memory's id
    created = sum(1 for line in lines if json.loads(line)["type"] == "created")
    listed = json.loads(ok(qem("list", "--json")).stdout)
    assert len(listed) == created and sorted(n["alias"] for n in listed) == list(range(1, created + 1))
    assert "loaded 0 new events" in ok(qem("load", str(CORPUS))).stdout  # converted the same way again
    other = tmp_path / "other"
    other.mkdir()
    ok(run_qem("load", str(CORPUS), cwd=other))
    assert ok(run_qem("dump", cwd=other)).stdout.encode() == dumped.stdout


def memory_of(ws) -> str:  # type: ignore[no-untyped-def]
    with Store.open(store_path(ws)) as s:
        return s.memory_id()


def _line(seq=1, note_id=50, type_="created", **over) -> str:
    obj = {"seq": seq, "note_id": note_id, "type": type_, "at": AT, "actor": "s", "reason": None,
           "checkin": None,
           "data": {"kind": "task", "priority": "low", "provenance": "agent", "text": "loaded",
                    "supersedes": None} if type_ == "created" else {}}
    obj.update(over)
    return json.dumps(obj)


# Numbered logs (converted on load): a bad line is named by its line in the file; what is
# wrong across lines is named by its seq; an event that does not replay, by the event.
LOAD_REFUSALS = [
    ("bad-json", [_line(), "{this is not json"], ["bad-json.jsonl:2", "not JSON"]),
    ("missing-field", [_line(), json.dumps({k: v for k, v in json.loads(_line(2, 51)).items() if k != "at"})],
     ["missing-field.jsonl:2", "holds exactly", "at"]),
    ("unknown-type", [_line(), _line(2, 50, "vanished")], ["unknown-type.jsonl:2", "unknown event type"]),
    ("bad-time", [_line(at="yesterday")], ["bad-time.jsonl:1", "bad time"]),
    ("not-normalized", [_line(data={"kind": "task", "priority": "low", "provenance": "agent",
                                    "text": "trailing  \n", "supersedes": None})],
     ["not-normalized.jsonl:1", "not normalized"]),
    ("created-twice", [_line(), _line(2, 50)], ["seq 2", "note #50 already exists"]),
    ("no-replay", [_line(), _line(2, 50, "reinstated")],
     ["cannot reinstate note #", "it is active", "nothing was loaded"]),
    ("unknown-note", [_line(), _line(2, 77, "revoked", reason="x")], ["seq 2", "note #77", "never created"]),
    ("seq-order", [_line(2), _line(1, 51)], ["seq-order.jsonl:2", "does not follow"]),
    ("unknown-kind", [_line(data={"kind": "rumour", "priority": "low", "provenance": "agent", "text": "x",
                                  "supersedes": None})], ["seq 1", "unknown kind"]),
]


@pytest.mark.parametrize("name, lines, words", LOAD_REFUSALS, ids=[c[0] for c in LOAD_REFUSALS])
def test_load_refuses_names_the_line_and_writes_nothing(tmp_path, qem_here, ws, name, lines, words):
    populate(ws)
    before = snapshot(ws)
    bad = tmp_path / f"{name}.jsonl"
    # blank lines count: the message names the line in the file, not the event's position
    bad.write_text("\n".join(lines[:1] + [""] + lines[1:]) + "\n")
    words = [w.replace(".jsonl:2", ".jsonl:3") for w in words]
    refused(qem_here("load", str(bad)), *words)
    assert snapshot(ws) == before


def test_load_refuses_a_changed_line_of_a_dump(tmp_path, qem_here, ws):
    """A dump in the log's own format: each line carries its event's id, the hash of the
    event; a line changed by hand no longer matches it, and is named."""
    names = populate(ws)
    lines = ok(qem_here("dump")).stdout.splitlines()
    target = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == "revoked")
    changed = json.loads(lines[target])
    changed["reason"] = "retconned"
    lines[target] = json.dumps(changed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bad = tmp_path / "changed.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    proc = run_qem("load", str(bad), cwd=elsewhere)
    refused(proc, f"changed.jsonl:{target + 1}", "not the hash", "the line was changed")
    assert not (elsewhere / ".qem").exists()  # checked before anything is made
    lines[target] = json.dumps(json.loads(ok(qem_here("dump")).stdout.splitlines()[target]))
    bad.write_text("\n".join(lines) + "\n")  # the line as dumped: it loads
    ok(run_qem("load", str(bad), cwd=elsewhere))
    with Store.open(store_path(elsewhere)) as copy:
        assert {n.shown for n in copy.notes()} == set(names.values())


# (file name, or `-` for stdin; what it holds; the words of the refusal)
REAL_ENTRY_LOADS = {
    **{name: (f"{name}.jsonl", "\n".join(lines) + "\n", words)
       for name, lines, words in LOAD_REFUSALS if name in ("bad-json", "no-replay")},
    "revoked-twice-on-stdin": ("-", _line() + "\n" + _line(2, 50, "revoked") + "\n" + _line(3, 50, "revoked"),
                               ["cannot revoke note #", "it is revoked", "nothing was loaded"]),
    "bad-json-on-stdin": ("-", _line() + "\n" + "{oops\n", ["-:2", "not JSON"]),
}


@pytest.mark.parametrize("source, data, words", REAL_ENTRY_LOADS.values(), ids=REAL_ENTRY_LOADS)
def test_load_refusals_through_the_real_entry_point(tmp_path, qem, ws, source, data, words):
    populate(ws)
    before = snapshot(ws)
    if source == "-":
        proc = qem("load", "-", input=data)
    else:
        (tmp_path / source).write_text(data)
        proc = qem("load", str(tmp_path / source))
    refused(proc, *words)
    assert snapshot(ws) == before


def test_load_of_a_missing_file(tmp_path, qem_here, ws):
    populate(ws)
    refused(qem_here("load", str(tmp_path / "nope.jsonl")), "cannot read", "nope.jsonl")


def test_load_appends_and_keeps_ids(tmp_path, qem, ws):
    names = populate(ws)
    extra = tmp_path / "extra.jsonl"
    extra.write_text(_line() + "\n" + _line(2, 50, "revoked", reason="loaded reason") + "\n")
    ok(qem("load", str(extra)))
    note = json.loads(ok(qem("show", "50", "--json")).stdout)  # its number still finds it
    assert (note["state"], note["text"], note["created_at"], note["alias"]) == ("revoked", "loaded", AT, 50)
    assert note["short"] not in names.values() and note["id"] not in full_ids().values()
    for name, short in names.items():  # the notes already here keep their ids
        assert json.loads(ok(qem("show", short, "--json")).stdout)["id"] == full_ids()[name]
    nxt = short_id(qem("add", "next", "-k", "task"))
    assert json.loads(ok(qem("show", nxt, "--json")).stdout)["alias"] is None  # new notes get no number
    refused(qem("show", "51"), "no note #51")
    assert ok(qem("show", "50")).stdout.rstrip().endswith("loaded")


# -- verify ----------------------------------------------------------------------------------


def test_verify_passes_on_a_fresh_store(qem, ws):
    ok(qem("init"))
    assert "0 notes" in ok(qem("verify")).stderr
    populate(ws)
    done = ok(qem("verify"))
    assert done.stderr.startswith("ok: ") and f"{len(full_ids())} notes" in done.stderr
    assert done.stdout == ""


def test_verify_catches_a_tampered_cache_and_repair_fixes_it(qem, ws):
    names = populate(ws)
    before = snapshot(ws)
    active = full_ids()["active"]
    raw = sqlite3.connect(store_path(ws) / "index.db")
    raw.execute("UPDATE notes SET text = 'x' WHERE id = ?", (active,))
    raw.commit()
    raw.close()
    assert json.loads(ok(qem("show", names["active"], "--json")).stdout)["text"] == "x"

    proc = qem("verify")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"note {active[:8]}" in proc.stdout and "the index disagrees with the log" in proc.stdout
    assert "--repair" in proc.stderr

    fixed = ok(qem("verify", "--repair"))
    assert "rebuilt" in fixed.stdout and fixed.stderr.startswith("ok: ")
    assert ok(qem("verify")).stderr.startswith("ok: ")
    assert json.loads(ok(qem("show", names["active"], "--json")).stdout)["text"] == "the active note"
    assert snapshot(ws) == before  # the log itself never changed


def _event_file(root: Path, note: str, type_: str) -> Path:
    with Store.open(store_path(root)) as s:
        [event] = [e for e in s.events(note) if e.type == type_]
    path = store_path(root) / "events" / event.id
    assert path.is_file()
    return path


def _bad_file(root: Path, how: str) -> str:
    """Put a bad file into the log, as a merge or a hand could; returns its name."""
    memory = store_path(root)
    revoked = _event_file(root, full_ids()["revoked"], "revoked")
    if how == "rewritten":  # the event's bytes changed (a new file under its old name)
        obj = json.loads(revoked.read_bytes())
        obj["reason"] = "retconned"
        revoked.unlink()
        revoked.write_bytes(canonical(obj))
        return f"events/{revoked.name}"
    if how == "renamed":
        name = "events/" + "0" * ids.ID_LENGTH
        revoked.rename(memory / name)
        return name
    if how == "oversized":
        data = b"[" * (2 << 20)
    elif how == "malformed":
        data = b'{"v": 1, "type": "created"'
    else:  # "unknown type", well named
        data = canonical({"v": 1, "type": "exploded", "note": None, "at": AT, "actor": "x", "reason": None,
                          "checkin": None, "clock": 1, "prev": [], "data": {}})
    name = f"events/{ids.content_id(data)}"
    (memory / name).write_bytes(data)
    return name


@pytest.mark.parametrize("how", ["rewritten", "renamed", "oversized", "malformed", "unknown type"])
def test_a_bad_log_file_is_set_aside_named_by_verify_and_never_a_crash(qem, ws, how):
    """(Was: the store refuses to delete or rewrite events.)  Log files are immutable and
    named by their bytes; one that is not what its name says is set aside, every command
    goes on with the rest of the log, and `qem verify` names it (exit 1)."""
    names = populate(ws)
    name = _bad_file(ws, how)
    for args in (["list"], ["show", names["revoked"]], ["log"], ["dump"], ["export", "--stdout"],
                 ["query", "kind=finding"], ["status", names["revoked"]], ["add", "still writable", "-k", "task"]):
        proc = ok(qem(*args))
        assert "retconned" not in proc.stdout  # a changed event is never taken
    done = qem("verify")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert name in done.stdout
    state = json.loads(ok(qem("show", names["revoked"], "--json")).stdout)["state"]
    # a file renamed away takes its revocation with it; one rewritten under its own name
    # (log files never change) is noticed by verify, the index keeps what it read until
    # it is rebuilt (`--repair`, or a fresh clone)
    assert state == ("active" if how == "renamed" else "revoked")
    repaired = qem("verify", "--repair")  # the log is never "repaired": the file stays named
    assert repaired.returncode == 1 and name in repaired.stdout and "retconned" not in repaired.stdout
    state = json.loads(ok(qem("show", names["revoked"], "--json")).stdout)["state"]
    assert state == ("active" if how in ("renamed", "rewritten") else "revoked")
    (store_path(ws) / name).unlink()
    assert ok(qem("verify")).stderr.startswith("ok: ")


def test_a_deleted_event_file_is_named_by_verify(qem, ws):
    names = populate(ws)
    created = _event_file(ws, full_ids()["revoked"], "created")
    created.unlink()
    assert names["revoked"] not in ok(qem("list")).stdout
    done = qem("verify")
    assert done.returncode == 1 and "whose creation the log does not hold" in done.stdout
    assert full_ids()["revoked"][:8] in done.stdout


@pytest.mark.parametrize("pinned", ["garbage", "2026-13-45T99:99:99Z", "2026-01-01", "2026-01-01T00:00:00+02:00"])
def test_a_clock_pinned_to_no_utc_time_is_refused_before_anything_is_written(qem, ws: Path, pinned: str) -> None:
    # QEM_NOW is every new event's time: taken as given it made a log file no reader takes,
    # and `qem owed` ended in a traceback comparing it with a deadline
    qem("add", "Send the report", "-k", "task", "--to", "alice", "--due", "2027-01-01")
    events = sorted((ws / ".qem" / "events").iterdir())
    for args in (("add", "a note", "-k", "finding"), ("owed",), ("expire", "--due")):
        done = qem(*args, env={"QEM_NOW": pinned})
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert f"QEM_NOW={pinned!r} is not a UTC time" in done.stderr and "Traceback" not in done.stderr
    assert sorted((ws / ".qem" / "events").iterdir()) == events
    assert qem("verify").returncode == 0


def test_a_folder_where_the_index_goes_is_named_not_called_read_only(ws):
    """A folder at .qem/index.db (a clone's commit can put one there): a write names it and
    says what to do (exit 2, nothing written); a read still answers, from an index in memory."""
    ok(run_qem("add", "one", "-k", "task", cwd=ws))
    index = ws / ".qem" / "index.db"
    index.unlink()
    index.mkdir()
    before = snapshot(ws)
    done = run_qem("add", "two", "-k", "task", cwd=ws)
    refused(done, f"{index} is a folder", "move the folder away", "nothing was written")
    assert "read-only" not in done.stderr and snapshot(ws) == before
    assert "one" in ok(run_qem("list", cwd=ws)).stdout


@pytest.mark.parametrize("number", [b"NaN", b"-Infinity", b"1e999"])
def test_a_dump_holding_nan_or_infinity_is_refused_as_the_log_s_reader_would(ws, tmp_path, number):
    """Python's json reads NaN, Infinity and 1e999 (an infinity); the log's reader sets aside a
    record holding one, so `qem load` refuses it by line (exit 2), nothing written, even where
    the line's id is the hash of the record as written."""
    ok(run_qem("add", "one", "-k", "task", cwd=ws))
    first, line = ok(run_qem("dump", cwd=ws)).stdout.splitlines()[:2]
    obj = json.loads(line)
    obj.pop("id")
    text = obj.pop("text")
    obj["data"]["x"] = "HERE"
    body = canonical(obj)[:-1].replace(b'"HERE"', number)
    dumped = b'{"id":"%s","text":%s,' % (ids.content_id(body + b"\n").encode(), json.dumps(text).encode()) + body[1:]
    dump = tmp_path / "d.jsonl"
    dump.write_bytes(first.encode() + b"\n" + dumped + b"\n")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    done = run_qem("load", str(dump), cwd=fresh)
    refused(done, "d.jsonl:2", "NaN or Infinity")
    assert not list(fresh.rglob("events/*")) and not list(fresh.rglob("packs/*"))

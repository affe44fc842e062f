"""The `qem` command line, run as a user runs it (a child process), except for bulk setup,
which goes through the store in-process to keep the suite fast.

Every refusal is checked for its exit code, the key words of its message, the absence of a
traceback, and a store left byte-for-byte as it was.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from builders import AT, add, emit, forget, store_path
from conftest import CORPUS, run_qem
from qem_edit import cli
from qem_edit.dump import dump_lines
from qem_edit.store import Store

VERBS = ("init", "add", "supersede", "revoke", "flag-stale", "reinstate", "promote", "expire",
         "forget", "show", "list", "log", "verify", "dump", "load")
NOTE_KEYS = {"id", "kind", "priority", "text", "provenance", "state", "created_at", "actor",
             "supersedes", "superseded_by"}
EVENT_KEYS = {"seq", "note_id", "type", "at", "actor", "reason"}


# -- helpers --------------------------------------------------------------------------------


def open_store(root: Path) -> Store:
    return Store.open(store_path(root), create=True)


_TEMPLATE: dict[str, object] = {}


def populate(root: Path) -> dict[str, int]:
    """One note in every state, plus a human one; returns their ids by name.

    Built once per session and copied: a dozen committed transactions per test add up."""
    if "bytes" not in _TEMPLATE:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            _TEMPLATE["ids"] = _build_population(Path(scratch))
            _TEMPLATE["bytes"] = store_path(Path(scratch)).read_bytes()
    store_path(root).parent.mkdir(parents=True, exist_ok=True)
    store_path(root).write_bytes(_TEMPLATE["bytes"])  # type: ignore[arg-type]
    return dict(_TEMPLATE["ids"])  # type: ignore[arg-type]


def _build_population(root: Path) -> dict[str, int]:
    with open_store(root) as s:
        ids = {name: add(s, f"the {name} note", kind, actor="setup") for name, kind in [
            ("active", "directive"), ("stale", "task"), ("superseded", "gotcha"),
            ("revoked", "finding"), ("expired", "reference"), ("forgotten", "decision"),
            ("human", "operational")]}
        emit(s, ids["stale"], "stale_flagged", "setup", actor="setup")
        ids["successor"] = add(s, "the successor note", supersedes=ids["superseded"], actor="setup")
        emit(s, ids["revoked"], "revoked", "setup", actor="setup")
        emit(s, ids["expired"], "expired", "setup", actor="setup")
        forget(s, ids["forgotten"], "secret", actor="setup")
        emit(s, ids["human"], "promoted", "setup", actor="setup")
        for name, note_id in ids.items():
            assert s.note(note_id).state == {"human": "active", "successor": "active"}.get(name, name)
    return ids


def snapshot(root: Path) -> tuple[str, list, str]:
    """The dump (what `qem dump` prints), the notes cache, and the file's bytes' hash."""
    with Store.open(store_path(root)) as s:
        state = "".join(dump_lines(s)), [n.to_json() for n in s.notes()]
    return (*state, hashlib.sha256(store_path(root).read_bytes()).hexdigest())


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
        (["show", "twelve"], ["not a valid"]),
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


def test_usage_errors_through_the_real_entry_point(qem, ws):
    # typer vendors its own click: a usage error once escaped `main` as a traceback, exit 1
    for args, words in [(["show", "twelve"], ["not a valid"]), (["frobnicate"], ["no such command"])]:
        refused(qem(*args), *words)


# -- where the store lives -------------------------------------------------------------------


def test_init_creates_and_is_idempotent(qem, ws):
    first = ok(qem("init"))
    assert "created store" in first.stdout and str(store_path(ws)) in first.stdout
    assert store_path(ws).is_file()
    again = ok(qem("init"))
    assert "already exists" in again.stdout
    assert ok(qem("verify")).stderr.startswith("ok: ")


def test_first_write_creates_the_store_and_says_so(qem, ws):
    first = ok(qem("add", "the first note", "--kind", "task"))
    assert first.stdout.strip() == "1"
    assert "created a new store" in first.stderr and str(store_path(ws)) in first.stderr
    second = ok(qem("add", "the second note", "--kind", "task"))
    assert second.stdout.strip() == "2" and "created" not in second.stderr


@pytest.mark.parametrize("args", [["show", "1"], ["list"], ["log"], ["verify"], ["dump"],
                                  ["log", "1"], ["list", "--json"]])
def test_reading_a_missing_store_says_how_to_create_one(qem_here, ws, args):
    refused(qem_here(*args), "no qem store", str(store_path(ws)), "qem init")
    assert not (ws / ".qem").exists(), "a read must not create anything"


@pytest.mark.parametrize("args", [["revoke", "1", "-m", "x"], ["supersede", "1", "new text"],
                                  ["forget", "1", "-m", "x", "--yes"], ["reinstate", "1"],
                                  ["promote", "1"], ["expire", "1"], ["flag-stale", "1", "-m", "x"]])
def test_a_move_on_a_missing_store_creates_nothing(qem_here, ws, args):
    refused(qem_here(*args), "no qem store", "qem init")
    assert not (ws / ".qem").exists()


def test_a_missing_store_through_the_real_entry_point(qem, ws):
    refused(qem("list"), "no qem store", str(store_path(ws)), "qem init")
    refused(qem("revoke", "1", "-m", "x"), "no qem store", "qem init")
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
        assert [n.text for n in s.notes()] == ["via option", "via env"]
    with Store.open(store_path(other)) as s:
        assert [n.text for n in s.notes()] == ["option wins"]


def test_the_nearest_ancestor_holding_dot_qem_wins(qem, ws):
    ok(qem("init"))
    deep = ws / "a" / "b" / "c"
    deep.mkdir(parents=True)
    ok(run_qem("add", "from deep inside", "-k", "task", cwd=deep))
    assert not (deep / ".qem").exists()
    ok(run_qem("init", "--workspace", str(ws / "a"), cwd=deep))  # a nearer workspace now
    ok(run_qem("add", "nearer", "-k", "task", cwd=deep))
    with Store.open(store_path(ws)) as s:
        assert [n.text for n in s.notes()] == ["from deep inside"]
    with Store.open(store_path(ws / "a")) as s:
        assert [n.text for n in s.notes()] == ["nearer"]
    assert ok(run_qem("show", "1", cwd=deep / "..")).stdout.rstrip().endswith("nearer")


def test_without_any_dot_qem_the_current_directory_is_the_workspace(qem, ws):
    assert not any((p / ".qem").is_dir() for p in ws.resolve().parents), "a stray .qem above tmp"
    ok(qem("add", "here", "-k", "task"))
    assert store_path(ws).is_file()


def test_store_option_and_env(tmp_path, qem, ws):
    by_option = tmp_path / "stores" / "opt.db"
    by_env = tmp_path / "env.db"
    ok(qem("add", "into option store", "-k", "task", "--store", str(by_option)))
    ok(qem("add", "into env store", "-k", "task", env={"QEM_STORE": str(by_env)}))
    ok(qem("add", "option beats env", "-k", "task", "--store", str(by_option),
           env={"QEM_STORE": str(by_env)}))
    assert not (ws / ".qem").exists()
    assert ok(qem("list", "--store", str(by_option))).stdout.count("\n") == 2
    shown = ok(qem("show", "1", env={"QEM_STORE": str(by_env)})).stdout
    assert "into env store" in shown


def test_a_file_that_is_not_a_store_is_refused(tmp_path, qem):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite " * 50)
    refused(qem("list", "--store", str(junk)), "not a qem store")
    refused(qem("add", "x", "-k", "task", "--store", str(junk)), "not a qem store")
    assert junk.read_bytes() == b"definitely not sqlite " * 50


# -- every move, allowed ---------------------------------------------------------------------


def test_the_lifecycle_through_the_cli(qem, ws):
    assert ok(qem("add", "Run tests in the venv", "-k", "directive", "-p", "high")).stdout == "1\n"
    assert ok(qem("flag-stale", "1", "-m", "venv moved")).stdout.startswith("#1 stale_flagged (seq 2)")
    # a stale note is still in force: it can be superseded
    assert ok(qem("supersede", "1", "Run tests in .venv", "-m", "path changed")).stdout == "2\n"
    assert ok(qem("revoke", "2", "-m", "wrong path")).stdout.startswith("#2 revoked")
    assert ok(qem("reinstate", "2", "-m", "right after all")).stdout.startswith("#2 reinstated")
    assert ok(qem("promote", "2", "-m", "I said so")).stdout.startswith("#2 promoted")
    assert ok(qem("expire", "2")).stdout.startswith("#2 expired")
    assert ok(qem("add", "x", "-k", "task", "--actor", "someone-else")).stdout == "3\n"
    assert ok(qem("flag-stale", "3", "-m", "check")).returncode == 0
    assert ok(qem("revoke", "3", "-m", "stale notes can be revoked")).returncode == 0
    assert ok(qem("add", "y", "-k", "task")).stdout == "4\n"
    assert ok(qem("flag-stale", "4", "-m", "check")).returncode == 0
    assert ok(qem("expire", "4", "-m", "stale notes can expire")).returncode == 0

    notes = {n["id"]: n for n in json.loads(ok(qem("list", "--json")).stdout)}
    assert {i: n["state"] for i, n in notes.items()} == {
        1: "superseded", 2: "expired", 3: "revoked", 4: "expired"}
    assert notes[2]["provenance"] == "human"
    assert (notes[2]["kind"], notes[2]["priority"], notes[2]["supersedes"]) == ("directive", "high", 1)
    assert notes[1]["superseded_by"] == 2 and notes[1]["text"] == "Run tests in the venv"
    assert notes[3]["actor"] == "someone-else" and notes[1]["actor"] == "tester"
    events = json.loads(ok(qem("log", "--json")).stdout)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    promoted = next(e for e in events if e["type"] == "promoted")
    assert promoted["data"] == {"from": "agent"} and promoted["reason"] == "I said so"
    with Store.open(store_path(ws)) as s:
        assert s.verify() == []


def test_supersede_options_and_stdin(qem, ws):
    populate(ws)
    ok(qem("supersede", "1", "-", "--kind", "gotcha", "-p", "low", input="  from stdin  \r\n"))
    new = json.loads(ok(qem("show", "9", "--json")).stdout)
    assert (new["text"], new["kind"], new["priority"], new["supersedes"]) == (
        "  from stdin", "gotcha", "low", 1)


def test_show_and_list_and_log_text_output(qem, ws):
    ids = populate(ws)
    shown = ok(qem("show", str(ids["revoked"]))).stdout
    assert f"#{ids['revoked']} finding" in shown and "revoked" in shown and "setup" in shown
    assert shown.rstrip().endswith("the revoked note")
    assert "forgotten" in ok(qem("show", str(ids["forgotten"]))).stdout
    listed = ok(qem("list")).stdout.splitlines()
    kinds = [line.split("\t")[1] for line in listed]
    assert kinds == ["directive", "task", "gotcha", "gotcha", "finding", "reference", "decision",
                     "operational"]  # kind order, then id
    assert ok(qem("list", "--state", "revoked")).stdout.startswith(f"#{ids['revoked']}\t")
    assert len(ok(qem("list", "--kind", "gotcha")).stdout.splitlines()) == 2
    empty = ok(qem("list", "--kind", "task", "--state", "expired"))
    assert empty.stdout == "" and "no notes match" in empty.stderr
    log = ok(qem("log", str(ids["superseded"]))).stdout.splitlines()
    assert len(log) == 2 and "created" in log[0] and f"superseded by #{ids['successor']}" in log[1]


# -- JSON shapes -----------------------------------------------------------------------------


def test_json_shapes(qem, ws):
    ids = populate(ws)
    one = json.loads(ok(qem("show", str(ids["successor"]), "--json")).stdout)
    assert NOTE_KEYS <= set(one)
    assert one["id"] == ids["successor"] and one["supersedes"] == ids["superseded"]
    assert one["created_at"] == AT and one["actor"] == "setup" and one["state"] == "active"
    many = json.loads(ok(qem("list", "--json")).stdout)
    assert isinstance(many, list) and len(many) == len(ids)
    assert all(NOTE_KEYS <= set(n) for n in many)
    assert next(n for n in many if n["id"] == ids["forgotten"])["text"] is None
    events = json.loads(ok(qem("log", "--json")).stdout)
    assert all(EVENT_KEYS <= set(e) for e in events)
    assert len(events) == len(ok(qem("dump")).stdout.splitlines())
    mine = json.loads(ok(qem("log", str(ids["revoked"]), "--json")).stdout)
    assert [(e["type"], e["reason"], e["note_id"]) for e in mine] == [
        ("created", None, ids["revoked"]), ("revoked", "setup", ids["revoked"])]


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
    "add  -k task",
}


@pytest.mark.parametrize("args, words", REFUSALS, ids=[" ".join(a) for a, _ in REFUSALS])
def test_refusals_exit_2_and_leave_the_store_unchanged(qem_here, ws, args, words):
    ids = populate(ws)
    before = snapshot(ws)
    proc = qem_here(*[a.format(**ids) for a in args])
    refused(proc, *[w.format(**ids) for w in words])
    assert proc.stdout == ""
    assert snapshot(ws) == before


def test_refusals_through_the_real_entry_point(qem, ws):
    """A sample of the table above, one of each kind, run as a user runs them."""
    ids = populate(ws)
    before = snapshot(ws)
    sample = [(a, w) for a, w in REFUSALS if " ".join(a) in REAL_ENTRY_SAMPLE]
    assert len(sample) == len(REAL_ENTRY_SAMPLE)
    for args, words in sample:
        proc = qem(*[a.format(**ids) for a in args])
        refused(proc, *[w.format(**ids) for w in words])
        assert proc.stdout == ""
    assert snapshot(ws) == before


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", ["empty"]),
        (b"\r\n  \r\n", ["empty"]),
        (b"before\x00after", ["NUL"]),
        (b"not \xff utf-8", ["UTF-8"]),
    ],
)
def test_bad_text_on_stdin_is_refused(qem_here, ws, data, words):
    populate(ws)
    before = snapshot(ws)
    refused(qem_here("add", "-", "-k", "task", input=data), *words)
    assert snapshot(ws) == before


def test_bad_text_on_stdin_through_the_real_entry_point(ws):
    populate(ws)
    before = snapshot(ws)
    refused(run_bytes(["add", "-", "-k", "task"], ws, b"before\x00after"), "NUL")
    refused(run_bytes(["add", "-", "-k", "task"], ws, b"not \xff utf-8"), "UTF-8")
    assert snapshot(ws) == before


def test_undecodable_arguments_are_refused_without_a_traceback(ws):
    """Arguments arrive as bytes; ones that are not UTF-8 must be refused, not crash."""
    populate(ws)
    before = snapshot(ws)
    bad = os.fsdecode(b"caf\xe9")
    for args, word in [(["add", bad, "-k", "task"], "UTF-8"),
                       (["revoke", "1", "-m", bad], "UTF-8"),
                       (["add", "fine", "-k", "task", "--actor", bad], "UTF-8")]:
        proc = subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=ws,
                              capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
        refused(subprocess.CompletedProcess(args, proc.returncode, proc.stdout.decode(),
                                            proc.stderr.decode("utf-8", "replace")), word)
    assert snapshot(ws) == before


# -- text normalization ----------------------------------------------------------------------


def test_text_is_normalized_on_add(qem, ws):
    raw = "\r\n\r\n    indented first line   \r\n\r\n\r\nafter two blanks\t \rold mac line\n\n  "
    ok(qem("add", raw, "-k", "finding"))
    ok(qem("add", "-", "-k", "finding", input=raw))
    want = "    indented first line\n\n\nafter two blanks\nold mac line"
    for note_id in ("1", "2"):
        assert json.loads(ok(qem("show", note_id, "--json")).stdout)["text"] == want
    dumped = [json.loads(line) for line in ok(qem("dump")).stdout.splitlines()]
    assert [e["data"]["text"] for e in dumped] == [want, want]


def test_stdin_text_is_read_as_utf8_bytes(ws):
    proc = run_bytes(["add", "-", "-k", "reference"], ws, "Zoë's café ✅\r\nline two  \r\n".encode())
    ok(proc)
    with Store.open(store_path(ws)) as s:
        assert s.note(1).text == "Zoë's café ✅\nline two"


# -- forget ----------------------------------------------------------------------------------

SECRET = "ghp_R3allyS3cretT0ken"


def test_forget_erases_the_text_everywhere_and_leaves_a_tombstone(qem, ws):
    ok(qem("add", f"The deploy token is {SECRET}", "-k", "operational"))
    ok(qem("supersede", "1", f"Rotate {SECRET} monthly"))
    ok(qem("add", "an innocent note", "-k", "task"))
    ok(qem("forget", "1", "-m", "contained a credential", "--yes", "--actor", "alice"))
    out = ok(qem("forget", "2", "-m", "contained a credential", "--yes")).stdout
    assert out.startswith("#2 forgotten")

    raw = sqlite3.connect(store_path(ws))
    rows = raw.execute("SELECT seq, note_id, type, actor, reason, checkin, data FROM events").fetchall()
    raw.close()
    assert rows and not any(SECRET in json.dumps(row) for row in rows)
    for name in os.listdir(ws / ".qem"):
        assert SECRET.encode() not in (ws / ".qem" / name).read_bytes(), name

    dumped = ok(qem("dump")).stdout
    assert SECRET not in dumped
    created = {e["note_id"]: e for e in map(json.loads, dumped.splitlines()) if e["type"] == "created"}
    assert created[1]["data"]["text"] is None and created[2]["data"]["text"] is None
    assert created[3]["data"]["text"] == "an innocent note"

    tombs = [e for e in json.loads(ok(qem("log", "--json")).stdout) if e["type"] == "forgotten"]
    assert [(e["note_id"], e["actor"], e["reason"]) for e in tombs] == [
        (1, "alice", "contained a credential"), (2, "tester", "contained a credential")]
    assert all(e["data"] == {} for e in tombs)

    shown = json.loads(ok(qem("show", "2", "--json")).stdout)
    assert (shown["state"], shown["text"], shown["supersedes"]) == ("forgotten", None, 1)
    log = ok(qem("log")).stdout
    assert SECRET not in log and "forgotten by alice (contained a credential)" in log
    # the highest id was forgotten: the next note still gets a new one
    ok(qem("forget", "3", "-m", "tidy", "--yes"))
    assert ok(qem("add", "after forgetting", "-k", "task")).stdout == "4\n"
    with Store.open(store_path(ws)) as s:
        assert s.verify() == []


# -- dump and load ---------------------------------------------------------------------------


def test_dump_load_dump_is_byte_identical(tmp_path, qem, ws):
    populate(ws)
    with open_store(ws) as s:
        add(s, "ünïcødé ✅ \"quotes\" \\ and\n\n  indentation", kind="reference", actor="setup")
        s.write(lambda tx: tx.emit(1, "stale_flagged", "reviewer", "check", checkin="ck-7"),
                at="2026-08-01T09:30:00Z")
    first = ok(qem("dump")).stdout
    backup = tmp_path / "backup.jsonl"
    ok(qem("dump", str(backup)))
    assert backup.read_bytes() == first.encode("utf-8")

    copy = tmp_path / "copy"
    copy.mkdir()
    loaded = ok(run_qem("load", str(backup), cwd=copy))
    assert "loaded" in loaded.stdout and f"head is now {len(first.splitlines())}" in loaded.stdout
    assert ok(run_qem("dump", cwd=copy)).stdout == first
    with Store.open(store_path(copy)) as loaded_store, Store.open(store_path(ws)) as original:
        assert loaded_store.notes() == original.notes()
        assert loaded_store.verify() == []

    via_stdin = tmp_path / "via-stdin"
    via_stdin.mkdir()
    ok(run_qem("load", "-", cwd=via_stdin, input=first))
    assert ok(run_qem("dump", cwd=via_stdin)).stdout == first


@pytest.mark.skipif(not CORPUS.exists(), reason="fixture corpus not generated yet")
def test_the_fixture_corpus_loads(qem, ws):
    raw = CORPUS.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    proc = ok(qem("load", str(CORPUS)))
    assert f"loaded {len(lines)} events" in proc.stdout
    assert ok(qem("verify")).stderr.startswith("ok: ")
    dumped = subprocess.run([sys.executable, "-m", "qem_edit", "dump"], cwd=ws, capture_output=True)
    assert dumped.returncode == 0 and dumped.stdout == raw
    created = sum(1 for line in lines if json.loads(line)["type"] == "created")
    assert len(json.loads(ok(qem("list", "--json")).stdout)) == created


def _line(seq=1, note_id=50, type_="created", **over) -> str:
    obj = {"seq": seq, "note_id": note_id, "type": type_, "at": AT, "actor": "s", "reason": None,
           "checkin": None,
           "data": {"kind": "task", "priority": "low", "provenance": "agent", "text": "loaded",
                    "supersedes": None} if type_ == "created" else {}}
    obj.update(over)
    return json.dumps(obj)


LOAD_REFUSALS = [
    ("bad-json", [_line(), "{this is not json"], ["bad-json.jsonl:2", "not JSON"]),
    ("missing-field", [_line(), json.dumps({k: v for k, v in json.loads(_line(2, 51)).items() if k != "at"})],
     ["missing-field.jsonl:2", "missing", "at"]),
    ("unknown-type", [_line(), _line(2, 50, "vanished")], ["unknown-type.jsonl:2", "unknown event type"]),
    ("bad-time", [_line(at="yesterday")], ["bad-time.jsonl:1", "UTC time"]),
    ("not-normalized", [_line(data={"kind": "task", "priority": "low", "provenance": "agent",
                                    "text": "trailing  \n", "supersedes": None})],
     ["not-normalized.jsonl:1", "not normalized"]),
    ("existing-id", [_line(), _line(2, 1)], ["existing-id.jsonl:2", "note #1 already exists"]),
    ("no-replay", [_line(), _line(2, 50, "reinstated")],
     ["no-replay.jsonl:2", "cannot reinstate note #50", "active"]),
    ("unknown-note", [_line(), _line(2, 77, "revoked", reason="x")], ["unknown-note.jsonl:2", "no note #77"]),
    ("seq-order", [_line(2), _line(1, 51)], ["seq-order.jsonl:2", "does not follow"]),
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


def test_load_refusals_through_the_real_entry_point(tmp_path, qem, ws):
    populate(ws)
    before = snapshot(ws)
    for name, lines, words in [LOAD_REFUSALS[0], LOAD_REFUSALS[6]]:
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        refused(qem("load", str(bad)), *words)
    refused(qem("load", "-", input=_line() + "\n" + _line(2, 50, "revoked") + "\n" + _line(3, 50, "revoked")),
            "-:3", "cannot revoke note #50")
    assert snapshot(ws) == before


def test_load_of_a_missing_file(tmp_path, qem_here, ws):
    populate(ws)
    refused(qem_here("load", str(tmp_path / "nope.jsonl")), "cannot read", "nope.jsonl")


def test_load_appends_and_keeps_ids(tmp_path, qem, ws):
    ids = populate(ws)
    extra = tmp_path / "extra.jsonl"
    extra.write_text(_line() + "\n" + _line(2, 50, "revoked", reason="loaded reason") + "\n")
    ok(qem("load", str(extra)))
    note = json.loads(ok(qem("show", "50", "--json")).stdout)
    assert (note["state"], note["text"], note["created_at"]) == ("revoked", "loaded", AT)
    assert max(ids.values()) < 50
    assert ok(qem("add", "next", "-k", "task")).stdout == "51\n"


# -- verify ----------------------------------------------------------------------------------


def test_verify_passes_on_a_fresh_store(qem, ws):
    ok(qem("init"))
    assert "0 events" in ok(qem("verify")).stderr
    populate(ws)
    assert ok(qem("verify")).stderr.startswith("ok: ")


def test_verify_catches_a_tampered_cache_and_repair_fixes_it(qem, ws):
    populate(ws)
    before = snapshot(ws)[0]
    raw = sqlite3.connect(store_path(ws))
    raw.execute("UPDATE notes SET text = 'x' WHERE id = 1")
    raw.commit()
    raw.close()
    assert json.loads(ok(qem("show", "1", "--json")).stdout)["text"] == "x"

    proc = qem("verify")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "note #1" in proc.stdout and "text" in proc.stdout
    assert "--repair" in proc.stderr

    fixed = ok(qem("verify", "--repair"))
    assert "rebuilt" in fixed.stdout and fixed.stderr.startswith("ok: ")
    assert ok(qem("verify")).stderr.startswith("ok: ")
    assert json.loads(ok(qem("show", "1", "--json")).stdout)["text"] == "the active note"
    assert snapshot(ws)[0] == before  # the log itself never changed


def test_events_cannot_be_deleted_or_rewritten_behind_qems_back(qem, ws):
    populate(ws)
    before = snapshot(ws)
    raw = sqlite3.connect(store_path(ws))
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("DELETE FROM events")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("UPDATE events SET reason = 'rewritten'")
    raw.close()
    assert snapshot(ws) == before
    ok(qem("verify"))

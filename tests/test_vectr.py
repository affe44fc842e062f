"""`qem import vectr`, against a real vectr store made by vectr's own code
(fixtures/vectr/: the store, its schema, and what vectr itself says about every note in
expected.json), note by note, event by event."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from builders import store_path
from conftest import FIXTURES, run_qem
from test_cli import snapshot

from qem_edit.base.stored_form import normalize_text
from qem_edit.storage.store import Store

VECTR = FIXTURES / "vectr"
STORE = VECTR / "vectr-store.db"
EXPECTED = json.loads((VECTR / "expected.json").read_text("utf-8"))
MAIN = EXPECTED["meta"]["main_workspace"]


def utc(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def imported(ws: Path, *args: str, store: Path = STORE) -> str:
    done = run_qem("import", "vectr", str(store), *args, cwd=ws)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_column_nested_past_what_the_log_holds_is_kept_as_its_text(tmp_path: Path) -> None:
    """A vectr column (tags, anchors, triggers) is carried as JSON where its event stays within
    the log's nesting (logtree.MAX_NESTING), else as its text: the import writes nothing a
    reader sets aside, so verify is clean and a fresh index holds every imported note."""
    from qem_edit.storage.logtree import MAX_NESTING

    for levels, kept in ((MAX_NESTING - 3, "json"), (MAX_NESTING - 2, "text"), (900, "text")):
        store, ws = tmp_path / f"s{levels}.db", tmp_path / f"ws{levels}"
        ws.mkdir()
        shutil.copy(STORE, store)
        tags = "[" * levels + "]" * levels
        with sqlite3.connect(store) as db:
            db.execute("update notes set tags = ? where note_id = 1", (tags,))
        imported(ws, "--workspace-name", "orbit", store=store)
        done = run_qem("verify", cwd=ws)
        assert done.returncode == 0 and "disagrees" not in done.stdout, done.stdout[-2000:]
        (ws / ".qem" / "index.db").unlink()
        listed = run_qem("list", "--json", cwd=ws)
        assert listed.returncode == 0 and "set aside" not in listed.stderr, listed.stderr
        with Store.open(ws / ".qem") as opened:
            data = next(e.data for e in opened.events() if e.type == "created" and e.data["vectr"]["id"] == 1)
        assert data["vectr"]["tags"] == (tags if kept == "text" else json.loads(tags)), levels


def expected_state(note: dict) -> str:
    """docs/VECTR.md's state table: what a vectr note is in qem."""
    if note["valid_until"] is not None:  # superseded, by either path, whatever followed
        return "superseded"
    if note["state"] in ("revoked", "expired"):
        return note["state"]
    return "stale" if note["stale_flagged"] else "active"


@pytest.fixture(scope="module")
def orbit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    ws = tmp_path_factory.mktemp("orbit")
    return ws, imported(ws, "--workspace-name", "orbit")


def test_every_note_keeps_what_vectr_says_about_it(orbit: tuple[Path, str]) -> None:
    ws, _ = orbit
    notes = EXPECTED["workspaces"][MAIN]["notes"]
    with Store.open(store_path(ws)) as s:
        assert s.count() == len(notes) == 96
        qem = {n["id"]: s.note(s.resolve(f"vectr:{n['id']}")) for n in notes}
        created = {n["id"]: s.events(qem[n["id"]].id)[0] for n in notes}
    for n in notes:
        note, event = qem[n["id"]], created[n["id"]]
        assert note.text == normalize_text(n["text"]), n["id"]
        assert (note.kind, note.priority, note.provenance) == (n["kind"], n["priority"], n["provenance"]), n["id"]
        assert note.created_at == utc(n["created_at"]) == n["created_utc"][:19] + "Z"
        assert note.actor == (n["author_id"] or n["events"][0]["actor"]), n["id"]
        assert note.state == expected_state(n), (n["id"], note.state, n["state"])
        if note.state in ("revoked", "expired"):
            assert note.state_reason == n["state_reason"] and note.state_actor == n["state_actor"], n["id"]
        vectr = event.data["vectr"]
        assert (vectr["id"], vectr["workspace"], vectr["created_at"]) == (n["id"], MAIN, n["created_at"])
        assert vectr["tags"] == n["tags"] and vectr["anchors"] == n["anchors"] and vectr["scope"] == n["scope"]
        assert vectr["user_quote_bound"] == bool(n["user_quote"])


def test_supersession_links_are_kept_or_named(orbit: tuple[Path, str]) -> None:
    ws, out = orbit
    notes = {n["id"]: n for n in EXPECTED["workspaces"][MAIN]["notes"]}
    with Store.open(store_path(ws)) as s:
        by_vectr = {i: s.note(s.resolve(f"vectr:{i}")) for i in notes}
    qem_id = {i: n.id for i, n in by_vectr.items()}
    for i, n in notes.items():
        note = by_vectr[i]
        if n["supersedes"] in notes:
            assert note.supersedes == qem_id[n["supersedes"]], i
        if n["superseded_by_note_id"] is not None:
            assert note.superseded_by == qem_id[n["superseded_by_note_id"]], i
    # the chains of SCHEMA.md section 4, followed through qem
    assert [by_vectr[i].superseded_by for i in (15, 27)] == [qem_id[27], qem_id[45]]
    assert [by_vectr[i].superseded_by for i in (34, 46)] == [qem_id[46], qem_id[94]]
    # code_hash supersession (no event in vectr): 30 → 39, named as mapped
    assert by_vectr[39].supersedes == qem_id[30] and by_vectr[30].superseded_by == qem_id[39]
    assert "vectr #30: superseded by #39 (coder-2) through their code_hash" in out
    # 29 supersedes 25, which vectr forgot: no pointer to nothing, the link kept and named
    assert by_vectr[29].supersedes is None and by_vectr[29].state == "active"
    assert "vectr #29: supersedes vectr #25, a note the file no longer holds" in out
    # `contradicts` is a revocation, not a supersession (32, by 38)
    assert by_vectr[32].state == "revoked" and by_vectr[32].state_reason == "contradicted by #38"


def test_every_vectr_event_is_applied_or_named(orbit: tuple[Path, str]) -> None:
    ws, out = orbit
    notes = EXPECTED["workspaces"][MAIN]["notes"]
    with Store.open(store_path(ws)) as s:
        events = s.events()
        created = {e.data["vectr"]["id"]: e for e in events if e.type == "created"}
    applied = {e.data["vectr"]["event"]: e for e in events if e.data["vectr"]["event"] is not None}
    assert [e.data["vectr"].get("link") for e in events if e.data["vectr"]["event"] is None] == ["code_hash"]
    for n in notes:
        data = created[n["id"]].data["vectr"]
        set_aside = {x["event"]: x for x in data["not_applied"]} | {x["event"]: x for x in data["promotions_folded"]}
        for v in n["events"]:
            if v["id"] in applied:
                e = applied[v["id"]]
                assert (e.type, e.at, e.reason) == (v["type"], utc(v["ts"]), v["reason"]), v
                assert e.actor == (n["author_id"] or v["actor"] if v["type"] == "created" else v["actor"]), v
            else:
                assert v["id"] in set_aside, (n["id"], v)
                if v["id"] in {x["event"] for x in data["not_applied"]}:
                    assert f"vectr #{n['id']}: {v['type']} of {utc(v['ts'])[:10]}" in out, v
    # what qem's lifecycle cannot hold, named: an expiry and a revocation after supersession,
    # a second stale flag; a promotion to agent folded into the provenance at creation
    assert "vectr #2: expired of 2026-07-18 by system (ttl exceeded) not applied" in out
    assert "vectr #55: revoked of 2026-05-22" in out and "qem cannot revoke a note that is superseded" in out
    assert "vectr #12: stale_flagged of" in out
    assert "vectr #47: promoted to agent" in out
    assert "vectr #5: its title 'API compatibility rules'" in out


def test_the_history_reads_like_vectr_s(orbit: tuple[Path, str]) -> None:
    ws, _ = orbit
    assert "reinstated" in run_qem("log", "vectr:54", cwd=ws).stdout
    shown = run_qem("show", "vectr:48", cwd=ws)
    assert shown.returncode == 0 and "revoked at 2026-05-2" in shown.stdout and "ORB-490" in shown.stdout
    assert run_qem("verify", cwd=ws).returncode == 0


def test_importing_twice_imports_nothing_new(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    first = imported(ws, "--workspace-name", "side-project")
    assert first.startswith("imported 6 notes, 8 events from vectr workspace /home/dev/side-project: 8 new events")
    before = snapshot(ws)
    again = imported(ws, "--workspace-name", "/home/dev/side-project")
    assert again.startswith("imported 6 notes, 8 events") and "0 new events (8 already here)" in again
    assert snapshot(ws) == before


def test_notes_qem_cannot_hold_are_skipped_by_name(tmp_path: Path) -> None:
    changed = tmp_path / "changed.db"
    shutil.copyfile(STORE, changed)
    conn = sqlite3.connect(changed)
    conn.execute("UPDATE notes SET kind = 'idea' WHERE note_id = 58")
    conn.execute("UPDATE notes SET content = 'gAAAAABlockedciphertext' WHERE note_id = 57")
    conn.commit()
    conn.close()
    ws = tmp_path / "ws"
    ws.mkdir()
    out = imported(ws, "--workspace-name", "side-project", store=changed)
    assert "vectr #58: not imported: kind 'idea' is not a qem kind" in out
    assert "vectr #57: not imported: its content is encrypted" in out
    assert out.startswith("imported 4 notes")
    # 60 superseded 58, which was not imported: 60 stands alone, the link named
    assert "vectr #60: supersedes vectr #58, a note not imported" in out
    assert run_qem("verify", cwd=ws).returncode == 0


@pytest.mark.parametrize("args, words", [
    (["vectr", "missing.db"], "missing.db: no such file"),
    (["vectr", str(STORE)], "holds 2 vectr workspaces"),
    (["vectr", str(STORE), "--workspace-name", "nope"], "names no vectr workspace"),
    (["vectr", str(FIXTURES / "corpus-749.jsonl")], "cannot be read as a vectr store"),
    (["mem0", str(STORE)], "No such command 'mem0'"),  # `qem import -h` lists vectr and markdown
])
def test_bad_input_is_refused_and_writes_nothing(ws: Path, args: list[str], words: str) -> None:
    done = run_qem("import", *args, cwd=ws)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr and "Traceback" not in done.stderr
    assert not (ws / ".qem").exists()


# -- a store holding what vectr never writes ---------------------------------------------------------

# vectr's tables as a hand-made or older store may have them: no NOT NULL, no PRIMARY KEY
LOOSE = ["CREATE TABLE n AS SELECT * FROM notes", "DROP TABLE notes", "ALTER TABLE n RENAME TO notes",
         "CREATE TABLE e AS SELECT * FROM note_events", "DROP TABLE note_events", "ALTER TABLE e RENAME TO note_events"]


def changed_store(tmp_path: Path, *statements: str) -> Path:
    """The fixture's store copied and changed by `statements`."""
    changed = tmp_path / "changed.db"
    shutil.copyfile(STORE, changed)
    with sqlite3.connect(changed) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()
    return changed


@pytest.mark.parametrize("statements, words", [
    (["UPDATE notes SET created_at = 'abc' WHERE note_id = 1"],
     "vectr #1: created_at 'abc' is not a time (epoch seconds)"),
    (["UPDATE notes SET created_at = 1e20 WHERE note_id = 1"],
     "vectr #1: created_at 1e+20 is not a time qem can write (epoch seconds within the years 1 to 9999)"),
    (["UPDATE notes SET created_at = -1e12 WHERE note_id = 1"],
     "vectr #1: created_at -1000000000000.0 is not a time qem can write"),
    (["UPDATE notes SET created_at = 1e999 WHERE note_id = 1"],  # SQLite keeps an infinity
     "vectr #1: created_at inf is not a time (epoch seconds, a finite number)"),
    ([*LOOSE, "UPDATE notes SET created_at = NULL WHERE note_id = 1"], "vectr #1: created_at None is not a time"),
    (["UPDATE note_events SET ts = 'soon' WHERE id = 28"],
     "vectr #15: its superseded event's ts 'soon' (vectr event 28) is not a time (epoch seconds)"),
    ([*LOOSE, "UPDATE note_events SET ts = NULL WHERE id = 42"],
     "vectr #32: its revoked event's ts None (vectr event 42) is not a time"),
    (["UPDATE notes SET supersedes = 'abc' WHERE note_id = 28"],
     "vectr #28: supersedes 'abc' is not a vectr note id (an integer)"),
    (["UPDATE notes SET supersedes = 10.5 WHERE note_id = 28"], "vectr #28: supersedes 10.5 is not a vectr note id"),
    (["UPDATE notes SET author_id = 'bob' || char(7) WHERE note_id = 1"],
     "vectr #1: author_id 'bob\\x07' is not a writer's name qem takes"),
    (["UPDATE note_events SET actor = 'agent' || char(0) WHERE id = 42"],
     "vectr #32: its revoked event's actor 'agent\\x00' (vectr event 42) is not a writer's name qem takes"),
    (["UPDATE note_events SET reason = x'41' WHERE id = 42"],
     "vectr #32: its revoked event's reason b'A' (vectr event 42) is not a reason qem takes"),
    (["UPDATE note_events SET note_id = 'abc' WHERE id = 2"],
     "vectr event 2 ('created'): note_id 'abc' is not a note id (an integer)"),
    ([*LOOSE, "UPDATE notes SET note_id = NULL WHERE note_id = 1"], "a vectr note's note_id None is not a note id"),
    (["UPDATE note_events SET id = 0 WHERE id = 42"], "a vectr event's id 0 is not an event id"),
    (["ALTER TABLE notes DROP COLUMN created_at"], "its table notes has no column created_at"),
])
def test_a_store_holding_what_vectr_never_writes_is_refused_and_nothing_is_written(
        tmp_path: Path, ws: Path, statements: list[str], words: str) -> None:
    """A value qem needs (a time, a note or event id, a writer's name, a reason) that is
    not one: the import is refused, naming the note, the column and the value, before a
    memory is made: exit 2, no traceback, no .qem/ (an event a reader set aside would hide
    every imported note on every clone)."""
    done = run_qem("import", "vectr", str(changed_store(tmp_path, *statements)), "--workspace-name", "orbit", cwd=ws)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert words in done.stderr and "nothing was imported" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (ws / ".qem").exists()


def read_fresh(ws: Path) -> dict[int, dict]:
    """The memory checked as another clone reads it (verify clean, a fresh index sets nothing
    aside), and each imported note's created data, by vectr id (one note each)."""
    done = run_qem("verify", cwd=ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout[-2000:], done.stderr[-2000:])
    (ws / ".qem" / "index.db").unlink()
    listed = run_qem("list", "--json", cwd=ws)
    assert listed.returncode == 0 and "set aside" not in listed.stderr, listed.stderr
    events = [json.loads(line) for line in run_qem("dump", cwd=ws).stdout.splitlines()[1:]]
    created = [e["data"] for e in events if e["type"] == "created"]
    assert len({data["vectr"]["id"] for data in created}) == len(created)
    return {data["vectr"]["id"]: data for data in created}


def test_a_note_superseding_itself_or_a_later_note_stands_alone_the_link_named(tmp_path: Path, ws: Path) -> None:
    """vectr's `supersedes` pointing at the note itself, or at a note created after it (as
    in a cycle of two), is a link qem cannot follow: as for a link to a note vectr forgot,
    the note is imported superseding nothing, the link kept in data.vectr and named."""
    store = changed_store(tmp_path, "UPDATE notes SET supersedes = 1 WHERE note_id = 1",
                          "UPDATE notes SET supersedes = 3 WHERE note_id = 2",
                          "UPDATE notes SET supersedes = 2 WHERE note_id = 3",
                          "UPDATE notes SET supersedes = 9999 WHERE note_id = 4")
    done = run_qem("import", "vectr", str(store), "--workspace-name", "orbit", cwd=ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    out = done.stdout
    assert "vectr #1: supersedes vectr #1, itself: imported superseding nothing" in out
    assert "vectr #2: supersedes vectr #3, a note created after it: imported superseding nothing" in out
    assert "vectr #4: supersedes vectr #9999, a note the file no longer holds" in out
    data = read_fresh(ws)
    assert data[1]["supersedes"] is None and data[1]["vectr"]["supersedes"] == 1
    assert data[2]["supersedes"] is None and data[2]["vectr"]["supersedes"] == 3
    with Store.open(store_path(ws)) as s:
        one, two, three = (s.note(s.resolve(f"vectr:{i}")) for i in (1, 2, 3))
    assert one.supersedes is None and one.superseded_by is None and one.state == "expired"  # (vectr's expiry)
    assert three.supersedes == two.id and two.state == "superseded"  # the cycle's later link, followed


def test_events_out_of_vectr_s_order_are_named_not_applied(tmp_path: Path, ws: Path) -> None:
    """An event of a note before its created event (in vectr's order, its ids), or a second
    created event, cannot apply in qem: each is named and kept in data.vectr.not_applied."""
    store = changed_store(tmp_path, "UPDATE note_events SET id = 1000 WHERE id = 1",
                          "INSERT INTO note_events (workspace, note_id, event, actor, ts)"
                          " VALUES ('/home/dev/orbit', 3, 'created', 'agent', 1777885920.5)")
    done = run_qem("import", "vectr", str(store), "--workspace-name", "orbit", cwd=ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert ("vectr #1: expired of 2026-07-18 by system (ttl exceeded) not applied: it comes before the note's"
            " created event") in done.stdout
    assert "vectr #3: created of 2026-05-04 by agent not applied: the note was created already" in done.stdout
    data = read_fresh(ws)
    assert [x["why"][:13] for x in data[1]["vectr"]["not_applied"]] == ["it comes befo"]
    assert data[3]["vectr"]["not_applied"][0]["type"] == "created"


def test_a_text_past_what_the_log_holds_is_skipped_by_name(tmp_path: Path, ws: Path) -> None:
    """A note whose text is over qem's limit for a stored text (logtree.MAX_TEXT_BYTES) is
    a note qem cannot hold: skipped and named, as an encrypted one is, the others imported."""
    from qem_edit.storage.logtree import MAX_TEXT_BYTES

    big = f"UPDATE notes SET content = 'x' || hex(zeroblob({MAX_TEXT_BYTES // 2})) WHERE note_id = 57"
    store = changed_store(tmp_path, big)
    done = run_qem("import", "vectr", str(store), "--workspace-name", "side-project", cwd=ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "vectr #57: not imported: the text is " in done.stdout
    assert f"bytes stored, over the {MAX_TEXT_BYTES}-byte limit for a note's text" in done.stdout
    assert done.stdout.startswith("imported 5 notes") and 57 not in read_fresh(ws)


def test_columns_qem_only_keeps_are_kept_as_json_a_reader_takes(tmp_path: Path, ws: Path) -> None:
    """Bytes, infinities (JSON text: `Infinity`, `1e999`) and strings UTF-8 cannot hold, in
    columns kept in data.vectr, are kept as text: the log stays JSON that every reader, and
    the index's SQLite JSON functions, take."""
    store = changed_store(tmp_path, "UPDATE notes SET session_id = x'ff00' WHERE note_id = 1",
                          "UPDATE notes SET tags = '[Infinity, 1]', triggers = '[1e999]' WHERE note_id = 2",
                          """UPDATE notes SET tags = '["\\ud800"]' WHERE note_id = 3""",
                          "UPDATE note_events SET payload = x'ff' WHERE id = 42")
    done = run_qem("import", "vectr", str(store), "--workspace-name", "orbit", cwd=ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    data = read_fresh(ws)
    assert data[1]["vectr"]["session_id"] == "\ufffd\x00"
    assert data[2]["vectr"]["tags"] == "[Infinity, 1]" and data[2]["vectr"]["triggers"] == "[1e999]"
    assert data[3]["vectr"]["tags"] == '["\\ud800"]'
    with Store.open(store_path(ws)) as s:
        revoked = next(e for e in s.events() if e.type == "revoked" and e.data["vectr"]["event"] == 42)
    assert revoked.data["vectr"]["payload"] == "\ufffd"


def test_an_unknown_vectr_id_is_named(orbit: tuple[Path, str]) -> None:
    ws, _ = orbit
    done = run_qem("show", "vectr:999", cwd=ws)
    assert done.returncode == 2 and "no note imported from vectr note #999" in done.stderr


# -- anchors ---------------------------------------------------------------------------------------


def vectr_files() -> dict[str, str]:
    """The files make_store.py wrote in vectr's workspace, whose content vectr hashed."""
    import ast

    tree = ast.parse((VECTR / "make_store.py").read_text("utf-8"))
    [files] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "FILES" for t in node.targets)]
    return ast.literal_eval(files)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The orbit project as vectr hashed it, committed, then worked on: orbit/config.py
    changed, docs/deps.md gone."""
    (Path(os.environ["HOME"]) / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    root = tmp_path / "orbit"
    for path, body in vectr_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    git(tmp_path, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "orbit")
    with open(root / "orbit" / "config.py", "a") as changed:
        changed.write("DEBUG = False\n")
    (root / "docs" / "deps.md").unlink()
    return root


def anchors_of_vectr(ws: Path) -> dict[int, tuple[list, object]]:
    """For each anchored vectr note: its qem anchors, and what data.vectr.anchors keeps."""
    with Store.open(store_path(ws)) as s:
        created = [e for e in s.events() if e.type == "created"]
        return {e.data["vectr"]["id"]: ([list(a) for a in s.note(e.note).anchors], e.data["vectr"]["anchors"])
                for e in created if e.data["vectr"]["anchors"] != []}


def test_an_anchor_whose_file_holds_what_vectr_hashed_is_imported_the_others_are_named_and_kept(project: Path) -> None:
    out = imported(project, "--workspace-name", "orbit")
    notes = {n["id"]: n for n in EXPECTED["workspaces"][MAIN]["notes"]}
    found = anchors_of_vectr(project)
    assert set(found) == {9, 12, 13, 14}
    blob = {path: git(project, "hash-object", path) for path in ("orbit/ingest/decoder.py", "orbit/ingest/batcher.py")}
    assert found[13][0] == [["orbit/ingest/decoder.py", blob["orbit/ingest/decoder.py"]]]
    assert found[14][0] == [["orbit/ingest/batcher.py", blob["orbit/ingest/batcher.py"]]]  # changed, and put back
    assert found[12][0] == [] and found[9][0] == []  # changed since; gone
    assert all(found[i][1] == notes[i]["anchors"] for i in found)  # vectr's list, as it was
    assert "anchors: 2 anchored (each file held the content vectr hashed), 2 not matched: kept in data.vectr.anchors" in out
    assert "vectr #9: 'docs/deps.md': no such file or folder in the work tree" in out
    assert "vectr #12: 'orbit/config.py': its content is not the content vectr hashed" in out
    listed = run_qem("anchors", "list", "orbit/ingest", cwd=project)
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == sorted(blob)
    assert run_qem("verify", cwd=project).returncode == 0


def test_importing_again_adds_nothing_though_the_work_tree_changed_since(project: Path) -> None:
    imported(project, "--workspace-name", "orbit")
    before = snapshot(project)
    (project / "orbit" / "ingest" / "decoder.py").write_text("def decode(frame): raise ValueError\n")
    (project / "orbit" / "config.py").write_text(vectr_files()["orbit/config.py"])  # now what vectr hashed
    again = imported(project, "--workspace-name", "orbit")
    assert "0 new events (116 already here)" in again
    assert "vectr #12: 'orbit/config.py': not matched when the note was first imported" in again
    assert snapshot(project) == before


def test_a_second_clone_importing_the_same_store_makes_the_same_events(project: Path, tmp_path: Path) -> None:
    git(project, "checkout", "-q", "--", ".")  # every file as vectr hashed it
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project), str(other))
    for ws in (project, other):
        imported(ws, "--workspace-name", "orbit")
    dumped = [run_qem("dump", cwd=ws).stdout.split("\n", 1) for ws in (project, other)]  # (memory, events)
    assert dumped[0][0] != dumped[1][0] and dumped[0][1] == dumped[1][1]  # two memories; the same events
    assert anchors_of_vectr(other) == anchors_of_vectr(project)
    assert sum(len(anchored) for anchored, _ in anchors_of_vectr(other).values()) == 4  # every anchor matched


def test_hostile_anchors_are_skipped_or_unmatched_and_nothing_outside_the_tree_is_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("a secret beside the project\n")
    hashed = hashlib.sha256(outside.read_bytes()).hexdigest()[:16]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link.txt").symlink_to(outside)
    (ws / "inner").symlink_to(ws / "real.txt")
    (ws / "real.txt").write_bytes(outside.read_bytes())
    changed = tmp_path / "hostile.db"
    shutil.copyfile(STORE, changed)
    conn = sqlite3.connect(changed)
    for note_id, value in [
        (56, '{"path": "real.txt"}'),  # not a list
        (57, '[[1, 2]]'),  # a pair of the wrong types
        (58, "[[[[[[" * 20000),  # not JSON: kept as the text it is
        (60, json.dumps([["../outside.txt", hashed], [str(outside), hashed], ["link.txt", hashed], ["inner", hashed],
                         ["real.txt", 12], ["real.txt", hashed], ["real.txt", hashed]])),
    ]:
        conn.execute("UPDATE notes SET anchors = ? WHERE note_id = ?", (value, note_id))
    conn.execute("UPDATE notes SET anchors = ? WHERE note_id = 61", (b"\xff[]",))  # bytes, not text
    conn.commit()
    conn.close()
    out = imported(ws, "--workspace-name", "side-project", store=changed)
    for note_id in (56, 57, 58, 61):
        assert f"vectr #{note_id}: its anchors are not vectr's list of [path, hash] pairs" in out
    assert "vectr #60: '../outside.txt': a path with an empty, `.` or `..` part" in out and "(not read)" in out
    assert f"vectr #60: {str(outside)!r}: an absolute path" in out
    assert "vectr #60: 'link.txt': link.txt is a symbolic link pointing out of the work tree" in out
    assert "vectr #60: 'inner': not a file" in out  # a link inside the tree: not followed either
    assert "vectr #60: 'real.txt': its hash 12 is not vectr's" in out
    assert "anchors: 1 anchored" in out
    found = anchors_of_vectr(ws)
    assert found[60][0] == [["real.txt", git(tmp_path, "hash-object", str(ws / "real.txt"))]]
    assert run_qem("verify", cwd=ws).returncode == 0


def test_vectr_triggers_with_an_exact_counterpart_become_qem_triggers_the_others_are_named(tmp_path: Path) -> None:
    changed = tmp_path / "triggers.db"
    shutil.copyfile(STORE, changed)
    conn = sqlite3.connect(changed)
    for note_id, value in [
        (56, json.dumps([{"event": "session-start"}, {"path": "src/index/**"}])),
        (57, json.dumps([{"path": "../outside/**"}, {"command": "pytest*", "cooldown": 60}, {"semantic": "locks"}])),
        (58, "not json"),
    ]:
        conn.execute("UPDATE notes SET triggers = ? WHERE note_id = ?", (value, note_id))
    conn.commit()
    conn.close()
    ws = tmp_path / "ws"
    ws.mkdir()
    out = imported(ws, "--workspace-name", "side-project", store=changed)
    assert "vectr #56: triggers @on: start, @when-path: src/index/**" in out
    for rule in ('{"path": "../outside/**"}', '{"command": "pytest*", "cooldown": 60}', '{"semantic": "locks"}',
                 '"not json"'):
        assert f"trigger {rule} has no exact qem counterpart: kept in data.vectr.triggers" in out, rule
    events = [json.loads(line) for line in run_qem("dump", cwd=ws).stdout.splitlines()[1:]]
    data = {e["data"]["vectr"]["id"]: e["data"] for e in events if e["type"] == "created"}
    assert data[56]["triggers"] == {"on": ["start"], "path": ["src/index/**"]}
    assert "triggers" not in data[57] and data[57]["vectr"]["triggers"][2] == {"semantic": "locks"}
    before = snapshot(ws)
    assert "0 new events (8 already here)" in imported(ws, "--workspace-name", "side-project", store=changed)
    assert snapshot(ws) == before


def test_the_fixtures_command_trigger_delivers_before_a_commit(orbit: tuple[Path, str]) -> None:
    ws, out = orbit
    assert "vectr #4: triggers @when-run: git commit*" in out
    assert 'vectr #4: trigger {"event": "pre-commit"} has no exact qem counterpart' in out
    said = run_qem("deliver", "shell", "--command", "git commit -am wip", cwd=ws).stdout
    assert "Run `make lint` before every commit" in said and "when-run git commit*" in said

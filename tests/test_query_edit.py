"""Editing what you asked for: `qem edit`, `qem checkout` and `qem export --stdout` take
`qem query`'s filters, hold exactly the notes they match, and a check-in never touches a
note outside them, whatever others wrote meanwhile.  End to end through the real CLI, on
the bundled 749-note corpus."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from builders import store_path
from conftest import CORPUS, run_qem
from qem_edit.renderer.format import HEADER_RE, decode_query, encode_query

from qem_edit.reads import query
from qem_edit.storage.store import Store

QUERY = ("kind=gotcha", "text~lock")
REASON = "query edit"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus") / "ws"
    root.mkdir()
    done = run_qem("load", str(CORPUS), "-w", str(root))
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def ws(loaded: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(loaded, root)
    return root


def qem(ws: Path, *args: str, **kwargs):  # type: ignore[no-untyped-def]
    return run_qem(*args, "-w", str(ws), **kwargs)


def everything(ws: Path) -> dict:
    with Store.open(store_path(ws)) as store:
        return {n.id: n for n in store.notes()}


def matching(ws: Path, *filters: str) -> list[str]:
    done = qem(ws, "query", *filters, "--json")
    assert done.returncode == 0, done.stderr
    return [n["id"] for n in json.loads(done.stdout)["notes"]]


def shown_ids(text: str) -> set[str]:
    return set(re.findall(r"^- \[#([0-9a-z]+)\]", text, re.M))


def item_line(text: str, short: str) -> str:
    return next(line for line in text.split("\n") if line.startswith(f"- [#{short}]"))


def checkout(ws: Path, target: Path, *filters: str) -> str:
    done = qem(ws, "checkout", *filters, "--path", str(target))
    assert done.returncode == 0, done.stderr
    return target.read_text()


def checkin(ws: Path, target: Path):  # type: ignore[no-untyped-def]
    return qem(ws, "checkin", "--path", str(target), "-m", REASON, "--yes", input="")


def test_a_query_checkout_holds_exactly_the_notes_it_matches(ws: Path, tmp_path: Path) -> None:
    wanted = matching(ws, *QUERY)
    assert 5 < len(wanted) < 100
    text = checkout(ws, tmp_path / "f.md", *QUERY)
    notes = everything(ws)
    assert shown_ids(text) == {notes[i].shown for i in wanted}
    header = text.split("\n", 1)[0]
    match = HEADER_RE.match(header)
    assert match and match["kinds"] == "gotcha" and decode_query(match["query"]) == QUERY
    assert re.findall(r"^## (.*)$", text, re.M) == ["Gotchas"]
    [record] = (store_path(ws) / "checkouts").glob("*/session.json")
    assert json.loads(record.read_text())["selection"]["query"] == list(QUERY)
    printed = qem(ws, "export", "--stdout", *QUERY)
    assert printed.returncode == 0 and text.startswith(printed.stdout)
    assert qem(ws, "export", "--stdout", *QUERY).stdout == printed.stdout  # byte-stable


def test_each_note_filter_picks_the_same_notes_in_the_index_as_in_a_scan(ws: Path) -> None:
    """A note filter is written once (query's table of fields) and runs two ways: as SQL
    in the index for a checkout, as a test over every note for `qem query`; the two agree."""
    for path in ("src/lock.py", "src/deep/run.sh", "srcx/b.py"):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(f"# {path}\n")
    for path in ("src/lock.py", "src", "srcx/b.py"):  # the corpus has no anchors: three notes with one each
        assert qem(ws, "add", f"About {path}", "-k", "gotcha", "--anchor", path, cwd=ws).returncode == 0
    # and a request (the corpus has none): owed by alice, due at the end of a day
    assert qem(ws, "add", "Send the report", "-k", "task", "--to", "alice", "--due", "2030-01-01", cwd=ws).returncode == 0
    with Store.open(store_path(ws)) as store:
        notes = sorted(store.notes(), key=lambda n: n.created_at)
        middle = notes[len(notes) // 2]
        examples = {"kind": "gotcha", "state": "active", "priority": "high", "provenance": middle.provenance,
                    "actor": middle.actor, "since": middle.created_at, "until": middle.created_at,
                    "supersedes": next(n.supersedes for n in notes if n.supersedes), "text~": "lock",
                    "anchor": "src/lock.py", "anchor~": "src", "to": "alice", "due<": "2030-01-02"}
        assert set(examples) == set(query._NOTE_FIELDS)  # a new filter is given an example here
        for key, value in examples.items():
            parsed = query.parse_filters([str(query.Filter(key, value))], events=False)
            scanned = [r["id"] for r in query.answer(store, parsed).results]
            assert scanned and sorted(query.select(store, parsed).ids) == scanned, key


def test_a_query_without_a_kind_keeps_every_section(ws: Path, tmp_path: Path) -> None:
    text = checkout(ws, tmp_path / "f.md", "text~lock", "priority=high")
    assert len(re.findall(r"^## ", text, re.M)) == 7
    assert shown_ids(text) == {everything(ws)[i].shown for i in matching(ws, "text~lock", "priority=high")}


def test_the_query_header_survives_any_filter_text() -> None:
    odd = ("text~a b,c -->%", "kind=gotcha")
    assert decode_query(encode_query(odd)) == odd
    assert HEADER_RE.match(f"<!-- qem memory=abc query={encode_query(odd)} · x -->")


def test_edit_of_a_query_touches_only_its_notes(ws: Path, tmp_path: Path) -> None:
    before = everything(ws)
    wanted = matching(ws, *QUERY)
    changed, dropped = before[wanted[0]], before[wanted[1]]
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\n"
        "p = sys.argv[-1]; lines = open(p).read().split('\\n')\n"
        f"lines = [l + ' (edited)' if l.startswith('- [#{changed.shown}]') else l for l in lines]\n"
        f"lines = [l for l in lines if not l.startswith('- [#{dropped.shown}]')]\n"
        "at = lines.index('## Gotchas')\n"
        "lines[at + 1:at + 1] = ['', '- high · a new gotcha about the lock']\n"
        "open(p, 'w').write('\\n'.join(lines))\n")
    done = qem(ws, "edit", *QUERY, "-m", REASON, "--yes", env={"QEM_EDITOR": f"python3 {editor}"})
    assert done.returncode == 0, done.stderr
    after = everything(ws)
    assert after[changed.id].state == "superseded" and after[dropped.id].state == "revoked"
    new = [n for n in after.values() if n.id not in before]
    assert sorted((n.kind, n.priority, n.text) for n in new) == sorted([
        ("gotcha", "high", "a new gotcha about the lock"), ("gotcha", changed.priority, changed.text + " (edited)")])
    untouched = {i: n for i, n in before.items() if i not in (changed.id, dropped.id)}
    assert {i: after[i] for i in untouched} == untouched


def test_notes_that_stop_or_start_matching_meanwhile_are_left_alone(ws: Path, tmp_path: Path) -> None:
    """A note revoked by someone else (so no longer state=active) is not read as deleted
    by the edit; a note that starts matching meanwhile is not in the edit and not touched."""
    query = ("state=active", *QUERY)
    target = tmp_path / "f.md"
    text = checkout(ws, target, *query)
    notes = everything(ws)
    first, second, third = (notes[i] for i in matching(ws, *query)[:3])
    assert qem(ws, "revoke", first.shown, "-m", "theirs", "--actor", "other").returncode == 0
    added = qem(ws, "add", "another lock gotcha", "--kind", "gotcha", "--actor", "other")
    assert added.returncode == 0
    target.write_text(text.replace(item_line(text, second.shown), item_line(text, second.shown) + " (mine)")
                      .replace(item_line(text, third.shown) + "\n", ""))
    before = everything(ws)
    done = checkin(ws, target)
    assert done.returncode == 0, done.stderr
    after = everything(ws)
    theirs = next(n for n in after.values() if n.shown == added.stdout.strip())
    assert after[first.id] == before[first.id] and after[first.id].state == "revoked"
    assert after[theirs.id] == before[theirs.id] and theirs.state == "active"
    assert after[second.id].state == "superseded" and after[third.id].state == "revoked"
    moved = {i for i in before if after[i] != before[i]}
    assert moved == {second.id, third.id}
    assert f"[#{theirs.shown}]" in target.read_text()  # the file starts again from the query now


def test_a_successor_written_meanwhile_is_not_touched_and_an_edit_of_its_parent_conflicts(ws: Path, tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    text = checkout(ws, target, *QUERY)
    notes = everything(ws)
    one, two = (notes[i] for i in matching(ws, *QUERY)[:2])
    assert qem(ws, "supersede", one.shown, "a successor without the word", "-m", "theirs").returncode == 0
    assert qem(ws, "supersede", two.shown, "another successor", "-m", "theirs").returncode == 0
    before = everything(ws)
    target.write_text(text.replace(item_line(text, one.shown), item_line(text, one.shown) + " (mine)"))
    refused = checkin(ws, target)
    assert refused.returncode == 3, refused.stderr
    assert everything(ws) == before
    target.write_text(text.replace(item_line(text, two.shown) + "\n", ""))  # deleting a superseded note: no-op or conflict
    done = checkin(ws, target)
    assert done.returncode in (0, 3), done.stderr
    successor = before[two.id].superseded_by
    assert everything(ws)[successor] == before[successor]


@pytest.mark.parametrize("args, says", [
    (("edit", "kid=gotcha"), "unknown note filter 'kid'"),
    (("edit", "kind=gotcha", "text~no such text anywhere"), "no notes match kind=gotcha text~no such text anywhere"),
    (("checkout", "kind=gotchas"), "kind='gotchas': use one of"),
    (("checkout", "kind=gotcha", "--kind", "task"), "either --kind/--active or query filters"),
    (("export", "kind=gotcha"), "use them with --stdout"),
    (("export", "--stdout", "since=yesterday"), "not an ISO date"),
])
def test_bad_filters_are_refused_and_change_nothing(ws: Path, args: tuple, says: str) -> None:
    before = everything(ws)
    done = qem(ws, *args, env={"QEM_EDITOR": "false"})
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert everything(ws) == before
    assert not list((store_path(ws) / "checkouts").glob("*/session.json"))


def test_a_printed_query_rendering_cannot_be_checked_in_without_its_checkout(ws: Path, tmp_path: Path) -> None:
    """`export --stdout FILTERS` keeps no record of which notes it held: a check-in of it
    would read every other note as deleted, or miss the deletions; it is refused."""
    target = tmp_path / "f.md"
    target.write_text(qem(ws, "export", "--stdout", *QUERY).stdout.replace("## Gotchas\n", "## Gotchas\n\n- new one\n", 1))
    before = everything(ws)
    done = checkin(ws, target)
    assert done.returncode == 2 and "qem checkout FILTERS --path FILE" in done.stderr, done.stderr
    assert everything(ws) == before


def test_the_mass_change_guard_counts_the_query_s_notes(ws: Path, tmp_path: Path) -> None:
    """Taking 6 of a query's 20-odd live notes out of force is a mass change of that
    checkout, however many notes of its kind the memory holds."""
    target = tmp_path / "f.md"
    text = checkout(ws, target, *QUERY)
    notes = everything(ws)
    live = [notes[i] for i in matching(ws, *QUERY) if notes[i].live]
    assert 6 * 4 > len(live) and len([n for n in notes.values() if n.kind == "gotcha" and n.live]) > 6 * 4
    for note in [n for n in live if "\n" not in (n.text or "")][:6]:
        text = text.replace(item_line(text, note.shown) + "\n", "")
    target.write_text(text)
    before = everything(ws)
    done = checkin(ws, target)
    assert done.returncode == 2 and f"6 of the checkout's {len(live)} live notes" in done.stderr, done.stderr
    assert everything(ws) == before


def test_a_checkout_records_where_its_base_headings_are_until_the_base_is_rewritten(ws: Path, tmp_path: Path) -> None:
    """The check-in skips searching the stretches the edit left alone for headings because
    the checkout noted where base.md's are; a base.md written again since (a rebase, a
    forget's scrub) is not the file they were noted in, and is searched as before."""
    from qem_edit.system.files import write_atomic
    from qem_edit.writes.kept_edits import Checkout

    path = tmp_path / "MEMORY.md"
    done = qem(ws, "checkout", "--path", str(path))
    assert done.returncode == 0, done.stderr
    (directory,) = (ws / ".qem" / "checkouts").iterdir()
    checkout = Checkout(directory)
    base = checkout.base_file.read_bytes()
    heads = checkout.base_heads()
    assert heads and heads == [i for i in range(len(base)) if base.startswith(b"\n## ", i)]
    write_atomic(checkout.base_file, base)
    assert checkout.base_heads() is None
    text = path.read_text("utf-8")
    line = next(x for x in text.split("\n") if x.startswith("- [#"))
    path.write_text(text.replace(line, line + " (edited)", 1), "utf-8")
    done = qem(ws, "checkin", "--path", str(path), "-m", "edited", "--yes")
    assert done.returncode == 0, done.stderr
    assert "1 supersede" in done.stdout + done.stderr

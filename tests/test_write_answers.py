"""A write is answered once for every shell: what `qem add`, `qem supersede`, `qem share`
and a move print, and what the MCP server's tools return for the same writes (through the
real client), are the forms of one answer (qem_edit.writes.replies), built here again from
the memory as each write left it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from builders import store_path
from conftest import run_qem
from mcp import ClientSession
from test_mcp import ok, serve

from qem_edit.storage.store import Store
from qem_edit.writes import replies


def now(ws: Path, build: Callable[[Store], Any]) -> Any:
    """An answer built from the memory as it is now (the write just made)."""
    with Store.open(store_path(ws), create=False, write=False) as store:
        return build(store)


def written(ws: Path, short: str, **kw: Any) -> replies.NoteWritten:
    def build(store: Store) -> replies.NoteWritten:
        note = store.note(store.resolve(short))
        repeats = tuple(store.note(store.resolve(r)) for r in kw.pop("repeating", ()))
        old = kw.pop("superseding", None)
        return replies.NoteWritten(note, repeats, [], superseding=store.note(store.resolve(old)).shown if old else None,
                                   **kw)

    return now(ws, build)


def moved(ws: Path, short: str) -> replies.Moved:
    def build(store: Store) -> replies.Moved:
        note = store.note(store.resolve(short))
        return replies.Moved(note, store.events(note.id)[-1], [])

    return now(ws, build)


def said(result: Any) -> tuple[str, Any]:
    """An MCP result's text (its first line: notices follow it) and its structured content."""
    return result.content[0].text.split("\n")[0], result.structured_content


def cli(ws: Path, *args: str) -> str:
    done = run_qem(*args, "-w", str(ws), cwd=ws)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_and_the_mcp_server_show_one_answer_for_each_write(ws: Path) -> None:
    first = cli(ws, "add", "The lock is released before the café restarts", "--kind", "gotcha").strip()
    assert first == written(ws, first).text()
    private = cli(ws, "add", "Only this clone's note on the cache", "--kind", "finding", "--scope", "private").strip()
    assert private == written(ws, private).text()

    def mcp(script: Callable[[ClientSession], Any]) -> Any:
        return serve(ws, script)

    # add, a repeat of a note in force: the text and JSON the agent reads are the answer's agent forms
    async def add(s: ClientSession) -> Any:
        return await ok(s, "add", text="The lock is released before the café restarts", kind="gotcha")

    text, data = said(mcp(add))
    answer = written(ws, data["short"], repeating=[first])
    assert data["repeats"] and (text, data) == (answer.agent_text(), answer.agent_data())

    # the same repeat on the command line: its line, and its --json, are the answer's forms
    out = cli(ws, "add", "The lock is released before the café restarts", "--kind", "gotcha", "--json")
    short, repeats = json.loads(out)["short"], [r["short"] for r in json.loads(out)["repeats"]]
    assert sorted(repeats) == sorted([first, data["short"]])
    answer = written(ws, short, repeating=repeats)
    assert out == json.dumps(answer.data(), ensure_ascii=False) + "\n"

    # supersede, through each
    async def supersede(s: ClientSession) -> Any:
        return await ok(s, "supersede", id=first, text="The lock is released after the restart", reason="order")

    text, data = said(mcp(supersede))
    answer = written(ws, data["short"], superseding=first)
    assert "superseding" in text and (text, data) == (answer.agent_text(), answer.agent_data())
    out = cli(ws, "supersede", short, "The lock is held through the restart", "-m", "measured").strip()
    assert out == written(ws, out, superseding=short).text()

    # a move: the same line from both, and the note and its event as the agent's JSON
    async def flag(s: ClientSession) -> Any:
        return await ok(s, "flag_stale", id=data["short"], reason="v2 rewrote it")

    text, flagged = said(mcp(flag))
    answer = moved(ws, data["short"])
    assert (text, flagged) == (answer.agent_text(), answer.agent_data()) and "stale_flagged" in text
    out = cli(ws, "revoke", data["short"], "-m", "wrong after all")
    assert out == moved(ws, data["short"]).text() + "\n"

    # share: the private note it ends, named as it was shown before
    async def share(s: ClientSession) -> Any:
        return await ok(s, "share", id=private)

    text, shared = said(mcp(share))
    answer = written(ws, shared["short"], private={"id": shared["private"]["id"], "short": private})
    assert (text, shared) == (answer.agent_text(), answer.agent_data()) and "the team's" in text

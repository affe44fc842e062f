"""`qem mcp`, end to end: the real `mcp` client library spawns `qem mcp` over stdio, lists
its tools and calls each; errors come back as tool errors in the CLI's words with the
memory unchanged; two servers and a CLI writer on one memory lose nothing.  Each tool's
title and hints hold for what it does; the resources read what the CLI prints; the
prompts carry the memory's worklist and name tools the server serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import pytest
from builders import add, emit, store_path
from conftest import run_qem
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client  # the test extra installs it
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, Implementation
from test_cli import snapshot, verified
from test_git import team  # noqa: F401  (the fixture)
from test_incomplete_commit import incomplete

from qem_edit.base.vocabulary import MOVE_BY_VERB, Move
from qem_edit.shells import mcp_server
from qem_edit.storage.store import Store

SERVED = ["add", "supersede", "revoke", "flag_stale", "reinstate", "share", "show", "query", "status", "log", "context",
          "owed", "forget", "promote", "rule"]
PERSON = ["forget", "promote", "rule"]  # a person's acts: the client asks its person (elicitation)


@asynccontextmanager
async def session(ws: Path, client: str = "test-agent", *args: str) -> AsyncIterator[ClientSession]:
    """A client session with `qem mcp` spawned on the workspace, as a client's config does."""
    env = {"QEM_NOW": os.environ.get("QEM_NOW", "")} if os.environ.get("QEM_NOW") else {}
    params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(ws), *args],
                                   env=env, cwd=str(ws))
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write, client_info=Implementation(name=client, version="1")) as s:
                await s.initialize()
                yield s


def serve(ws: Path, script: Any, client: str = "test-agent", *args: str) -> Any:
    """Run `script(session)` against a fresh server; its result."""
    async def main() -> Any:
        async with session(ws, client, *args) as s:
            return await script(s)

    return anyio.run(main)


async def ok(s: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await s.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result


async def failed(s: ClientSession, tool: str, **arguments: Any) -> str:
    result = await s.call_tool(tool, arguments)
    assert result.is_error, result.content[0].text
    text = result.content[0].text
    assert "Traceback" not in text
    return text


def test_the_tools_are_listed_with_a_schema_and_a_one_line_description(ws: Path) -> None:
    async def script(s: ClientSession) -> Any:
        return (await s.list_tools()).tools

    tools = serve(ws, script)
    assert [t.name for t in tools] == SERVED
    for t in tools:
        assert t.description and "\n" not in t.description and len(t.description) < 200
        assert t.input_schema["type"] == "object" and t.input_schema["additionalProperties"] is False
        assert set(t.input_schema["required"]) <= set(t.input_schema["properties"])
    by_name = {t.name: t for t in tools}
    assert by_name["add"].input_schema["properties"]["kind"]["enum"][0] == "directive"
    assert by_name["revoke"].input_schema["required"] == ["id", "reason"]
    # a person's acts are served only as asked of the person (below); dispute and expire not at all;
    # provenance human is reachable by no argument
    assert not {"dispute", "expire"} & set(by_name) and {"forget", "promote", "rule"} <= set(by_name)
    assert not any("provenance" in t.input_schema["properties"] for t in tools)


def test_every_tool_writes_and_reads_as_the_cli_does(ws: Path) -> None:
    async def script(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        added = await ok(s, "add", text="Run tests inside .venv", kind="directive", priority="high")
        note = added.structured_content
        out["add"] = (added.content[0].text, note)
        out["gotcha"] = (await ok(s, "add", text="The lock is released before restart", kind="gotcha")).structured_content
        g = out["gotcha"]["short"]
        sup = await ok(s, "supersede", id=g, text="The lock is released after restart", reason="order was wrong")
        out["supersede"] = (sup.content[0].text, sup.structured_content)
        new = sup.structured_content["short"]
        out["flag_stale"] = (await ok(s, "flag_stale", id=new, reason="v2 rewrote it")).content[0].text
        out["reinstate"] = (await ok(s, "reinstate", id=new)).content[0].text
        out["revoke"] = (await ok(s, "revoke", id=new, reason="wrong after all")).content[0].text
        out["show"] = (await ok(s, "show", id=note["short"])).content[0].text
        out["status"] = (await ok(s, "status", id=g)).content[0].text
        out["log"] = (await ok(s, "log", id=new)).content[0].text
        out["query"] = await ok(s, "query", filters=["kind=gotcha"])
        out["events"] = (await ok(s, "query", filters=["type=revoked"], events=True)).content[0].text
        out["context"] = (await ok(s, "context", budget=500)).content[0].text
        return out

    out = serve(ws, script)
    text, note = out["add"]
    assert text.startswith(f"#{note['short']} created (directive · high · agent)")
    assert note["actor"] == "test-agent" and note["provenance"] == "agent"
    assert "created, superseding #" + out["gotcha"]["short"] in out["supersede"][0]
    new = out["supersede"][1]["short"]
    assert out["flag_stale"].startswith(f"#{new} stale_flagged (event ")
    assert out["revoke"].startswith(f"#{new} revoked (event ")
    # the reads answer exactly what the CLI answers
    for tool, argv in [("show", ["show", note["short"]]), ("status", ["status", out["gotcha"]["short"]]),
                       ("log", ["log", new])]:
        assert out[tool] == run_qem(*argv, cwd=ws).stdout.rstrip("\n")
    query = out["query"]
    assert query.content[0].text == run_qem("query", "kind=gotcha", cwd=ws).stdout.rstrip("\n")
    assert query.content[0].text.startswith("scope: ")
    assert query.structured_content["scope"]["complete"] is True and query.structured_content["count"] == 2
    assert out["events"].startswith("scope: ") and "revoked by test-agent (wrong after all)" in out["events"]
    assert out["context"] == run_qem("context", "--budget", "500", cwd=ws).stdout.rstrip("\n")
    # the same events the CLI writes, by the client's name
    events = json.loads(run_qem("log", "--json", cwd=ws).stdout)
    assert [e["type"] for e in events] == ["created", "created", "created", "superseded", "stale_flagged",
                                           "reinstated", "revoked"]
    assert {e["actor"] for e in events} == {"test-agent"}
    assert verified(ws) == []


def test_a_note_whose_text_is_missing_is_shown_as_the_cli_shows_it(team) -> None:  # noqa: F811
    """The tool names the commit that brought the note's event without its text, as `qem show` does."""
    _, short, commit = incomplete(team, "never bump the schema by hand", "MEMORY.md", ".qem/events")
    mate = team.clone("mate")
    cli = mate.qem("show", short).stdout

    async def script(s: ClientSession) -> str:
        return (await ok(s, "show", id=short)).content[0].text

    shown = serve(mate.path, script)
    assert commit in shown and shown == cli.rstrip("\n"), (shown, cli)


def test_the_actor_is_configurable(ws: Path) -> None:
    async def script(s: ClientSession) -> Any:
        return (await ok(s, "add", text="a finding", kind="finding")).structured_content["actor"]

    assert serve(ws, script, "some-client", "--actor", "session-0412") == "session-0412"


@pytest.fixture
def seeded(ws: Path) -> dict[str, str]:
    """A memory with an active, a revoked and a human note; their short ids."""
    with Store.open(store_path(ws), create=True) as s:
        made = {"active": add(s, "Release the lock first", "gotcha"), "revoked": add(s, "Use tabs", "directive"),
                "human": add(s, "Never push to main", "directive")}
        emit(s, made["revoked"], "revoked", "spaces now")
        emit(s, made["human"], "promoted", "I said this")
        return {name: s.note(i).shown for name, i in made.items()}


def test_the_reads_answer_as_structured_content_what_the_cli_answers_as_json(ws: Path, seeded: dict[str, str]) -> None:
    """One read for both shells: show (now and --at), status and log give the agent, as
    structured content, exactly what `--json` prints."""
    a = seeded["active"]
    assert run_qem("revoke", a, "-m", "later", cwd=ws, env={"QEM_NOW": "2026-08-01T00:00:00Z"}).returncode == 0
    reads = [("show", {"id": a}, ["show", a]), ("show", {"id": a, "at": "2026-07-28"}, ["show", a, "--at", "2026-07-28"]),
             ("status", {"id": a}, ["status", a]), ("log", {"id": a}, ["log", a])]

    async def script(s: ClientSession) -> list[Any]:
        return [(await ok(s, tool, **arguments)).structured_content for tool, arguments, _ in reads]

    answered = serve(ws, script)
    assert answered[0]["state"] == "revoked" and answered[1]["state"] == "active"
    for (tool, _, argv), data in zip(reads, answered):
        cli = json.loads(run_qem(*argv, "--json", cwd=ws).stdout)
        assert data == (cli if isinstance(cli, dict) else {"result": cli}), (tool, data, cli)


def test_bad_arguments_are_tool_errors_in_the_cli_words_and_change_nothing(ws: Path, seeded: dict[str, str]) -> None:
    before = snapshot(ws)
    a, r = seeded["active"], seeded["revoked"]
    # (tool, arguments, the CLI command that fails the same way, or None where only the schema can)
    cases: list[tuple[str, dict[str, Any], list[str] | None]] = [
        ("add", {"text": "x", "kind": "nope"}, ["add", "x", "--kind", "nope"]),
        ("add", {"text": "x", "kind": "task", "priority": "urgent"}, ["add", "x", "--kind", "task", "-p", "urgent"]),
        ("add", {"text": "  \n ", "kind": "task"}, ["add", "  \n ", "--kind", "task"]),
        ("add", {"text": "a\x00b", "kind": "task"}, None),
        ("revoke", {"id": "zzzz", "reason": "r"}, ["revoke", "zzzz", "-m", "r"]),
        ("revoke", {"id": r, "reason": "again"}, ["revoke", r, "-m", "again"]),
        ("revoke", {"id": a, "reason": "   "}, ["revoke", a, "-m", "   "]),
        ("flag_stale", {"id": r, "reason": "r"}, ["flag-stale", r, "-m", "r"]),
        ("reinstate", {"id": a}, ["reinstate", a]),
        ("supersede", {"id": r, "text": "new"}, ["supersede", r, "new"]),
        ("show", {"id": "#!"}, ["show", "#!"]),
        ("query", {"filters": ["colour=red"]}, ["query", "colour=red"]),
        ("query", {"filters": ["kind=task", "kind=gotcha"]}, ["query", "kind=task", "kind=gotcha"]),
        ("context", {"budget": -1}, ["context", "--budget", "-1"]),
        ("revoke", {"id": a}, None),
        ("add", {"text": "x", "kind": "task", "provenance": "human"}, None),
        ("add", {"text": 3, "kind": "task"}, None),
        ("query", {"filters": "kind=task"}, None),
        ("forget", {"id": a, "reason": "r"}, None),
        ("promote", {"id": a}, None),
    ]

    async def script(s: ClientSession) -> list[str]:
        return [await failed(s, tool, **arguments) for tool, arguments, _ in cases]

    for (tool, arguments, argv), text in zip(cases, serve(ws, script)):
        assert text.startswith("qem: error: "), (tool, arguments, text)
        if argv is not None:
            cli = run_qem(*argv, cwd=ws)
            assert cli.returncode == 2 and text == cli.stderr.rstrip("\n"), (tool, arguments, text, cli.stderr)
    assert snapshot(ws) == before


@pytest.mark.parametrize("failure, said", [
    (OSError(13, "Permission denied", "/srv/project/.qem"), "qem: error: /srv/project/.qem: Permission denied"),
    (OSError("the disk went away"), "qem: error: the disk went away"),
])
def test_a_file_qem_cannot_open_is_named_in_one_wording_by_both_shells(ws: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       failure: OSError, said: str) -> None:
    from qem_edit.shells import cli, mcp_server

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(Store, "open", fails)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["status", "k3f9", "-w", str(ws)])
    text, data, is_error = mcp_server.call(mcp_server.Memory(ws), "status", {"id": "k3f9"}, None)
    assert exit_.value.code == 2 and capsys.readouterr().err == said + "\n"
    assert is_error and data is None and text == said


def test_directives_are_out_of_an_agents_reach(ws: Path, seeded: dict[str, str]) -> None:
    """The server writes as an agent: a protected note (a directive, by default) cannot be
    taken out of force through it, with the words the command line gives an agent; a
    person's act still can, and the agent's other writes are marked as an agent's."""
    rule = seeded["human"]
    before = snapshot(ws)

    async def refused(s: ClientSession) -> list[str]:
        return [await failed(s, "revoke", id=rule, reason="not mine to keep"),
                await failed(s, "supersede", id=rule, text="Push to main when green")]

    texts = serve(ws, refused)
    assert snapshot(ws) == before
    cli = run_qem("revoke", rule, "-m", "not mine to keep", "--actor", "test-agent", cwd=ws,
                  env={"QEM_ACTOR_KIND": "agent"})
    assert cli.returncode == 2 and texts[0] == cli.stderr.rstrip("\n"), (texts, cli.stderr)
    assert "directive" in texts[1] and "qem edit" in texts[1], texts[1]

    async def allowed(s: ClientSession) -> None:
        await ok(s, "flag_stale", id=rule, reason="check it still holds")
        await ok(s, "revoke", id=seeded["active"], reason="measured again")

    serve(ws, allowed)
    with Store.open(store_path(ws)) as s:
        writers = {(e.type, e.data.get("writer")) for e in s.events() if e.type in ("stale_flagged", "revoked")
                   and e.actor == "test-agent"}
    assert writers == {("stale_flagged", "agent"), ("revoked", "agent")}
    assert run_qem("revoke", rule, "-m", "the user retired it", cwd=ws).returncode == 0  # a person may


def test_schema_errors_name_the_argument(ws: Path, seeded: dict[str, str]) -> None:
    async def script(s: ClientSession) -> list[str]:
        return [await failed(s, "revoke", id=seeded["active"]),
                await failed(s, "add", text="x", kind="task", provenance="human"),
                await failed(s, "add", text=3, kind="task"),
                await failed(s, "dispute", id=seeded["active"])]

    missing, unknown, typed, tool = serve(ws, script)
    assert missing == "qem: error: revoke: argument 'reason' is required"
    assert "unknown argument 'provenance'" in unknown
    assert "argument 'text' must be a string, not 3" in typed
    assert "unknown tool 'dispute'" in tool


def test_user_stated_only_for_a_quote_found_verbatim(ws: Path, seeded: dict[str, str]) -> None:
    before = snapshot(ws)
    words = "Never commit generated files"

    async def refusals(s: ClientSession) -> list[str]:
        return [await failed(s, "add", text=words, kind="directive", user_quote="Never commit generated code"),
                await failed(s, "add", text=words + ". " + "x" * 40, kind="directive", user_quote=words),
                await failed(s, "add", text=words, kind="directive", user_quote="  ")]

    not_verbatim, too_little, empty = serve(ws, refusals)
    assert "user_quote is not in the text verbatim" in not_verbatim
    assert "less than half" in too_little and "user_quote is empty" in empty
    assert snapshot(ws) == before

    async def script(s: ClientSession) -> list[Any]:
        quoted = await ok(s, "add", text=words + ".", kind="directive", user_quote=words)
        plain = await ok(s, "add", text="The build takes 4 minutes", kind="finding")
        # an agent's successor of a human note is the agent's: human is never reached here
        # (a gotcha: a directive is out of an agent's reach altogether)
        succ = await ok(s, "supersede", id=seeded["active"], text="Release the lock first, then the pool")
        return [quoted.structured_content, plain.structured_content, succ.structured_content]

    assert run_qem("promote", seeded["active"], cwd=ws).returncode == 0  # a person endorses it
    quoted, plain, successor = serve(ws, script)
    assert quoted["provenance"] == "user-stated" and plain["provenance"] == "agent"
    assert successor["provenance"] == "agent"
    assert json.loads(run_qem("query", "provenance=human", "--json", cwd=ws).stdout)["count"] == 2


def test_writes_keep_memory_md_current_as_the_cli_does(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    assert run_qem("add", "first", "--kind", "task", cwd=ws).returncode == 0
    assert run_qem("export", cwd=ws).returncode == 0

    async def script(s: ClientSession) -> Any:
        return await ok(s, "add", text="Served through MCP", kind="finding")

    serve(ws, script)
    assert "Served through MCP" in (ws / "MEMORY.md").read_text("utf-8")
    assert run_qem("export", "--check", cwd=ws).returncode == 0


def test_two_servers_and_a_cli_writer_at_once_lose_nothing(ws: Path) -> None:
    assert run_qem("init", cwd=ws).returncode == 0
    per_writer = 12

    async def writer(client: str) -> list[str]:
        async with session(ws, client) as s:
            return [(await ok(s, "add", text=f"{client} note {i}", kind="finding")).structured_content["id"]
                    for i in range(per_writer)]

    async def main() -> tuple[list[str], list[str]]:
        cli = await anyio.open_process(
            [sys.executable, "-c", "import subprocess, sys\nfor i in range(%d):\n"
             "    subprocess.run([sys.executable, '-m', 'qem_edit', 'add', f'cli note {i}', '--kind', 'task',"
             " '--actor', 'cli'], check=True, capture_output=True)" % per_writer], cwd=str(ws))
        results: dict[str, list[str]] = {}

        async def run(client: str) -> None:
            results[client] = await writer(client)

        async with anyio.create_task_group() as group:
            group.start_soon(run, "agent-a")
            group.start_soon(run, "agent-b")
        assert await cli.wait() == 0
        return results["agent-a"], results["agent-b"]

    a, b = anyio.run(main)
    assert len(set(a) | set(b)) == 2 * per_writer
    with Store.open(store_path(ws)) as s:
        notes = s.notes()
        by_actor = {actor: sum(1 for n in notes if n.actor == actor) for actor in ("agent-a", "agent-b", "cli")}
    assert by_actor == {"agent-a": per_writer, "agent-b": per_writer, "cli": per_writer}
    assert {n.id for n in notes} >= set(a) | set(b)
    assert verified(ws) == []


def test_without_the_mcp_package_it_names_the_install_command(ws: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'mcp'\")\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    done = run_qem("mcp", cwd=ws, env=env, input="")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'qem-edit[mcp]'" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


# -- what the server offers a client: titles and hints, resources, prompts ----------------------

READS = ["show", "query", "status", "log", "context", "owed"]
# what each tool is, as a client's user is told: (read-only, destructive, idempotent)
HINTS = {"add": (False, False, False), "supersede": (False, True, True), "revoke": (False, True, True),
         "flag_stale": (False, False, True), "reinstate": (False, False, True), "share": (False, True, True),
         **{name: (True, False, True) for name in READS},
         **{name: (False, MOVE_BY_VERB[name].out_of_force, MOVE_BY_VERB[name].idempotent) for name in PERSON}}


def move_of(tool: str) -> Move:
    """The move a write tool makes (add: a creation; share: a private note's supersession)."""
    return MOVE_BY_VERB[{"add": "create", "share": "supersede"}.get(tool, tool)]


async def listed_tools(s: ClientSession) -> Any:
    return (await s.list_tools()).tools


def test_every_tool_has_a_title_and_hints_that_model_moves_gives_a_write(ws: Path) -> None:
    tools = serve(ws, listed_tools)
    assert [t.name for t in tools] == SERVED
    for t in tools:
        hints = t.annotations
        assert t.title and "\n" not in t.title and len(t.title) <= 40 and hints.title == t.title, t
        assert hints.open_world_hint is False, t.name
        said = (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint)
        if t.name not in READS:
            move = move_of(t.name)
            assert said == (False, move.out_of_force, move.idempotent), (t.name, said)
        assert said == HINTS[t.name], (t.name, said)
    assert len({t.title for t in tools}) == len(tools)


def test_the_hints_hold_for_what_each_tool_does(ws: Path, seeded: dict[str, str]) -> None:
    """A read changes nothing; a tool hinted idempotent changes nothing when the same call
    is made again, and add does; a destructive one takes its note out of force, the others
    leave it in."""
    a = seeded["active"]

    async def script(s: ClientSession) -> dict[str, Any]:
        before = snapshot(ws)
        for tool, arguments in [("show", {"id": a}), ("query", {"filters": ["kind=gotcha"]}), ("status", {"id": a}),
                                ("log", {"id": a}), ("context", {}), ("owed", {"late": True})]:
            await ok(s, tool, **arguments)
        assert snapshot(ws) == before
        made = [(await ok(s, "add", text=f"Gotcha {i}", kind="gotcha")).structured_content["short"] for i in range(3)]
        mine = (await ok(s, "add", text="Gotcha mine", kind="gotcha", scope="private")).structured_content["short"]
        again: dict[str, bool] = {}
        states: dict[str, str] = {}
        for tool, arguments in [("add", {"text": "Gotcha 0", "kind": "gotcha"}),
                                ("flag_stale", {"id": made[0], "reason": "check it"}),
                                ("reinstate", {"id": made[0], "reason": "it holds"}),
                                ("revoke", {"id": made[1], "reason": "wrong"}),
                                ("supersede", {"id": made[2], "text": "Gotcha two, corrected"}),
                                ("share", {"id": mine})]:
            await ok(s, tool, **arguments)
            once = snapshot(ws)
            await s.call_tool(tool, arguments)
            again[tool] = snapshot(ws) == once
            if "id" in arguments:
                states[tool] = (await ok(s, "show", id=arguments["id"])).structured_content["state"]
        return {"again": again, "states": states}

    out = serve(ws, script)
    assert out["again"] == {tool: HINTS[tool][2] for tool in out["again"]}, out["again"]
    in_force = {tool: state in ("active", "stale") for tool, state in out["states"].items()}
    assert in_force == {tool: not HINTS[tool][1] for tool in in_force}, out["states"]


def test_the_resources_read_what_the_cli_prints(ws: Path, seeded: dict[str, str]) -> None:
    a = seeded["active"]
    full = json.loads(run_qem("show", a, "--json", cwd=ws).stdout)["id"]
    uris = ["qem://context", "qem://memory.md", f"qem://note/{a}", f"qem://note/{full}"]

    async def script(s: ClientSession) -> Any:
        resources = (await s.list_resources()).resources
        templates = (await s.list_resource_templates()).resource_templates
        return resources, templates, [(await s.read_resource(uri)).contents for uri in uris]

    resources, templates, read = serve(ws, script)
    assert [(r.uri, r.mime_type) for r in resources] == [("qem://context", "text/markdown"),
                                                          ("qem://memory.md", "text/markdown")]
    assert [(t.uri_template, t.mime_type) for t in templates] == [("qem://note/{id}", "text/plain")]
    assert all(r.name and r.title and r.description for r in [*resources, *templates])
    mime = {r.uri: r.mime_type for r in resources}
    for uri, contents in zip(uris, read):
        assert len(contents) == 1 and contents[0].uri == uri
        assert contents[0].mime_type == mime.get(uri, "text/plain")
    texts = [c[0].text for c in read]
    assert texts[0] == run_qem("context", cwd=ws).stdout.rstrip("\n")
    assert texts[1] == run_qem("export", "--stdout", cwd=ws).stdout and "Release the lock first" in texts[1]
    assert texts[2] == texts[3] == run_qem("show", a, cwd=ws).stdout.rstrip("\n")


def test_a_note_the_memory_lacks_is_a_resource_error_naming_it(ws: Path, seeded: dict[str, str]) -> None:
    """Not found (-32002, as protocol revision 2025-11-25 has it), in the CLI's words, the
    URI in its data; the server goes on."""
    uris = ["qem://note/zzzz", "qem://note/%23!", "qem://note/", "qem://note/a/b", "qem://nope"]

    async def script(s: ClientSession) -> Any:
        found = []
        for uri in uris:
            with pytest.raises(MCPError) as refused:
                await s.read_resource(uri)
            found.append(refused.value)
        return found, (await s.read_resource("qem://context")).contents[0].text

    found, after = serve(ws, script)
    for uri, error in zip(uris, found):
        assert error.code == -32002 and error.data == {"uri": uri}, (uri, error)
        assert error.message.startswith("qem: error: ") and "Traceback" not in error.message
    assert found[0].message == run_qem("show", "zzzz", cwd=ws).stderr.rstrip("\n")
    assert found[1].message == run_qem("show", "#!", cwd=ws).stderr.rstrip("\n")
    for error in found[2:]:
        assert "no resource 'qem://" in error.message and "qem://note/{id}" in error.message, error.message
    assert after.startswith("# Memory (qem context)")
    assert mcp_server.not_found_code("2025-11-25") == mcp_server.not_found_code("2024-11-05") == -32002
    assert mcp_server.not_found_code("2026-07-28") == INVALID_PARAMS  # SEP-2164


def test_an_empty_memory_is_served_and_a_missing_one_named(ws: Path) -> None:
    async def missing(s: ClientSession) -> Any:
        listed = ([t.name for t in (await s.list_tools()).tools], [r.uri for r in (await s.list_resources()).resources],
                  [p.name for p in (await s.list_prompts()).prompts])
        with pytest.raises(MCPError) as read:
            await s.read_resource("qem://context")
        with pytest.raises(MCPError) as prompt:
            await s.get_prompt("review-memory")
        return listed, read.value, prompt.value

    listed, read, prompt = serve(ws, missing)
    assert listed == (SERVED, ["qem://context", "qem://memory.md"], ["review-memory", "record-memory"])
    said = run_qem("context", cwd=ws).stderr.rstrip("\n")
    assert "no qem memory at" in said and read.message == said and read.code == -32002
    assert prompt.message == said and prompt.code == INTERNAL_ERROR
    assert not (ws / ".qem").exists()  # reading made no memory

    assert run_qem("init", cwd=ws).returncode == 0

    async def empty(s: ClientSession) -> list[str]:
        texts = [(await s.read_resource(uri)).contents[0].text for uri in ("qem://context", "qem://memory.md")]
        return texts + [(await s.get_prompt("review-memory")).messages[0].content.text]

    context, memory_md, review = serve(ws, empty)
    assert context == run_qem("context", cwd=ws).stdout.rstrip("\n") and "## Directives (0)" in context
    assert memory_md == run_qem("export", "--stdout", cwd=ws).stdout and "## Gotchas" in memory_md
    assert "0 notes match state=stale" in review and "no anchor drifted: 0 anchors checked" in review
    assert review.rstrip().endswith("(none)")


def test_the_review_prompt_lists_what_needs_a_look_and_names_served_tools(ws: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "lock.py").write_text("LOCK = 1\n")
    monkeypatch.setenv("QEM_NOW", "2026-08-01T00:00:00Z")

    def added(*argv: str) -> str:
        done = run_qem("add", *argv, "--json", cwd=ws)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["short"]

    drifted = added("The lock is taken twice", "--kind", "gotcha", "--anchor", "lock.py")
    stale = added("The cache holds a day", "--kind", "finding")
    due = added("Staging is frozen", "--kind", "operational", "--expires", "2026-08-02")
    calm = added("Builds take four minutes", "--kind", "finding")
    assert run_qem("flag-stale", stale, "-m", "v2 rewrote it", cwd=ws).returncode == 0
    (ws / "lock.py").write_text("LOCK = 2\n")
    monkeypatch.setenv("QEM_NOW", "2026-08-03T00:00:00Z")

    async def script(s: ClientSession) -> Any:
        prompts = (await s.list_prompts()).prompts
        got = {p.name: await s.get_prompt(p.name) for p in prompts}
        refused = []
        for name, arguments in [("nope", None), ("review-memory", {"path": "lock.py"})]:
            with pytest.raises(MCPError) as error:
                await s.get_prompt(name, arguments)
            refused.append(error.value)
        return prompts, got, refused, await listed_tools(s)

    prompts, got, refused, tools = serve(ws, script)
    assert [(p.name, p.arguments) for p in prompts] == [("review-memory", []), ("record-memory", [])]
    assert all(p.title and p.description for p in prompts)
    for name, result in got.items():
        assert result.description == next(p.description for p in prompts if p.name == name)
        assert [m.role for m in result.messages] == ["user"] and result.messages[0].content.type == "text"
    review, record = (got[name].messages[0].content.text for name in ("review-memory", "record-memory"))
    stale_part, drift_part, due_part = review.split("\n## ")[1:]
    assert f"#{stale}\tfinding\tstale" in stale_part and calm not in review
    assert f"#{drifted} gotcha" in drift_part and "anchor lock.py changed" in drift_part
    assert f"#{due}\toperational" in due_part and drifted not in due_part
    served = {t.name: t for t in tools}
    for tool in ("show", "log", "reinstate", "flag_stale", "supersede", "revoke", "query"):
        assert tool in review and tool in served, tool
    for tool in ("add", "context", "supersede", "revoke"):
        assert tool in record and tool in served, tool
    for argument in ("user_quote", "anchors"):
        assert argument in record and argument in served["add"].input_schema["properties"], argument
    assert [e.code for e in refused] == [INVALID_PARAMS, INVALID_PARAMS]
    assert "unknown prompt 'nope'" in refused[0].message and "takes no arguments" in refused[1].message


# -- the current revision: output schemas, results as JSON text, links to notes, completion --


def test_every_tool_declares_an_output_schema_its_results_meet_and_repeats_them_as_json_text(
        ws: Path, seeded: dict[str, str]) -> None:
    import jsonschema

    a = seeded["active"]
    calls = [("add", {"text": "Pin the SDK below 3", "kind": "decision"}), ("show", {"id": a}), ("status", {"id": a}),
             ("log", {"id": a}), ("context", {}), ("owed", {}), ("query", {"filters": ["kind=gotcha"]}),
             ("query", {"filters": ["type=created"], "events": True}), ("flag_stale", {"id": a, "reason": "moved"}),
             ("reinstate", {"id": a}), ("revoke", {"id": a, "reason": "wrong"})]

    async def script(s: ClientSession) -> Any:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        added = await ok(s, *calls[0][:1], **calls[0][1])
        superseded = await ok(s, "supersede", id=added.structured_content["id"], text="Pin the SDK below 4")
        private = await ok(s, "add", text="My own estimate: two days", kind="finding", scope="private")
        shared = await ok(s, "share", id=private.structured_content["id"])
        return tools, [(name, added if name == "add" else await ok(s, name, **arguments)) for name, arguments in calls] \
            + [("supersede", superseded), ("share", shared)]

    tools, results = serve(ws, script)
    assert set(tools) == set(SERVED)
    for tool in tools.values():
        assert tool.output_schema["type"] == "object", tool.name
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    for name, result in results:
        # the client already checked structured_content against the schema; checked here again, independently
        jsonschema.validate(result.structured_content, tools[name].output_schema)
        assert json.loads(result.content[1].text) == result.structured_content, name
    assert {name for name, _ in results} == set(SERVED) - set(PERSON)  # (theirs: below, with a person asked)


def test_a_query_links_each_note_it_found_and_the_link_reads_the_note(ws: Path, seeded: dict[str, str]) -> None:
    from mcp.types import ResourceLink

    async def script(s: ClientSession) -> Any:
        found = await ok(s, "query", filters=["kind=directive"])
        links = [c for c in found.content if isinstance(c, ResourceLink)]
        return found.structured_content, links, [await s.read_resource(str(link.uri)) for link in links]

    data, links, reads = serve(ws, script)
    assert [str(link.uri) for link in links] == [f"qem://note/{n['id']}" for n in data["notes"]] and len(links) == 2
    assert [link.name for link in links] == [f"note #{n['short']}" for n in data["notes"]]
    for note, read in zip(data["notes"], reads):
        assert read.contents[0].text.rstrip("\n") == run_qem("show", note["short"], cwd=ws).stdout.rstrip("\n")


def test_the_current_revision_is_served_too(ws: Path, seeded: dict[str, str]) -> None:
    """The SDK's newest revision (2026-07-28, reached by `server/discover`) gets the same
    tools, output schemas and structured results as the handshake's 2025-11-25 (its change
    notifications and its way of asking a person: tests/test_mcp_current.py)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(ws)], cwd=str(ws))

    async def main() -> Any:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as s:
                    found = await s.discover()
                    tools = (await s.list_tools()).tools
                    status = await s.call_tool("status", {"id": seeded["active"]})
                    return found.supported_versions, s.protocol_version, tools, status

    versions, negotiated, tools, status = anyio.run(main)
    assert negotiated == "2026-07-28" and "2026-07-28" in versions
    assert all(t.output_schema for t in tools) and [t.name for t in tools] == SERVED
    assert not status.is_error and status.structured_content["current"] == "yes"
    assert json.loads(status.content[1].text) == status.structured_content


def test_note_ids_complete_as_a_person_types_them(ws: Path) -> None:
    from mcp.types import PromptReference, ResourceTemplateReference

    with Store.open(store_path(ws), create=True) as s:
        made = [add(s, f"note {i}", "finding") for i in range(130)]
        shorts = {i: s.note(i).shown for i in made}
    template = ResourceTemplateReference(uri="qem://note/{id}")

    async def script(s: ClientSession) -> Any:
        init = s.initialize_result
        return (init.capabilities.completions, await s.complete(template, {"name": "id", "value": ""}),
                await s.complete(template, {"name": "id", "value": "#" + made[7][:2].upper()}),
                await s.complete(template, {"name": "id", "value": "zzzz"}),
                await s.complete(PromptReference(name="review-memory"), {"name": "id", "value": ""}))

    capability, everything, some, none, prompt = serve(ws, script)
    assert capability is not None
    # the first 100 (the protocol's most), the count of all, and that there are more
    assert everything.completion.values == [shorts[i] for i in sorted(made)[:100]]
    assert everything.completion.total == 130 and everything.completion.has_more
    expected = [shorts[i] for i in sorted(made) if i.startswith(made[7][:2])]
    assert some.completion.values == expected and shorts[made[7]] in expected
    assert not some.completion.has_more
    assert none.completion.values == [] and none.completion.total == 0
    assert prompt.completion.values == []
    # each value completes to a URI the server reads
    assert run_qem("show", expected[0], cwd=ws).returncode == 0


# -- a person's acts, asked of the person through the client --------------------------------


def person_serve(ws: Path, script: Any, answer: Any = None) -> Any:
    """`script(session)` against a server whose client asks its person through `answer`
    (an elicitation callback; None: a client that cannot ask), the person being `the-person`."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(ws)],
                                   env={"QEM_ACTOR": "the-person"}, cwd=str(ws))

    async def main() -> Any:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write, elicitation_callback=answer,
                                         client_info=Implementation(name="test-agent", version="1")) as s:
                    await s.initialize()
                    return await script(s)

    return anyio.run(main)


def test_a_persons_act_is_asked_of_the_person_and_made_as_theirs(ws: Path, seeded: dict[str, str]) -> None:
    from mcp.types import ElicitResult

    a = seeded["active"]
    asked: list[Any] = []

    async def person(context: Any, params: Any) -> Any:
        asked.append(params)
        return ElicitResult(action="accept", content={"confirm": True, "reason": "it leaked a hostname"})

    async def script(s: ClientSession) -> Any:
        promoted = await s.call_tool("promote", {"id": a})
        shown = await s.call_tool("show", {"id": a})
        return promoted, shown, await s.call_tool("forget", {"id": a}), await s.call_tool("promote", {"id": a})

    promoted, shown, forgot, again = person_serve(ws, script, person)
    assert not promoted.is_error and shown.structured_content["provenance"] == "human"
    assert not forgot.is_error, forgot.content[0].text
    assert f"note #{a} (gotcha): Release the lock first" in asked[0].message and "qem promote ID -m REASON" in asked[0].message
    assert "qem forget ID -m REASON" in asked[1].message
    assert forgot.structured_content["actor"] == "the-person" and forgot.structured_content["reason"] == "it leaked a hostname"
    log = json.loads(run_qem("log", a, "--json", cwd=ws).stdout)
    assert [(e["type"], e["actor"]) for e in log[-2:]] == [("promoted", "the-person"), ("forgotten", "the-person")]
    assert log[-1]["reason"] == "it leaked a hostname"
    assert "Release the lock first" not in run_qem("show", a, cwd=ws).stdout
    # a forgotten note is promoted by nobody: the act's own refusal, in the CLI's words
    assert again.is_error and again.content[0].text.startswith("qem: error:")


def test_a_person_who_declines_or_a_client_that_cannot_ask_changes_nothing(ws: Path, seeded: dict[str, str]) -> None:
    from mcp.types import ElicitResult

    a = seeded["active"]

    async def declines(context: Any, params: Any) -> Any:
        return ElicitResult(action="decline")

    async def script(s: ClientSession) -> Any:
        return [await s.call_tool(name, arguments) for name, arguments in
                [("forget", {"id": a}), ("promote", {"id": a}), ("rule", {"id": a, "keep": a})]]

    before = snapshot(ws)
    declined = person_serve(ws, script, declines)
    assert all(r.is_error and "the person did not confirm (decline); nothing was written" in r.content[0].text
               for r in declined)
    cannot = person_serve(ws, script, None)
    for name, result in zip(PERSON, cannot):
        assert result.is_error
        assert f"{name} is a person's act, and this client cannot ask its person" in result.content[0].text
        assert f"qem {name} ID" in result.content[0].text
    assert snapshot(ws) == before


# resources/subscribe is the handshake revision's (2025-11-25), which the SDK warns is gone from 2026-07-28
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
def test_a_subscribed_resource_is_said_updated_when_the_log_moves(ws: Path, seeded: dict[str, str]) -> None:
    """Another process writes, then the client unsubscribes one resource: each move of the
    log is said for the whole memory's resource, a note's only when the move is on that note,
    nothing once unsubscribed; a resource not there is refused."""
    import mcp.types as types

    a = seeded["active"]
    heard: list[str] = []

    async def listen(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async def wait_for(count: int) -> None:
        with anyio.fail_after(20):
            while len(heard) < count:
                await anyio.sleep(0.1)

    params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(ws)], cwd=str(ws))

    async def main() -> Any:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write, message_handler=listen) as s:
                    init = await s.initialize()
                    await s.subscribe_resource("qem://memory.md")
                    await s.subscribe_resource(f"qem://note/{a}")
                    try:
                        await s.subscribe_resource("qem://nothing")
                        refused = None
                    except MCPError as error:
                        refused = error
                    await anyio.sleep(1.5)
                    quiet_before = list(heard)  # nothing moved yet: nothing said
                    assert (await anyio.to_thread.run_sync(lambda: run_qem("add", "-k", "task", "ship it", cwd=ws))).returncode == 0
                    await wait_for(1)
                    await anyio.sleep(2.5)
                    first = list(heard)
                    assert (await anyio.to_thread.run_sync(lambda: run_qem("flag-stale", a, "-m", "check", cwd=ws))).returncode == 0
                    await wait_for(3)
                    await anyio.sleep(2.5)
                    on_note = sorted(heard[len(first):])
                    await s.unsubscribe_resource(f"qem://note/{a}")
                    assert (await anyio.to_thread.run_sync(lambda: run_qem("revoke", a, "-m", "moved", cwd=ws))).returncode == 0
                    await wait_for(4)
                    await anyio.sleep(2.5)
                    return init.capabilities.resources.subscribe, refused, quiet_before, first, on_note, heard[3:]

    subscribe, refused, quiet_before, first, on_note, second = anyio.run(main)
    assert subscribe is True
    assert refused is not None and refused.error.code == INVALID_PARAMS and "no resource qem://nothing" in refused.error.message
    assert quiet_before == []
    assert first == ["qem://memory.md"]  # another note was added: not this note's move
    assert on_note == sorted(["qem://memory.md", f"qem://note/{a}"])
    assert second == ["qem://memory.md"]

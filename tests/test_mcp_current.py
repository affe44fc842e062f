"""`qem mcp` at the SDK's newest revision (2026-07-28, reached by `server/discover`), with
the SDK's own high-level client (mcp.Client) on a real `qem mcp` process: change
notifications on subscriptions/listen streams (a write by another process, a pull from
another clone; a note's resource told only of its own note's events), and a person's acts
asked of the person through the call's result (input required)."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import pytest
from conftest import run_qem
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import INVALID_PARAMS, ElicitResult, Implementation, InputRequiredResult
from test_cli import snapshot
from test_git import team  # noqa: F401  (the fixture)
from test_mcp import PERSON, seeded  # noqa: F401  (the fixture)

QUIET = 2.5  # seconds past two looks of the server's watch (one a second): long enough for a notice that is not coming


@asynccontextmanager
async def client(ws: Path, person: Any = None, env: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """The SDK's client on `qem mcp -w ws`, at the revision it negotiates by itself; `person`
    answers the questions put to the person (None: a client that cannot ask)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "qem_edit", "mcp", "-w", str(ws)],
                                   cwd=str(ws), env={"QEM_ACTOR": "the-person", **(env or {})})
    async with Client(params, elicitation_callback=person,
                      client_info=Implementation(name="test-agent", version="1")) as c:
        assert c.session.protocol_version == "2026-07-28"
        yield c


class Heard:
    """What one listen stream was told, URI by URI, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def follow(self, subscription: Any) -> None:
        async for event in subscription:
            self.uris.append(event.uri)

    async def until(self, *uris: str) -> list[str]:
        """Wait until each of `uris` was heard, then a while longer for anything else; all heard since, cleared."""
        with anyio.fail_after(20):
            while not set(uris) <= set(self.uris):
                await anyio.sleep(0.1)
        await anyio.sleep(QUIET)
        heard, self.uris = sorted(set(self.uris)), []
        return heard


async def elsewhere(*args: str, cwd: Path) -> None:
    """`qem ARGS` run by another process."""
    done = await anyio.to_thread.run_sync(lambda: run_qem(*args, cwd=cwd))
    assert done.returncode == 0, done.stderr


def test_listen_streams_are_told_of_their_own_resources_only(ws: Path, seeded: dict[str, str]) -> None:
    """Two streams, one on the whole memory and a note, one on another note: another
    process's writes reach each stream for what it named and nothing else; a URI that names
    no resource is left out of the acknowledgement."""
    a, h = seeded["active"], seeded["human"]
    one, two = Heard(), Heard()

    async def main() -> Any:
        async with client(ws) as c, anyio.create_task_group() as tasks:
            async with c.listen(resource_subscriptions=["qem://memory.md", f"qem://note/{a}", "qem://nothing"]) as s1, \
                    c.listen(resource_subscriptions=[f"qem://note/{h}"]) as s2:
                tasks.start_soon(one.follow, s1)
                tasks.start_soon(two.follow, s2)
                await anyio.sleep(QUIET)
                quiet = (list(one.uris), list(two.uris))  # nothing moved yet: nothing said
                await elsewhere("add", "-k", "task", "ship it", cwd=ws)
                added = (await one.until("qem://memory.md"), list(two.uris))
                await elsewhere("flag-stale", a, "-m", "check it", cwd=ws)
                flagged = (await one.until("qem://memory.md", f"qem://note/{a}"), list(two.uris))
                await elsewhere("supersede", h, "Never push to main; open a pull request", cwd=ws)
                superseded = (await one.until("qem://memory.md"), await two.until(f"qem://note/{h}"))
                honored = (s1.honored.resource_subscriptions, s2.honored.resource_subscriptions)
            resources = c.session.server_capabilities.resources
            tasks.cancel_scope.cancel()
        return resources, quiet, added, flagged, superseded, honored

    resources, quiet, added, flagged, superseded, honored = anyio.run(main)
    assert resources.subscribe is True  # (at this revision: the server serves subscriptions/listen)
    assert honored == (["qem://memory.md", f"qem://note/{a}"], [f"qem://note/{h}"])
    assert quiet == ([], [])
    assert added == (["qem://memory.md"], [])  # a new note: the whole memory moved, neither watched note
    assert flagged == (sorted(["qem://memory.md", f"qem://note/{a}"]), [])
    assert superseded == (["qem://memory.md"], [f"qem://note/{h}"])  # (its successor's event is on it: superseded)


def test_a_pull_from_another_clone_is_told_per_note(team) -> None:  # noqa: F811
    """A clone serves its memory; another clone changes one note and pushes; the first
    pulls: the stream on that note and on the whole memory hears of it, the stream on a
    note the pull did not touch does not."""
    founder = team.founded("the build needs python 3.11", "ci runs on two cores")
    mate = team.clone("mate")
    moved, kept = founder.texts_short("the build needs python 3.11"), founder.texts_short("ci runs on two cores")
    on_moved, on_kept = Heard(), Heard()

    async def main() -> Any:
        async with client(mate.path) as c, anyio.create_task_group() as tasks:
            async with c.listen(resource_subscriptions=["qem://context", f"qem://note/{moved}"]) as s1, \
                    c.listen(resource_subscriptions=[f"qem://note/{kept}"]) as s2:
                tasks.start_soon(on_moved.follow, s1)
                tasks.start_soon(on_kept.follow, s2)
                await elsewhere("revoke", moved, "-m", "3.12 now", cwd=founder.path)
                await anyio.to_thread.run_sync(lambda: founder.publish("revoke"))
                await anyio.sleep(QUIET)
                before_pull = (list(on_moved.uris), list(on_kept.uris))  # pushed, not yet pulled: nothing here moved
                await anyio.to_thread.run_sync(lambda: mate.git("pull", "-q", "--ff-only"))
                heard = (await on_moved.until("qem://context", f"qem://note/{moved}"), list(on_kept.uris))
                read = await c.read_resource(f"qem://note/{moved}")
            tasks.cancel_scope.cancel()
        return before_pull, heard, read

    before_pull, heard, read = anyio.run(main)
    assert before_pull == ([], [])
    assert heard == (sorted(["qem://context", f"qem://note/{moved}"]), [])
    assert "revoked" in read.contents[0].text


# -- a person's acts, asked through the call's result ---------------------------------------


def test_a_persons_act_is_asked_through_the_result_and_made_as_theirs(ws: Path, seeded: dict[str, str]) -> None:
    a = seeded["active"]
    asked: list[Any] = []

    async def person(context: Any, params: Any) -> Any:
        asked.append(params)
        return ElicitResult(action="accept", content={"confirm": True, "reason": "it leaked a hostname"})

    async def main() -> Any:
        async with client(ws, person) as c:
            promoted = await c.call_tool("promote", {"id": a})
            return promoted, await c.call_tool("show", {"id": a}), await c.call_tool("forget", {"id": a})

    promoted, shown, forgot = anyio.run(main)
    assert not promoted.is_error, promoted.content[0].text
    assert shown.structured_content["provenance"] == "human"
    assert not forgot.is_error, forgot.content[0].text
    assert [p.mode for p in asked] == ["form", "form"]
    assert f"note #{a} (gotcha): Release the lock first" in asked[0].message
    assert "qem promote ID -m REASON" in asked[0].message and "qem forget ID -m REASON" in asked[1].message
    assert forgot.structured_content["actor"] == "the-person"
    assert json.loads(forgot.content[1].text) == forgot.structured_content
    log = json.loads(run_qem("log", a, "--json", cwd=ws).stdout)
    assert [(e["type"], e["actor"], e["reason"]) for e in log[-2:]] == [
        ("promoted", "the-person", "it leaked a hostname"), ("forgotten", "the-person", "it leaked a hostname")]
    assert "Release the lock first" not in run_qem("show", a, cwd=ws).stdout


def test_a_decline_or_a_client_that_cannot_ask_writes_nothing(ws: Path, seeded: dict[str, str]) -> None:
    a = seeded["active"]
    calls = [("forget", {"id": a}), ("promote", {"id": a}), ("rule", {"id": a, "keep": a})]

    async def declines(context: Any, params: Any) -> Any:
        return ElicitResult(action="decline")

    async def confirms_without_reason(context: Any, params: Any) -> Any:
        return ElicitResult(action="accept", content={"confirm": True, "reason": "  "})

    async def run(person: Any) -> list[Any]:
        async with client(ws, person) as c:
            return [await c.call_tool(name, arguments) for name, arguments in calls]

    before = snapshot(ws)
    declined = anyio.run(run, declines)
    unreasoned = anyio.run(run, confirms_without_reason)
    cannot = anyio.run(run, None)
    assert snapshot(ws) == before
    assert all(r.is_error and "the person did not confirm (decline); nothing was written" in r.content[0].text
               for r in declined)
    assert all(r.is_error and "confirmed without a reason" in r.content[0].text for r in unreasoned)
    for name, result in zip(PERSON, cannot):
        assert result.is_error
        assert f"{name} is a person's act, and this client cannot ask its person" in result.content[0].text
        assert f"qem {name} ID" in result.content[0].text


def test_an_answer_the_server_did_not_ask_for_is_not_taken(ws: Path, seeded: dict[str, str]) -> None:
    """The agent's client sends a confirmation with its first call (no state of the
    server's beside it), or with a state it made up or took from another note's question:
    nothing is written; the question is put again, or the state refused."""
    a, h = seeded["active"], seeded["human"]
    yes = {"confirm": ElicitResult(action="accept", content={"confirm": True, "reason": "trust me"})}

    async def person(context: Any, params: Any) -> Any:  # a client able to ask, driven by hand below
        raise AssertionError("the person was not to be asked")

    async def main() -> Any:
        async with client(ws, person) as c:
            s = c.session
            unasked = await s.call_tool("forget", {"id": a}, input_responses=yes, allow_input_required=True)
            refused = []
            for state in ("qem: the person was asked", unasked.request_state + "x"):
                try:
                    await s.call_tool("forget", {"id": a}, input_responses=yes, request_state=state,
                                      allow_input_required=True)
                except MCPError as error:
                    refused.append(error.error)
            other = await s.call_tool("forget", {"id": h}, allow_input_required=True)
            try:  # a state the server gave for another note's question
                await s.call_tool("forget", {"id": a}, input_responses=yes, request_state=other.request_state,
                                  allow_input_required=True)
            except MCPError as error:
                refused.append(error.error)
            return unasked, refused

    before = snapshot(ws)
    unasked, refused = anyio.run(main)
    assert isinstance(unasked, InputRequiredResult) and list(unasked.input_requests) == ["confirm"]
    assert unasked.input_requests["confirm"].params.requested_schema["required"] == ["confirm", "reason"]
    assert "qem: the person was asked" not in unasked.request_state  # sealed, not the server's words
    assert [e.code for e in refused] == [INVALID_PARAMS] * 3
    assert all("requestState" in e.message for e in refused)
    assert snapshot(ws) == before


@pytest.mark.parametrize("tool", ["show", "status"])
def test_the_other_tools_answer_at_once(ws: Path, seeded: dict[str, str], tool: str) -> None:
    """Only a person's act asks: a read is answered in the first round."""
    async def main() -> Any:
        async with client(ws) as c:
            return await c.session.call_tool(tool, {"id": seeded["active"]}, allow_input_required=True)

    result = anyio.run(main)
    assert not isinstance(result, InputRequiredResult) and not result.is_error

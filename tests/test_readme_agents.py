"""README's "Agents" section, run as documented: its shell commands, the session-start
hook (the JSON a coding agent's settings hold, its command run as the agent runs it) and
the MCP client config (its command and arguments spawned by the real `mcp` client)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import CORPUS, REPO, run_qem

SECTION = (REPO / "README.md").read_text("utf-8").split("## Agents", 1)[1].split("\n## ", 1)[0]
BIN = str(Path(sys.executable).parent)  # where `qem` is installed, as on a user's PATH


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SECTION, re.S)


@pytest.fixture
def project(ws: Path) -> Path:
    assert run_qem("load", str(CORPUS), cwd=ws).returncode == 0
    return ws


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_documented_commands_run(project: Path) -> None:
    [commands] = blocks("sh")
    for line in filter(None, commands.strip().split("\n")):
        done = shell(line, project)
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout.startswith("# Memory (qem context)") or json.loads(done.stdout)["budget"] == 2000


def test_the_session_start_hook_prints_the_context(project: Path) -> None:
    hook = next(json.loads(b) for b in blocks("json") if "hooks" in b)
    [entry] = hook["hooks"]["SessionStart"]
    [command] = entry["hooks"]
    assert command["type"] == "command"
    done = shell(command["command"], project)  # a hook runs in the project's directory
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Memory (qem context)") and "## Directives" in done.stdout
    assert len(done.stdout) <= 2000 * 4


def test_the_mcp_config_starts_a_server_a_client_can_use(project: Path) -> None:
    import mcp  # the test extra installs it

    config = next(json.loads(b) for b in blocks("json") if "mcpServers" in b)
    server = config["mcpServers"]["qem"]
    args = [str(project) if a == "/path/to/project" else a for a in server["args"]]
    params = mcp.StdioServerParameters(command=str(Path(BIN) / server["command"]), args=args)

    async def main() -> tuple[list[str], str, bool]:
        with open(os.devnull, "w") as quiet:
            async with mcp.stdio_client(params, errlog=quiet) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    tools = [t.name for t in (await session.list_tools()).tools]
                    context = await session.call_tool("context", {"budget": 500})
                    added = await session.call_tool("add", {"text": "Wired through the README", "kind": "finding"})
                    return tools, context.content[0].text, added.is_error

    tools, context, failed = anyio.run(main)
    assert "context" in tools and "add" in tools and not failed
    assert context.startswith("# Memory (qem context)")
    assert "Wired through the README" in run_qem("query", "text~Wired", cwd=project).stdout

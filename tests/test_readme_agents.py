"""README's "Agents" section, run as documented: its shell commands (`qem setup`, `qem
context`), what the agent sees (the hook `qem setup` wrote, run as the harness runs it) and
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
    setup, context = blocks("sh")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    for line in filter(None, setup.strip().split("\n")):
        done = shell(line.split("#")[0].strip(), project)
        assert done.returncode == 0, (line, done.stderr)
    assert json.loads((project / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"]
    for line in filter(None, context.strip().split("\n")):
        done = shell(line, project)
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout.startswith("# Memory (qem context)") or json.loads(done.stdout)["budget"] == 2000


def test_what_the_agent_sees_is_what_the_hook_gives(ws: Path) -> None:
    [shown] = blocks("text")
    held, heading, item = shown.strip().split("\n\n")
    first, body = item.split("\n", 1)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "src").mkdir()
    (ws / "src" / "lock.py").write_text("def release(): pass\n")
    added = run_qem("add", body.strip(), "-k", "gotcha", "-p", "high", "--anchor", "src/lock.py", cwd=ws)
    assert added.returncode == 0, added.stderr
    assert shell("qem setup claude", ws).returncode == 0
    settings = json.loads((ws / ".claude" / "settings.json").read_text())
    [group] = settings["hooks"]["PreToolUse"]
    payload = json.dumps({"session_id": "readme", "cwd": str(ws), "hook_event_name": "PreToolUse",
                          "tool_name": "Edit", "tool_input": {"file_path": str(ws / "src" / "lock.py")}})
    done = subprocess.run(["sh", "-c", group["hooks"][0]["command"]], input=payload, cwd=ws, capture_output=True,
                          text=True, env={**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")})
    said = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]  # held: not given yet
    assert said == shown.strip().replace("k3f9", added.stdout.strip())


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

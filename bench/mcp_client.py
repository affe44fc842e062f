"""The MCP client the benchmark times: spawns `qem mcp` on a workspace over stdio (the
`mcp` package's own client, as an agent's client does), initializes, makes CALLS `add`
tool calls, and prints each call's round trip (seconds, JSON) on stdout.

    python bench/mcp_client.py WORKSPACE [--calls N]

The harness times the whole process (start, handshake, calls) against the start-up floor
and reads the round trips from stdout.  Needs the `mcp` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import Implementation


async def session(workspace: Path, calls: int) -> list[float]:
    script = Path(sys.executable).parent / "qem"
    command, args = (str(script), []) if script.exists() else (sys.executable, ["-m", "qem_edit"])
    params = StdioServerParameters(command=command, args=[*args, "mcp", "-w", str(workspace)],
                                   env={k: v for k, v in os.environ.items() if k.startswith("PYTHON")})
    trips = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=Implementation(name="bench", version="1")) as s:
            await s.initialize()
            for i in range(calls):
                started = time.perf_counter()
                result = await s.call_tool("add", {"text": f"bench: mcp note {time.time_ns()} {i}", "kind": "task"})
                trips.append(time.perf_counter() - started)
                if result.is_error:
                    raise SystemExit(f"the add tool failed: {result.content[0].text}")
    return trips


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--calls", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(anyio.run(session, args.workspace, args.calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

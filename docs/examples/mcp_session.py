"""The session transcribed in docs/mcp.md: the MCP SDK's own client driving
``terminal-registry mcp --standalone`` over stdio, in a fresh temporary project.

    python3 docs/examples/mcp_session.py

Prints each tool call and the text result the model reads (and, once, the whole
result with its structuredContent).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation


async def main() -> None:
    project = tempfile.mkdtemp(prefix="demo-")
    home = tempfile.mkdtemp(prefix="demo-home-")
    env = {**os.environ, "HOME": home, "SHELL": shutil.which("bash") or "/bin/bash"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "protocol.cli", "mcp", "--standalone", "--call-timeout", "3"],
        env=env,
        cwd=project,
    )
    info = Implementation(name="demo-agent", version="1")
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        init = await session.initialize()
        print(f"server: {init.server_info.name} {init.server_info.version}")
        print(f"instructions: {init.instructions}\n")
        tools = await session.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools), "\n")

        async def call(tool: str, whole: bool = False, **arguments: Any) -> Any:
            print(f"→ {tool} {json.dumps(arguments)}")
            result = await session.call_tool(tool, arguments)
            if whole:
                print(json.dumps(result.model_dump(by_alias=True, exclude_none=True), indent=2))
            else:
                flag = " (isError)" if result.is_error else ""
                text = "\n".join(getattr(block, "text", "") for block in result.content)
                print(f"←{flag}\n" + "\n".join(f"  {line}" for line in text.splitlines()))
            print()
            return result.structured_content

        await call(
            "run_command",
            whole=True,
            command="mkdir -p src && cd src && printf 'a\\nb\\n' > notes.txt && wc -l notes.txt",
            cwd=project,
        )
        await call("run_command", command="ls; grep -q zzz notes.txt")
        await call("run_command", command="echo building; sleep 5; echo built")
        running = await call("wait_for_command", terminal_id=1)
        assert running["state"] == "completed"
        asked = await call(
            "run_command", command="read -p 'Deploy to staging? [y/N] ' a; echo \"deploying: $a\""
        )
        await call("write_input", terminal_id=asked["terminal_id"], text="y")
        await call("wait_for_command", terminal_id=asked["terminal_id"])
        pager = await call("run_command", command="seq 1 200 > numbers.txt; less numbers.txt")
        await call("send_keys", terminal_id=pager["terminal_id"], keys=pager["waiting_for"]["keys"])
        await call("wait_for_command", terminal_id=pager["terminal_id"])
        await call("run_command", command="sleep 2; echo finished", background=True)
        await call("environment_details")
        await call("list_terminals")
        await call("wait_for_command", terminal_id=42)
    shutil.rmtree(project, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main)

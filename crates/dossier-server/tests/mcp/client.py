"""Drives a Dossier MCP server with the official MCP Python SDK (`mcp` on PyPI).

usage: client.py http URL KEY CALLS_JSON
       client.py stdio COMMAND_JSON ENV_JSON CALLS_JSON

Connects, lists the tools, makes each call of CALLS_JSON ([[tool, arguments], ...]) and
prints one JSON object: {"tools": [...], "calls": [{"is_error", "text", "error"}]}.
An error raised by the SDK for one call (a JSON-RPC error) is reported, not fatal.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def run(client, calls):
    out = {"tools": [], "calls": []}
    tools = await client.list_tools()
    out["tools"] = [
        {"name": t.name, "input_schema": t.input_schema} for t in tools.tools
    ]
    for name, args in calls:
        try:
            r = await client.call_tool(name, args)
            text = "".join(getattr(c, "text", "") for c in r.content)
            out["calls"].append({"is_error": bool(r.is_error), "text": text, "error": None})
        except Exception as e:  # a JSON-RPC error answer
            out["calls"].append({"is_error": True, "text": "", "error": str(e)})
    return out


async def main():
    kind = sys.argv[1]
    if kind == "http":
        url, key, calls = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
        # The key is the session's: every message carries it, no tool argument does.
        async with Client(streamable_http_client(url, http_client=http)) as client:
            out = await run(client, calls)
    else:
        command, env, calls = json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        async with Client(params) as client:
            out = await run(client, calls)
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())

"""Drives `fleetctl serve` with the official Python MCP SDK (`mcp` >= 2.3), a second
client we did not write: over stdio in both eras (mode="auto" probes 2026-07-28 with
server/discover; mode="legacy" does the initialize handshake), and over HTTP with a
bearer token; and checks the HTTP server's /openapi.json with openapi-spec-validator.
Run by `make interop-python`; exits non-zero on the first mismatch.

Usage: python_client.py FLEETCTL_BINARY DATABASE
"""

import os
import socket
import subprocess
import sys
import time

import json
import urllib.request

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from openapi_spec_validator import validate

BINARY, DATABASE = sys.argv[1], sys.argv[2]
TOKEN = "interop-token-0123456789abcdef"


async def exercise(client: Client, expected_protocol: str) -> None:
    assert client.protocol_version == expected_protocol, client.protocol_version
    tools = [t.name for t in (await client.list_tools()).tools]
    assert "trip_summary" in tools and "route_map" in tools, tools
    stopped = await client.call_tool("stopped_vehicles", {"min_minutes": 30})
    assert not stopped.is_error and stopped.structured_content["vehicles"]["total"] >= 3, stopped
    plate = stopped.structured_content["vehicles"]["items"][0]["plate"]
    picture = await client.call_tool("route_map", {"plate": plate, "date": "yesterday"})
    assert [b.type for b in picture.content] == ["text", "image"], picture.content
    refused = await client.call_tool("trip_summary", {"plate": "P-000XXX"})
    # A tool error carries no structuredContent (clients check it against the output
    # schema); its text is the error object the CLI prints.
    assert refused.is_error and refused.structured_content is None, refused
    assert json.loads(refused.content[0].text)["error"]["code"] == "not_found", refused
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert "dispatch_nearest_vehicle" in prompts, prompts
    prompt = await client.get_prompt("dispatch_nearest_vehicle", {"place": "Bodega Mixco"})
    assert "nearest_vehicles" in prompt.messages[0].content.text
    print(f"  ok: protocol {client.protocol_version}, {len(tools)} tools, {plate} stopped, map drawn, prompts")


async def over_stdio(mode: str, protocol: str) -> None:
    params = StdioServerParameters(command=BINARY, args=["--db", DATABASE, "serve"])
    async with Client(params, mode=mode) as client:
        await exercise(client, protocol)


async def over_http(port: int, mode: str, protocol: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http:
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), mode=mode) as client:
            await exercise(client, protocol)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    for mode, protocol in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:
        print(f"stdio, mode={mode}")
        anyio.run(over_stdio, mode, protocol)
    port = free_port()
    server = subprocess.Popen(
        [BINARY, "--db", DATABASE, "serve", "--http", f"127.0.0.1:{port}"],
        env={**os.environ, "FLEETCTL_TOKEN": TOKEN},
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        for mode, protocol in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:
            print(f"http, mode={mode}")
            anyio.run(over_http, port, mode, protocol)
        document = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json"))
        validate(document)
        print(f"  ok: /openapi.json is a valid OpenAPI {document['openapi']} document with {len(document['paths'])} paths")
    finally:
        server.terminate()
        server.wait(timeout=10)
    print("python SDK interop: all passed")


if __name__ == "__main__":
    main()

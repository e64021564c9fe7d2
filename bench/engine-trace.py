#!/usr/bin/env python3
"""A tracing proxy between a Docker client and the engine's unix socket.

    bench/engine-trace.py LISTEN_SOCKET ENGINE_SOCKET TRACE_FILE

Every HTTP request that passes is one line of TRACE_FILE, tab-separated:
    start (epoch s)  headers (s after start)  end (s after start)  connection  METHOD  path
    status  detail (an exec's user and command, on its create, start and inspect)
`headers` is when the engine's response headers arrived, `end` when its body ended (a chunked
body's last chunk, Content-Length bytes, or the connection's close for a hijacked stream such
as an exec's or an attach's). Bytes pass through unchanged; the proxy only reads the framing.
Used by bench/nop-trial.sh (DOCKER_HOST=unix://LISTEN_SOCKET) to list every engine call a
trial makes with its duration, without instrumenting the runner.
"""

import asyncio
import json
import os
import re
import sys
import time

LISTEN, ENGINE, TRACE = sys.argv[1], sys.argv[2], sys.argv[3]
trace = open(TRACE, "a", buffering=1)
connections = 0
# exec id -> what it runs, from the exec's create (so an exec's start names its command).
exec_commands = {}


def describe_exec(body):
    """`user: command` of an exec create's JSON body, cut short."""
    try:
        spec = json.loads(bytes(body).strip() or b"{}")
    except ValueError:
        return ""
    cmd = spec.get("Cmd") or []
    text = " ".join(cmd[-1:] if len(cmd) > 2 else cmd)
    text = re.sub(r"\s+", " ", text)
    if len(text) > 90:
        text = text[:87] + "..."
    return f"{spec.get('User') or 'default'}: {text}"


async def read_head(reader):
    """The header block (up to and including the blank line), or b'' at EOF."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        return e.partial


def header(head, name):
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return None


async def relay_body(head, reader, writer, until_close, keep=None):
    """Copies one message body framed as `head` says; returns False when the stream ended.
    A small body is also appended to `keep` (a bytearray) when one is given."""

    def write(data):
        writer.write(data)
        if keep is not None and len(keep) < 65536:
            keep.extend(data)

    length = header(head, b"content-length")
    chunked = (header(head, b"transfer-encoding") or "").lower() == "chunked"
    if chunked:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            remaining = size + 2
            while remaining:
                data = await reader.read(min(remaining, 65536))
                if not data:
                    return False
                write(data)
                remaining -= len(data)
            if size == 0:
                # No trailers are sent by the engine or bollard; the CRLF above ended it.
                await writer.drain()
                return True
            await writer.drain()
    if length is not None:
        remaining = int(length)
        while remaining:
            data = await reader.read(min(remaining, 65536))
            if not data:
                return False
            write(data)
            remaining -= len(data)
            await writer.drain()
        return True
    if until_close:
        await pipe(reader, writer)
        return False
    return True


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    try:
        writer.write_eof()
    except (OSError, RuntimeError):
        pass


async def handle(client_r, client_w):
    global connections
    connections += 1
    conn = connections
    engine_r, engine_w = await asyncio.open_unix_connection(ENGINE)
    try:
        while True:
            head = await read_head(client_r)
            if not head:
                break
            start = time.time()
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = request_line.partition(" ")
            path = rest.rsplit(" ", 1)[0]
            engine_w.write(head)
            upgrade = header(head, b"upgrade") is not None
            if upgrade:
                # A hijacked exec or attach: the body is the stream itself, both ways.
                to_engine = asyncio.ensure_future(pipe(client_r, engine_w))
            else:
                request_body = bytearray()
                await relay_body(head, client_r, engine_w, until_close=False, keep=request_body)
                await engine_w.drain()
                to_engine = None
            response = await read_head(engine_r)
            headers_at = time.time() - start
            client_w.write(response)
            status = response.split(b" ", 2)[1].decode() if response else "-"
            hijacked = status == "101" or (
                to_engine is not None
                and (header(response, b"content-type") or "").startswith("application/vnd.docker")
            )
            if hijacked or to_engine is not None:
                await pipe(engine_r, client_w)
                open_ = False
            elif method == "HEAD" or status in ("204", "304"):
                open_ = True
            else:
                response_body = bytearray()
                open_ = await relay_body(
                    response, engine_r, client_w, until_close=True, keep=response_body
                )
            await client_w.drain()
            end = time.time() - start
            detail = ""
            if method == "POST" and re.search(r"/containers/[^/]+/exec$", path):
                detail = describe_exec(request_body)
                match = re.search(rb'"Id"\s*:\s*"([0-9a-f]+)"', bytes(response_body))
                if match:
                    exec_commands[match.group(1).decode()] = detail
            match = re.search(r"/exec/([0-9a-f]+)/", path)
            if match and not detail:
                detail = exec_commands.get(match.group(1), "")
            trace.write(
                f"{start:.6f}\t{headers_at:.6f}\t{end:.6f}\t{conn}\t{method}\t{path}\t{status}\t{detail}\n"
            )
            if not open_:
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        for w in (client_w, engine_w):
            try:
                w.close()
            except OSError:
                pass


async def main():
    if os.path.exists(LISTEN):
        os.unlink(LISTEN)
    server = await asyncio.start_unix_server(handle, path=LISTEN)
    async with server:
        await server.serve_forever()


asyncio.run(main())

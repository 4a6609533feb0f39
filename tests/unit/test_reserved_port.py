"""A port reserved before a slow start (the runtime binds its API's ports before Spark starts, so
none of the ephemeral ports Spark and py4j take while starting can be it): real loopback sockets."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest
from aiohttp import web

from sluice.scheduler.server import ServerThread, reserve


def ok_app() -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    return app


def test_a_reserved_port_is_held_refuses_until_served_then_serves() -> None:
    sock = reserve("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        # while reserved, the port is held: another socket cannot bind it
        with socket.socket() as other, pytest.raises(OSError) as refused:
            other.bind(("127.0.0.1", port))
        assert refused.value.errno == errno.EADDRINUSE
        with pytest.raises(ConnectionRefusedError):  # nothing listens yet: refused, as with no server
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        server = ServerThread(ok_app(), sock=sock).start()
        try:
            assert server.url == f"http://127.0.0.1:{port}"
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as response:
                assert json.loads(response.read()) == {"ok": True}
        finally:
            server.stop()
    finally:
        sock.close()


def test_a_taken_port_is_named_at_once() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            reserve("127.0.0.1", port)
        # the runtime says so in one sentence before it starts Spark (no JVM: this returns in seconds)
        proc = subprocess.run([sys.executable, "-m", "sluice.runtime", "--host", "127.0.0.1", "--port", str(port)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SLUICE_CONTROL_TOKEN": "t"})
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert f"cannot listen on 127.0.0.1:{port}" in last and "--port" in last and "Traceback" not in proc.stderr

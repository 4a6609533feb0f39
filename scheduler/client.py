"""The runtime's client of the scheduler sidecar: blocking, one keep-alive connection per thread.

It is called from Spark's `foreachBatch` threads, so it is synchronous. If the sidecar cannot be
reached, or answers with a server error, the client fails open: it grants at once in Spark's
default pool, counts that in `sluice_runtime_scheduler_fail_open_total`, and reports
`mode == "fail-open"` until a call succeeds again.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from prometheus_client import Counter

from sluice.api.wire import Complete, GrantOut

from .bands import DEFAULT_BAND
from .core import Completion, Grant, SchedulerError
from .policies import BatchRequest, QuerySpec
from .wire import completed_of, dispatch_of, grant_of, register_of

FAIL_OPEN = Counter(
    "sluice_runtime_scheduler_fail_open_total",
    "Batches that ran ungated because the scheduler sidecar was unreachable.",
)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class SchedulerUnavailable(Exception):
    pass


class SchedulerClient:
    """`url`: `http://127.0.0.1:8470` or `unix:/path/to.sock`. `timeout`: connect/answer seconds."""

    def __init__(self, url: str, timeout: float = 2.0, wait: float = 30.0) -> None:
        self.url = url
        self.timeout = timeout
        self.wait = wait
        self._local = threading.local()
        self.mode = "gated"
        self._registered: dict[str, QuerySpec] = {}
        """What this runtime registered: a restarted sidecar (which knows nothing) gets it again."""

    # ------------------------------------------------------------------ transport

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self.url.startswith("unix:"):
                conn = _UnixConnection(self.url[len("unix:"):], self.timeout)
            else:
                parsed = urlparse(self.url)
                conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port or 80, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _call(self, method: str, path: str, body: bytes | None, read_timeout: float) -> tuple[int, dict[str, Any]]:
        for attempt in (1, 2):  # one retry: a kept-alive connection may have been closed by the server
            conn = self._connection()
            try:
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(read_timeout)
                conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                return response.status, json.loads(data) if data else {}
            except (OSError, http.client.HTTPException, json.JSONDecodeError) as error:
                self._drop()
                if attempt == 2 or isinstance(error, TimeoutError | ConnectionRefusedError | FileNotFoundError):
                    raise SchedulerUnavailable(str(error)) from error
        raise SchedulerUnavailable("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ API

    def register(self, spec: QuerySpec) -> bool:
        """Register or update a query; False if the sidecar is unreachable. SchedulerError: the
        scheduler refused it (its sentence), as the in-process core does."""
        tenant, name = spec.key.split("/", 1)
        try:
            status, answer = self._call("PUT", f"/v1/queries/{tenant}/{name}", register_of(spec).model_dump_json().encode(), self.timeout)
        except SchedulerUnavailable:
            self.mode = "fail-open"
            return False
        if status == 400:
            raise SchedulerError(str(answer.get("error") or "the scheduler refused the registration"))
        if status == 200:
            self._registered[spec.key] = spec
        return status == 200

    def unregister(self, key: str) -> bool:
        self._registered.pop(key, None)
        try:
            status, _ = self._call("DELETE", f"/v1/queries/{key}", None, self.timeout)
        except SchedulerUnavailable:
            return False
        return status in (200, 404)

    def dispatch(self, request: BatchRequest, completed: Sequence[Completion] = ()) -> Grant:
        """Ask for a grant, sending earlier completions along; blocks until granted (or fails open)."""
        started = time.monotonic()
        ask = dispatch_of(request, completed, self.wait)
        again = False
        while True:
            try:
                status, answer = self._call("POST", "/v1/dispatch", ask.model_dump_json().encode(), self.wait + self.timeout)
            except SchedulerUnavailable:
                return self._fail_open(request, started)
            if status == 200:
                try:
                    out = GrantOut.model_validate(answer)
                except ValueError:
                    return self._fail_open(request, started)  # not the scheduler's answer
                if out.granted:
                    self.mode = "gated"
                    return grant_of(out)
                if out.released:
                    return Grant(request.query, request.batch_id, DEFAULT_BAND, 1, 0.0, 0.0, time.monotonic() - started,
                                 fail_open=True)
                # waited waitMs without a grant: ask again, completions already delivered
                ask = ask.model_copy(update={"completed": []})
                continue
            if status == 404 and "not registered" in str(answer.get("error", "")):
                spec = self._registered.get(request.query)
                if spec is not None and not again:  # the sidecar restarted empty: register, ask again
                    again = True
                    with contextlib.suppress(SchedulerError):
                        if self.register(spec):
                            continue
                return self._fail_open(request, started)
            if status >= 500:
                return self._fail_open(request, started)
            raise ValueError(f"the scheduler refused batch {request.batch_id} of {request.query}: {answer.get('error')}")

    def complete(self, query: str, completed: Sequence[Completion]) -> bool:
        if not completed:
            return True
        payload = Complete(query=query, completed=[completed_of(c) for c in completed]).model_dump_json().encode()
        try:
            status, _ = self._call("POST", "/v1/complete", payload, self.timeout)
        except SchedulerUnavailable:
            return False
        return status == 200

    def _fail_open(self, request: BatchRequest, started: float) -> Grant:
        self.mode = "fail-open"
        FAIL_OPEN.inc()
        return Grant(request.query, request.batch_id, DEFAULT_BAND, 1, 0.0, 0.0, time.monotonic() - started, fail_open=True)

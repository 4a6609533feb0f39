"""A joining executor's pod yields the node's CPU until warm: the rule (pure), and the shell's
calls against a real HTTP server on loopback standing in for the API server (the resize itself
is the node tier's: tests/node/test_node.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sluice.api.constants import WARMUP_CPU_REQUEST as YIELD_REQUEST
from sluice.runtime.pod_weight import PodWeights, plan


def test_a_cold_executor_yields_only_while_a_warm_one_runs_and_gets_its_request_back_once_warm() -> None:
    assert plan(cold=["2"], warm=["1"], lowered=[]) == (["2"], [])
    assert plan(cold=["2"], warm=["1"], lowered=["2"]) == ([], [])  # asked once
    assert plan(cold=[], warm=["1", "2"], lowered=["2"]) == ([], ["2"])  # warm now
    assert plan(cold=["1", "2"], warm=[], lowered=[]) == ([], [])  # the pool's first: nothing to yield to
    assert plan(cold=["2"], warm=[], lowered=["2"]) == ([], ["2"])  # the last warm one left
    assert plan(cold=["3"], warm=["1"], lowered=["2"]) == (["3"], ["2"])  # 2 is gone


class _Api:
    """The calls `PodWeights` makes, answered by a loopback HTTP server (the API server's paths)."""

    def __init__(self, base: str, refuse: int = 0) -> None:
        self.base = base
        self.namespace = "sluice"
        self.refuse = refuse

    def call(self, method: str, path: str, body: Any = None, content: str = "application/json") -> Any:
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": content, "X-Refuse": str(self.refuse)})
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read() or b"null")


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, Any]]]]:
    seen: list[tuple[str, str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _answer(self, code: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            seen.append(("GET", self.path, None))
            gone = "spark-exec-id%3D9" in self.path
            items = [] if gone else [{"metadata": {"name": "pool-exec-" + self.path.rsplit("%3D", 1)[1]}}]
            self._answer(200, {"items": items})

        def do_PATCH(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(("PATCH", self.path, body))
            code = int(self.headers.get("X-Refuse", "0"))
            self._answer(code or 200, {})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()


def _cpu(body: Any) -> str:
    return str(body["spec"]["containers"][0]["resources"]["requests"]["cpu"])


def test_the_shell_resizes_the_executor_pods_it_finds_by_spark_s_labels(server: tuple[str, list[tuple[str, str, Any]]]) -> None:
    base, seen = server
    weights = PodWeights(_Api(base), "spark-app-1", "500m")  # type: ignore[arg-type]
    weights.apply({"1": "warm", "2": "cold"})
    patches = [(path, _cpu(body)) for method, path, body in seen if method == "PATCH"]
    assert patches == [("/api/v1/namespaces/sluice/pods/pool-exec-2/resize", YIELD_REQUEST)]
    assert "spark-app-selector%3Dspark-app-1%2Cspark-exec-id%3D2" in seen[0][1]
    assert weights.lowered == {"2"}
    seen.clear()
    weights.apply({"1": "warm", "2": "cold"})
    assert seen == []  # nothing changed: no call
    weights.apply({"1": "warm", "2": "warm"})
    assert [(path, _cpu(body)) for method, path, body in seen if method == "PATCH"] == [
        ("/api/v1/namespaces/sluice/pods/pool-exec-2/resize", "500m")]
    assert weights.lowered == set()
    seen.clear()
    weights.apply({"1": "warm", "9": "cold"})  # its pod is gone already: nothing to patch
    assert [m for m, _, _ in seen] == ["GET"]


def test_a_refused_resize_is_told_once_and_not_asked_again(server: tuple[str, list[tuple[str, str, Any]]]) -> None:
    base, seen = server
    weights = PodWeights(_Api(base, refuse=403), "spark-app-1", "500m")  # type: ignore[arg-type]
    weights.apply({"1": "warm", "2": "cold"})
    assert weights.lowered == set() and "HTTP 403" in weights.trouble and "executor 2" in weights.trouble
    seen.clear()
    weights.apply({"1": "warm", "2": "cold"})
    assert seen == []

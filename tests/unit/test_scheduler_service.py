"""The scheduler sidecar on real loopback sockets, driven by the real client."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from sluice.api.constants import CRITICAL_LANE
from sluice.scheduler.bands import DEFAULT_BAND
from sluice.scheduler.client import SchedulerClient
from sluice.scheduler.core import Completion, Scheduler
from sluice.scheduler.costs import CostModel, CostPrior
from sluice.scheduler.policies import BatchRequest, QuerySpec
from sluice.scheduler.server import SchedulerService, ServerThread, make_app
from sluice.testing.waiting import wait_for


def _serve(policy: str, capacity: int) -> Iterator[tuple[ServerThread, SchedulerService]]:
    service = SchedulerService(Scheduler(policy, capacity=capacity, costs=CostModel(CostPrior(0.1, 0.0, 0.0))))
    server = ServerThread(make_app(service)).start()
    try:
        yield server, service
    finally:
        server.stop()


@pytest.fixture
def served() -> Iterator[tuple[ServerThread, SchedulerService]]:
    yield from _serve("cameo", 2)


def _post(url: str, body: bytes, method: str = "POST") -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_register_dispatch_complete_round_trip(served: tuple[ServerThread, SchedulerService]) -> None:
    server, service = served
    client = SchedulerClient(server.url)
    assert client.register(QuerySpec("pay/filter", "pay", 0.5))
    grant = client.dispatch(BatchRequest("pay/filter", 1, rows=10, oldest_event=time.time()))
    assert grant.batch_id == 1 and grant.band.startswith("band") and not grant.fail_open
    # the completion travels with the next request: one round trip per batch
    grant2 = client.dispatch(BatchRequest("pay/filter", 2, rows=10), [Completion("pay/filter", 1, seconds=0.2, rows=10)])
    assert grant2.batch_id == 2
    assert service.core.costs.samples("pay/filter") == 1
    assert client.complete("pay/filter", [Completion("pay/filter", 2, seconds=0.2, rows=10)])
    assert service.core.in_flight == 0


def test_many_concurrent_clients_never_exceed_capacity(served: tuple[ServerThread, SchedulerService]) -> None:
    server, _ = served
    clients, cycles = 16, 40
    running = 0
    peak = 0
    granted = 0
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        nonlocal running, peak, granted
        client = SchedulerClient(server.url)
        key = f"t{i % 4}/q{i}"
        client.register(QuerySpec(key, f"t{i % 4}", 0.2 + i * 0.01))
        done: list[Completion] = []
        try:
            for batch in range(cycles):
                grant = client.dispatch(BatchRequest(key, batch, rows=5, oldest_event=time.time()), done)
                assert not grant.fail_open
                with lock:
                    running += 1
                    peak = max(peak, running)
                    granted += 1
                time.sleep(0.0005)
                with lock:
                    running -= 1
                done = [Completion(key, batch, seconds=0.0005, rows=5)]
            client.complete(key, done)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert granted == clients * cycles
    assert 1 <= peak <= 2  # the pool's capacity


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v1/dispatch", b"{not json", 400, "valid JSON"),
        ("/v1/dispatch", b'{"query": "pay/filter", "batchId": -1}', 400, "batchId"),
        ("/v1/dispatch", b'{"query": "pay/filter", "batchId": 1, "colour": "red"}', 400, "colour"),
        ("/v1/dispatch", b'{"query": "nobody/x", "batchId": 1}', 404, "not registered"),
        ("/v1/dispatch", b'{"query": "no-slash", "batchId": 1}', 400, "query"),
        ("/v1/complete", b'{"query": "pay/filter", "completed": []}', 400, "completed"),
        ("/v1/queries/pay/filter", b'{"latencyTargetMs": 0}', 400, "latencyTargetMs"),
        ("/v1/nowhere", b"{}", 404, "not found"),
    ],
)
def test_malformed_requests_get_a_4xx_sentence(
    served: tuple[ServerThread, SchedulerService], path: str, body: bytes, status: int, words: str
) -> None:
    server, _ = served
    SchedulerClient(server.url).register(QuerySpec("pay/filter", "pay", 0.5))
    method = "PUT" if path.startswith("/v1/queries") else "POST"
    code, text = _post(server.url + path, body, method)
    assert code == status
    assert words in text and '"error"' in text and "Traceback" not in text
    assert _post(server.url + "/healthz", b"", "GET")[0] == 200  # still serving


def test_metrics_have_bounded_labels_and_forget_unregistered_queries(served: tuple[ServerThread, SchedulerService]) -> None:
    server, _ = served
    client = SchedulerClient(server.url)
    client.register(QuerySpec("pay/filter", "pay", 0.5))
    client.dispatch(BatchRequest("pay/filter", 1))
    client.complete("pay/filter", [Completion("pay/filter", 1, seconds=0.1, latency=0.9)])
    text = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    assert 'sluice_scheduler_grants_total{query="filter",tenant="pay"} 1.0' in text
    assert 'sluice_scheduler_sla_violations_total{query="filter",tenant="pay"} 1.0' in text
    assert "sluice_scheduler_wait_seconds_bucket" in text and "sluice_scheduler_queue_depth 0.0" in text
    assert client.unregister("pay/filter")
    text = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    assert 'query="pay/filter"' not in text


def test_unix_socket(tmp_path: Path) -> None:
    service = SchedulerService(Scheduler("edf", capacity=1))
    server = ServerThread(make_app(service), unix=str(tmp_path / "s.sock")).start()
    try:
        client = SchedulerClient(server.url)
        assert client.register(QuerySpec("a/b", "a", 1.0))
        assert client.dispatch(BatchRequest("a/b", 3)).batch_id == 3
    finally:
        server.stop()


def _start_sidecar(port: int = 0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice.scheduler", "--port", str(port), "--capacity", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.search(r"listening on (\S+)", line)
    assert match, f"sidecar did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
    assert f"critical lane {CRITICAL_LANE}" in line  # a pool's sidecar has the lane unless told otherwise
    return proc, match.group(1)


def test_the_sidecar_refuses_a_negative_critical_lane_in_one_sentence() -> None:
    done = subprocess.run([sys.executable, "-m", "sluice.scheduler", "--port", "0", "--critical-lane", "-1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--critical-lane at least 0" in done.stderr and "Traceback" not in done.stderr


def test_killed_sidecar_fails_open_and_a_restarted_one_gates_again() -> None:
    proc, url = _start_sidecar()
    port = int(url.rsplit(":", 1)[1])
    client = SchedulerClient(url, timeout=1.0)
    spec = QuerySpec("pay/filter", "pay", 0.5)
    try:
        assert client.register(spec)
        assert not client.dispatch(BatchRequest("pay/filter", 1)).fail_open
        proc.kill()
        proc.wait(10)
        before = REGISTRY.get_sample_value("sluice_runtime_scheduler_fail_open_total") or 0.0
        grant = client.dispatch(BatchRequest("pay/filter", 2))
        assert grant.fail_open and grant.band == DEFAULT_BAND and client.mode == "fail-open"
        assert REGISTRY.get_sample_value("sluice_runtime_scheduler_fail_open_total") == before + 1
        proc, url = _start_sidecar(port)
        # the new sidecar knows nothing: the runtime registers again and is gated again
        assert client.register(spec)
        grant = client.dispatch(BatchRequest("pay/filter", 3))
        assert not grant.fail_open and client.mode == "gated"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def fair_served() -> Iterator[tuple[ServerThread, SchedulerService]]:
    yield from _serve("fair", 1)


def test_a_batch_asked_again_after_a_poll_timeout_keeps_its_place_and_is_charged_once(
        fair_served: tuple[ServerThread, SchedulerService]) -> None:
    server, service = fair_served
    client = SchedulerClient(server.url, wait=0.2)
    client.register(QuerySpec("x/holder", "x", 5.0))
    client.register(QuerySpec("pay/q", "pay", 1.0))
    holder = client.dispatch(BatchRequest("x/holder", 1))  # takes the only slot
    grants: list[Any] = []
    asker = threading.Thread(target=lambda: grants.append(SchedulerClient(server.url, wait=0.2).dispatch(
        BatchRequest("pay/q", 1, rows=10))))
    asker.start()
    wait_for(lambda: service.core.pending_count() == 1, 10, "the batch to wait", every=0.005)
    pending = service.core.queries["pay/q"].pending
    assert pending is not None
    enqueued, charged = pending.enqueued, service.core.policy.finish["pay"]  # type: ignore[attr-defined]
    time.sleep(0.7)  # what is under test is time passing: three 200 ms polls time out and are sent again
    again = service.core.queries["pay/q"].pending
    assert again is not None and again.enqueued == enqueued  # the same place in the queue
    assert service.core.policy.finish["pay"] == charged  # type: ignore[attr-defined]  # charged once under fair
    client.complete("x/holder", [Completion("x/holder", holder.batch_id, seconds=0.1)])
    asker.join(10)
    assert grants and not grants[0].fail_open and grants[0].waited >= 0.6


def test_a_grant_made_between_two_polls_waits_for_the_next_ask_or_is_handed_back(
        fair_served: tuple[ServerThread, SchedulerService]) -> None:
    server, service = fair_served
    client = SchedulerClient(server.url)
    client.register(QuerySpec("x/holder", "x", 5.0))
    client.register(QuerySpec("pay/q", "pay", 1.0))
    holder = client.dispatch(BatchRequest("x/holder", 1))
    ask = b'{"query": "pay/q", "batchId": 1, "waitMs": 100}'
    code, body = _post(f"{server.url}/v1/dispatch", ask)
    assert code == 200 and '"granted":false' in body.replace(" ", "")  # timed out; the batch keeps its place
    client.complete("x/holder", [Completion("x/holder", holder.batch_id, seconds=0.1)])  # granted meanwhile
    assert ("pay/q", 1) in service.unclaimed
    code, body = _post(f"{server.url}/v1/dispatch", ask)
    assert code == 200 and '"granted":true' in body.replace(" ", "") and not service.unclaimed
    # a requester that never comes back: its grant is handed back after `reclaim` seconds
    service.reclaim = 0.1
    client.complete("pay/q", [Completion("pay/q", 1, seconds=0.1)])
    holder = client.dispatch(BatchRequest("x/holder", 2))
    code, _ = _post(f"{server.url}/v1/dispatch", b'{"query": "pay/q", "batchId": 2, "waitMs": 100}')
    client.complete("x/holder", [Completion("x/holder", 2, seconds=0.1)])
    assert ("pay/q", 2) in service.unclaimed
    wait_for(lambda: not service.unclaimed and service.core.in_flight == 0, 10, "the unclaimed slot handed back")

"""The runtime's control API on a real loopback server over a real local Spark session."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.constants import MASSES
from sluice.runtime.control import make_control_app
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"


@pytest.fixture
def api(spark: Any, tmp_path: Path) -> Iterator[tuple[str, QueryHost]]:
    host = QueryHost(spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    server = ServerThread(make_control_app(host, TOKEN)).start()
    try:
        yield server.url, host
    finally:
        server.stop()
        host.stop_all()


def call(url: str, method: str, body: Any = None, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_add_status_suspend_remove(api: tuple[str, QueryHost]) -> None:
    url, host = api
    manifest = yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())
    code, body = call(f"{url}/v1/queries/payments/fraud-filter?weight=2.5", "PUT", manifest)
    assert code == 200 and body["phase"] == "Running"
    assert host.queries["payments/fraud-filter"].spec.weight == 2.5  # the tenant's quota weight
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and call(f"{url}/v1/queries/payments/fraud-filter", "GET")[1]["batches"] < 3:
        time.sleep(0.5)
    code, body = call(f"{url}/v1/queries/payments/fraud-filter", "GET")
    assert code == 200 and body["batches"] >= 3 and body["scheduler"] == "gated"
    # every measured batch, as a benchmark on a pod reads them: the window's rows add up
    code, listed = call(f"{url}/v1/queries/payments/fraud-filter/batches", "GET")
    assert code == 200 and listed["query"] == "payments/fraud-filter" and listed["batches"]
    with host.lock:
        window = host.queries["payments/fraud-filter"].window
        held = [(b.committed, b.rows) for b in window.batches]
    assert {(b["committed"], b["rows"]) for b in listed["batches"]} <= set(held)
    assert all(len(b["latencies_ms"]) == len(MASSES) and b["latencies_ms"] == sorted(b["latencies_ms"], reverse=True)
               for b in listed["batches"])
    last = listed["batches"][-1]["committed"]
    code, later = call(f"{url}/v1/queries/payments/fraud-filter/batches?since={last}", "GET")
    assert code == 200 and all(b["committed"] > last for b in later["batches"])
    code, body = call(f"{url}/v1/queries/payments/fraud-filter/batches?since=yesterday", "GET")
    assert code == 400 and body["error"].startswith("since must be a time in epoch seconds")
    assert call(f"{url}/v1/queries/x/y/batches", "GET")[0] == 404
    assert "payments/fraud-filter" in call(f"{url}/v1/queries", "GET")[1]["queries"]
    code, body = call(f"{url}/v1/queries/payments/fraud-filter/suspend", "POST", {"suspend": True})
    assert code == 200 and body["phase"] == "Suspended"
    code, body = call(f"{url}/v1/queries/payments/fraud-filter/suspend", "POST", {"suspend": False})
    assert code == 200 and body["phase"] == "Running"
    code, body = call(f"{url}/v1/queries/payments/fraud-filter", "DELETE")
    assert code == 200 and "payments/fraud-filter" not in host.queries
    metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    assert "sluice_runtime_batches_total" in metrics


def test_healthz_fails_with_the_reason_once_the_driver_is_gone(api: tuple[str, QueryHost]) -> None:
    """What the lifecycle ticker sets when py4j loses the JVM (the chaos tier kills a real one);
    set here by hand so the probe's answer can be read before the process exits."""
    url, host = api
    assert call(f"{url}/healthz", "GET", token=None) == (200, {"ok": True, "queries": 0, "error": None})
    host.driver.broken = "the Spark driver stopped answering (test); every query of this runtime has stopped"
    try:
        code, body = call(f"{url}/healthz", "GET", token=None)
        assert code == 503 and body["ok"] is False and body["error"] == host.broken
    finally:
        host.driver.broken = None


def test_refuses_without_token_and_bad_input_with_a_sentence(api: tuple[str, QueryHost]) -> None:
    url, host = api
    assert call(f"{url}/v1/queries", "GET", token=None)[0] == 401
    assert call(f"{url}/v1/queries", "GET", token="wrong")[0] == 401
    assert call(f"{url}/healthz", "GET", token=None)[0] == 200
    manifest = yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())
    manifest["spec"]["sla"]["latencyTarget"] = "-1s"
    code, body = call(f"{url}/v1/queries/payments/fraud-filter", "PUT", manifest)
    assert code == 400 and "spec.sla.latencyTarget" in body["error"]
    manifest = yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())
    code, body = call(f"{url}/v1/queries/other/fraud-filter", "PUT", manifest)
    assert code == 400 and "make them agree" in body["error"]
    assert call(f"{url}/v1/queries/payments/fraud-filter", "PUT", b"{nope")[0] == 400
    for weight in ("abc", "0", "-2", "nan"):
        code, body = call(f"{url}/v1/queries/payments/fraud-filter?weight={weight}", "PUT", manifest)
        assert code == 400 and body["error"].startswith("weight must be a number above zero")
    assert call(f"{url}/v1/queries/x/y", "DELETE")[0] == 404
    code, body = call(f"{url}/v1/executors", "PUT", {"target": 3})
    assert code == 409 and "cluster manager" in body["error"]  # local[*] has no executors to request
    assert call(f"{url}/v1/executors", "PUT", {"target": -1})[0] == 400
    assert host.queries == {}


def test_status_reads_never_wait_for_a_query_to_start(api: tuple[str, QueryHost]) -> None:
    """Retrying a Pending query (a Kafka check that takes seconds to time out, then Spark's start)
    once ran on the API's event loop when a status was read, so /healthz stalled behind it."""
    url, host = api
    host.retry_every = 0.3
    manifest = yaml.safe_load((ROOT / "examples" / "kafka-clicks.yaml").read_text())
    for end in ("source", "sink"):
        manifest["spec"][end]["bootstrapServers"] = "127.0.0.1:1"  # nothing listens there
    code, body = call(f"{url}/v1/queries/analytics/checkout-clicks", "PUT", manifest)
    assert code == 200 and body["phase"] == "Pending" and "127.0.0.1:1" in body["message"]
    assert body["status"]["phase"] == "Pending"
    time.sleep(0.4)  # the retry is due now
    for _ in range(5):
        started = time.monotonic()
        code, body = call(f"{url}/v1/queries/analytics/checkout-clicks", "GET")
        health, _ = call(f"{url}/healthz", "GET", token=None)
        elapsed = time.monotonic() - started
        assert code == 200 and body["phase"] == "Pending" and health == 200
        # the Kafka check alone takes 5 s to time out: a read that waited for it would take that long
        assert elapsed < 2.5, f"a status read took {elapsed:.1f} s"


def test_one_scrape_holds_the_latency_histogram_and_the_sidecars_series(spark: Any, tmp_path: Path) -> None:
    """Prometheus aggregates histograms and counters (not windowed gauges); the scheduler sidecar
    binds loopback in the pool pod, so the runtime's /metrics carries its series; every series of a
    query has the same labels (tenant, query)."""
    from sluice.scheduler.client import SchedulerClient
    from sluice.scheduler.server import SchedulerService, make_app

    sidecar = ServerThread(make_app(SchedulerService(Scheduler("cameo", capacity=2)))).start()
    host = QueryHost(spark, tmp_path / "ck", SchedulerClient(sidecar.url))
    server = ServerThread(make_control_app(host, TOKEN, scheduler_metrics=f"{sidecar.url}/metrics")).start()
    try:
        manifest = yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())
        assert call(f"{server.url}/v1/queries/payments/fraud-filter", "PUT", manifest)[0] == 200
        hosted = host.queries["payments/fraud-filter"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and hosted.window.all_rows < 100:
            time.sleep(0.5)
        assert hosted.window.all_rows >= 100, "no latency measured"
        # DS2's warm-up counts from its first batch with rows, which committed before any latency
        first = min(t.committed for t in hosted.timelines.values() if t.rows > 0 and t.committed is not None)
        assert hosted.input_since is not None and hosted.input_since <= first
        text = urllib.request.urlopen(f"{server.url}/metrics", timeout=10).read().decode()
        samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line and not line.startswith("#")}
        labels = 'query="fraud-filter",tenant="payments"'
        inf = samples[f'sluice_query_latency_seconds_bucket{{le="+Inf",{labels}}}']
        rows = samples[f"sluice_query_rows_total{{{labels}}}"]
        within = samples[f"sluice_query_rows_within_sla_total{{{labels}}}"]
        half = samples[f'sluice_query_latency_seconds_bucket{{le="0.5",{labels}}}']
        assert inf == samples[f"sluice_query_latency_seconds_count{{{labels}}}"] == rows >= 100
        assert samples[f"sluice_query_latency_target_seconds{{{labels}}}"] == 0.5  # the example's 500 ms
        # the 0.5 s bucket holds exactly the rows within the 500 ms target
        assert abs(half - within) < 1e-6 * rows and 0 <= within <= rows
        assert samples[f"sluice_runtime_batches_total{{{labels}}}"] >= 1
        assert samples[f"sluice_scheduler_grants_total{{{labels}}}"] >= 1  # from the sidecar, same labels
    finally:
        server.stop()
        host.stop_all()
        sidecar.stop()

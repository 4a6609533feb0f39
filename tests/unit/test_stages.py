"""Attributing Spark's stage metrics (status API JSON) to queries and batches."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sluice.runtime.stages import StageCost, StagePoller, parse_stages


def stage(stage_id: int, description: str, status: str = "COMPLETE", **metrics: int) -> dict[str, object]:
    return {"stageId": stage_id, "status": status, "name": "start at NativeMethodAccessorImpl.java:0",
            "description": description, "executorRunTime": 1200, "executorCpuTime": 300_000_000,
            "shuffleFetchWaitTime": 200, "inputRecords": 50, "outputRecords": 5, "numCompleteTasks": 4, **metrics}


def test_stages_are_attributed_by_the_gate_description() -> None:
    stages = [
        stage(3, "sluice pay/alerts batch 7"),
        stage(4, "sluice ana/stats batch 12", shuffleReadRecords=900),
        stage(5, "some other job"),
        stage(6, "sluice pay/alerts batch 8", status="ACTIVE"),
        stage(2, "sluice pay/alerts batch 6"),
    ]
    parsed = parse_stages(stages, seen={(2, 0)})
    assert [(s.stage_id, s.query, s.batch_id) for s in parsed] == [(3, "pay/alerts", 7), (4, "ana/stats", 12)]
    first = parsed[0]
    assert first.run_seconds == 1.2 and first.cpu_seconds == 0.3 and first.shuffle_fetch_wait_seconds == 0.2
    assert first.useful_seconds == 1.0  # run time minus shuffle fetch wait (DS2's useful time)
    assert parsed[1].shuffle_read_records == 900


class _FakeStatusApi:
    """Spark's stage list served over real HTTP on loopback; `listed` is what it answers now."""

    def __init__(self) -> None:
        self.listed: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(outer.listed).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def status_api() -> Iterator[_FakeStatusApi]:
    api = _FakeStatusApi()
    yield api
    api.server.shutdown()


def test_a_stage_that_finishes_after_a_higher_one_is_still_counted(status_api: _FakeStatusApi) -> None:
    """Under FAIR, stage 9 may complete after stage 10: it must not be dropped (it once was)."""
    taken: list[StageCost] = []
    poller = StagePoller(status_api.url, "app-1", taken.extend)
    status_api.listed = [stage(10, "sluice pay/alerts batch 4")]
    poller.poll()
    status_api.listed = [stage(10, "sluice pay/alerts batch 4"), stage(9, "sluice ana/stats batch 7")]
    poller.poll()
    poller.poll()  # nothing new: nothing counted twice
    assert [(s.stage_id, s.query) for s in taken] == [(10, "pay/alerts"), (9, "ana/stats")]


def test_the_poller_forgets_stages_spark_no_longer_lists(status_api: _FakeStatusApi) -> None:
    taken: list[StageCost] = []
    poller = StagePoller(status_api.url, "app-1", taken.extend)
    status_api.listed = [stage(i, f"sluice t/q batch {i}") for i in range(300)]
    poller.poll()
    status_api.listed = [stage(i, f"sluice t/q batch {i}") for i in range(300, 600)]
    poller.poll()
    assert len(taken) == 600
    assert poller.seen == {(i, 0) for i in range(300, 600)}  # bounded by Spark's own list


def test_each_attempt_of_a_retried_stage_is_counted_once(status_api: _FakeStatusApi) -> None:
    taken: list[StageCost] = []
    poller = StagePoller(status_api.url, "app-1", taken.extend)
    status_api.listed = [stage(5, "sluice t/q batch 1")]
    poller.poll()
    status_api.listed = [stage(5, "sluice t/q batch 1"), {**stage(5, "sluice t/q batch 1"), "attemptId": 1}]
    poller.poll()
    assert len(taken) == 2

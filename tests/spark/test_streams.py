"""Starting streams (`runtime/streams.py`): Spark's async progress tracking on the queries that
allow it, on a real local Spark with Sluice's JVM sink."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.api.constants import ASYNC_PROGRESS_CONF
from sluice.testing.waiting import wait_for

from .test_runtime import files_source, iso, query, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def async_progress(spark: Any) -> Iterator[None]:
    """The session with async progress tracking at an interval longer than the test."""
    spark.conf.set(ASYNC_PROGRESS_CONF, "600000")
    yield
    spark.conf.unset(ASYNC_PROGRESS_CONF)


def _execution(hosted: Any) -> str:
    """Spark's class running the query (through its wrapper)."""
    return str(hosted.handle._jsq.streamingQuery().getClass().getSimpleName())


def _logged(checkpoint: Path, log: str) -> list[str]:
    return sorted(p.name for p in (checkpoint / log).iterdir() if p.name.isdigit())


def test_a_stateless_noop_query_logs_its_progress_once_an_interval(async_progress: None, host_factory: Any,
                                                                 tmp_path: Path) -> None:
    """Three batches of a stateless query written by Sluice's sink (named `sluice(noop-table)`, which
    Spark's list of sinks does not name: the override option lets it run) under a 10-minute interval:
    Spark's async execution runs it, every row arrives, and only the first batch reached the offset
    and commit logs on disk. A stateful query beside it keeps Spark's synchronous logs."""
    data, counted = tmp_path / "in", tmp_path / "counted"
    host = host_factory(None)
    plain = host.add(query("plain", "t", files_source(data), [{"select": ["id", "produced_at"]}],
                           sink={"type": "noop"}, sla="60s"))
    stateful = host.add(query("counts", "t", files_source(counted),
                              [{"groupBy": ["user"]}, {"aggregate": [{"fn": "count", "name": "n"}]}],
                              sink={"type": "noop"}, sla="60s"))
    assert plain.phase == "Running", plain.message
    assert stateful.phase == "Running", stateful.message
    assert _execution(plain) == "AsyncProgressTrackingMicroBatchExecution"
    assert _execution(stateful) == "MicroBatchExecution"
    for batch in range(3):
        rows = [{"id": k, "user": f"u{k % 2}", "amount": 1.0, "produced_at": iso(time.time())} for k in range(10)]
        write_rows(data, f"{batch}.json", rows)
        write_rows(counted, f"{batch}.json", rows)
        wait_for(lambda b=batch: plain.output_rows == 10 * (b + 1), 60, f"batch {batch} of the stateless query")
        wait_for(lambda b=batch: stateful.batches >= b + 1, 60, f"batch {batch} of the stateful query")
    assert plain.handle.exception() is None
    checkpoint = host.checkpoint("t/plain")
    assert _logged(checkpoint, "offsets") == ["0"]
    assert _logged(checkpoint, "commits") == ["0"]
    assert len(_logged(host.checkpoint("t/counts"), "commits")) >= 3


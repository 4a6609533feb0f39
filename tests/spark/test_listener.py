"""The listener bridge `runtime/listener.py` reaches through py4j (PySpark's private `_jlistener`
hook, the JVM's `PythonStreamingQueryListenerWrapper`, `StreamingQueryProgress.json`), on real
Spark, so that a Spark upgrade that changes any of them fails here, loudly: every field the host
reads from a progress event is checked, with the observed metrics it measures latency from."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from sluice.runtime.listener import listen
from sluice.testing.waiting import wait_for

pytestmark = pytest.mark.spark


def test_progress_events_arrive_whole_through_the_json_bridge_and_stop_when_removed(spark: Any, tmp_path: Path) -> None:
    started: list[str] = []
    progress: list[tuple[str, Any]] = []
    listener = listen(spark, on_progress=lambda name, p: progress.append((name, p)), on_started=started.append)
    rows = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    observed = rows.observe("m", F.count(F.lit(1)).alias("n"),
                            F.percentile_approx(F.col("timestamp").cast("double"), [0.5, 0.99, 1.0], 1000).alias("q"))
    query = (observed.writeStream.format("noop").queryName("listener-bridge")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="300 milliseconds").start())
    try:
        wait_for(lambda: any(p.batchId >= 2 and p.numInputRows > 0 for _, p in progress), 60, "three batches' progress")
        assert started == ["listener-bridge"]
        name, last = next((n, p) for n, p in reversed(progress) if p.numInputRows > 0)
        assert name == last.name == "listener-bridge"
        assert isinstance(last.batchId, int) and last.numInputRows > 0
        assert last.inputRowsPerSecond is not None and last.processedRowsPerSecond is not None
        assert {"triggerExecution", "addBatch"} <= set(last.durationMs)
        assert last.timestamp.endswith("Z")
        assert "RateStreamV2" in last.sources[0].description and last.sources[0].endOffset is not None
        metrics = last.observedMetrics["m"]
        assert metrics["n"] == last.numInputRows
        quantiles = [float(x) for x in metrics["q"]]
        assert len(quantiles) == 3 and quantiles == sorted(quantiles) and quantiles[0] > 1.7e9  # epoch seconds
        # removed, it hears nothing more (the same JVM object is taken off the bus)
        spark.streams.removeListener(listener)
        time.sleep(1.0)  # an event already on its way may still land
        heard = len(progress)
        wait_for(lambda: query.lastProgress and query.lastProgress["batchId"] >= last.batchId + 4, 60, "four more batches")
        assert len(progress) == heard
    finally:
        query.stop()

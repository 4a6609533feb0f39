"""The Spark internals `runtime/state_stores.py` reaches through py4j (the state store coordinator,
StateStoreProviderId/StateStoreId, the checkpoint's state layout), exercised on real Spark so that
a Spark upgrade that changes them fails here, loudly, and not in a rescale."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sluice.runtime import state_stores
from sluice.testing.waiting import wait_for

pytestmark = pytest.mark.spark


def test_partitions_are_listed_located_and_moved_through_the_coordinator(spark: Any, tmp_path: Path) -> None:
    rows = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    query = (rows.selectExpr("value % 50 AS k").groupBy("k").count()
             .writeStream.format("noop").outputMode("update").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        wait_for(lambda: query.lastProgress and query.lastProgress["batchId"] >= 2, timeout=60, what="three batches")
        root = state_stores.state_root(query)
        assert root is not None and root.rstrip("/").endswith("ck/state"), root
        parts = state_stores.partitions(spark, query)
        shuffle = int(spark.conf.get("spark.sql.shuffle.partitions"))
        assert [p.unit for p in parts] == [(0, i) for i in range(shuffle)]
        assert all(p.bytes > 0 for p in parts)  # delta files on disk
        # local mode: every task runs in the driver's executor, and the coordinator says so
        assert {p.executor for p in parts} == {"driver"}
        assert state_stores.executor_of("executor_10.0.0.7_12") == ("10.0.0.7", "12")
        assert state_stores.executor_of("driver") is None
        # a move goes through the coordinator's RPC (same executor: nothing changes for the query)
        state_stores.move(spark, query, (0, 0), "driver", "localhost")
        before = query.lastProgress["batchId"]
        wait_for(lambda: query.lastProgress["batchId"] >= before + 2, timeout=60, what="two more batches")
        assert query.isActive and query.exception() is None
        assert state_stores.partitions(spark, query)[0].executor == "driver"
    finally:
        query.stop()
        time.sleep(0.2)

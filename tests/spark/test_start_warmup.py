"""Warm at start (`runtime/start_warmup.py`) on real Spark: the synthetic queries run batches
through the host, then leave nothing behind: no hosted query, no checkpoint, no metric series."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.runtime import start_warmup
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_start_warmup_runs_both_queries_and_leaves_nothing_behind(host_factory: Any, tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    host = host_factory(LocalScheduler(Scheduler("cameo", capacity=2)), checkpoints=checkpoints)
    warmed = start_warmup.run(host, slots=2, seconds=12.0)
    assert warmed.batches["filter"] >= 5, warmed  # a 200 ms trigger over 12 s on a cold local JVM
    assert warmed.batches["aggregate"] >= 2, warmed
    assert 12.0 <= warmed.seconds < 30.0
    assert f"a critical filter ran {warmed.batches['filter']} batches" in warmed.sentence()
    assert host.queries == {}
    assert not (checkpoints / start_warmup.TENANT).exists() or not any((checkpoints / start_warmup.TENANT).iterdir())
    exported = host.metrics.registry.get_sample_value  # no series left for the synthetic tenant
    assert exported("sluice_runtime_query_up", {"tenant": start_warmup.TENANT, "query": "filter"}) is None
    assert exported("sluice_runtime_batches_total", {"tenant": start_warmup.TENANT, "query": "aggregate"}) is None


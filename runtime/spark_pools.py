"""FAIR scheduler pools made while the application runs, with a weight (Spark internals via py4j).

Spark reads pool weights from its allocation file once, at start; a pool first named later (by
`spark.scheduler.pool`) gets weight 1. Tenants and their quota weights arrive later, so the
runtime adds their pools itself: a `org.apache.spark.scheduler.Pool` added to the task
scheduler's root pool, exactly what Spark's `FairSchedulableBuilder` does for a pool of the file.
A pool's weight cannot change, so the caller names pools by weight. `tests/spark` checks these
internals; a Spark upgrade that moves them fails there loudly.
"""

from __future__ import annotations

from typing import Any

POOL_PROPERTY = "spark.scheduler.pool"
"""The local property naming the FAIR pool a thread's jobs run in."""


def ensure_pool(spark: Any, name: str, weight: int, fair_inside: bool = False) -> bool:
    """Add pool `name` with `weight` unless it exists; True if added. `fair_inside`: the pool's
    own jobs share it fairly (else first come, first served)."""
    if weight < 1:
        raise ValueError(f"pool weight must be a positive integer, got {weight}")
    root = spark.sparkContext._jsc.sc().taskScheduler().rootPool()
    if root.getSchedulableByName(name) is not None:
        return False
    jvm = spark.sparkContext._jvm
    modes = jvm.org.apache.spark.scheduler.SchedulingMode
    mode = modes.FAIR() if fair_inside else modes.FIFO()
    root.addSchedulable(jvm.org.apache.spark.scheduler.Pool(name, mode, 0, weight))
    return True


def pool_weight(spark: Any, name: str) -> int | None:
    """The weight of pool `name`, or None if Spark has no such pool."""
    pool = spark.sparkContext._jsc.sc().taskScheduler().rootPool().getSchedulableByName(name)
    return None if pool is None else int(pool.weight())

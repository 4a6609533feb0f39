"""Spark's locality wait, raised while state partitions move and restored after. Spark internals
reached through py4j, kept in this one module; `tests/spark/test_executors.py` fails loudly when a
Spark upgrade changes them.

A state move (`state_stores.move`) only makes the partition's next task *prefer* its new executor.
Spark holds a task for its preferred executor at most the locality wait (`spark.locality.wait`, 3 s
by default, 0 s in a pool: `operator/builders.py`), then runs it on any free core. During a shrink
the leaving executors run out of work first (their units are moving off), so their free cores took
the moved units' tasks back: a 1 GiB RocksDB shrink made 97 moves for 32 units and left 6 on the
leaving executors after 300 s (measured). While moves are pending the wait is raised (never
lowered) to a bound from the SLAs' slack (`placement.locality_wait`), and restored once none is.

What is used (pyspark 4.2.0): `SparkContext.conf` (Scala `private[spark]`, public in bytecode), the
live `SparkConf` (`getConf()` is a copy); each `TaskSetManager` reads `spark.locality.wait.process`
and `.node` from it when it is made (every stage of every batch) and when an executor is added.
Every query of the application waits alike: a task preferring a busy executor (a Kafka partition's
cached consumer) may wait up to the raised bound, which is why it comes from every query's slack.
"""

from __future__ import annotations

from typing import Any

KEYS = ("spark.locality.wait.process", "spark.locality.wait.node")
"""The levels a state task's preference passes through (an executor's own cores, then its host's:
on `local-cluster` every executor shares one host); rack and any need no wait."""
FALLBACK = "spark.locality.wait"
DEFAULT = "3s"
"""Spark's default for `FALLBACK`."""


def _conf(spark: Any) -> Any:
    return spark.sparkContext._jsc.sc().conf()


def wait_ms(spark: Any) -> dict[str, int]:
    """The wait each level uses now, in milliseconds."""
    conf = _conf(spark)
    fallback = str(conf.get(FALLBACK, DEFAULT))
    return {key: int(conf.getTimeAsMs(key, fallback)) for key in KEYS}


class Hold:
    """Raises the application's locality wait and gives its own values back."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._own: dict[str, str | None] | None = None
        """Each key's value before the first raise (None: unset), while raised."""
        self._own_ms: dict[str, int] = {}
        self.seconds: float | None = None
        """The bound in force, while raised."""

    def raise_to(self, seconds: float) -> None:
        """Hold every level's wait at `seconds`, or at the application's own where that is longer."""
        conf = _conf(self.spark)
        if self._own is None:
            self._own_ms = wait_ms(self.spark)
            self._own = {key: (str(conf.get(key)) if conf.contains(key) else None) for key in KEYS}
        for key in KEYS:
            conf.set(key, f"{max(int(seconds * 1000), self._own_ms[key])}ms")
        self.seconds = seconds

    def release(self) -> None:
        """Give the application its own waits back (nothing if not raised)."""
        if self._own is None:
            return
        conf = _conf(self.spark)
        for key, value in self._own.items():
            if value is None:
                conf.remove(key)
            else:
                conf.set(key, value)
        self._own = None
        self.seconds = None

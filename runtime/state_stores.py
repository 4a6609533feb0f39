"""Spark's state store coordinator, reached through py4j: where a query's state partitions are
active, and moving one to another executor. Spark internals, kept in this one module;
`tests/spark/test_state_stores.py` fails loudly when a Spark upgrade changes them.

What is used (pyspark 4.2.0):
- `StreamingQueryManager.stateStoreCoordinator()`: the driver's `StateStoreCoordinatorRef`;
  `getLocation(StateStoreProviderId)` gives `executor_<host>_<id>` for a store's active instance;
  `reportActiveInstance(providerId, host, executorId, otherProviderIds)` makes another executor
  the active one, and Spark's scheduler then runs that partition's next task there
  (`StateStoreRDD.getPreferredLocations`), which loads the state from the checkpoint.
- `StateStoreProviderId(StateStoreId(stateRoot, operatorId, partitionId, storeName), runId)`,
  with `stateRoot` the query's `lastExecution().checkpointLocation()` (`<checkpoint>/state`).
- The checkpoint's state layout, `<stateRoot>/<operatorId>/<partitionId>/` with one sub-directory
  per named store (a stream-stream join's four) and the default store's files directly inside,
  read through Hadoop's FileSystem, which also gives each partition's size on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .placement import Partition, Unit

DEFAULT_STORE = "default"
_NOT_STORES = {"_metadata", "SSTs"}
"""Sub-directories of a partition's directory that are no named store (RocksDB keeps its files in SSTs)."""
_PREFIX = "executor_"


def _package(spark: Any) -> Any:
    return spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state


def _coordinator(spark: Any) -> Any:
    return spark._jsparkSession.streams().stateStoreCoordinator()


def state_root(query: Any) -> str | None:
    """The query's state directory, or None before its first batch has run."""
    execution = query._jsq.streamingQuery().lastExecution()
    return None if execution is None else str(execution.checkpointLocation())


def _stores(spark: Any, root: str) -> dict[Unit, tuple[list[str], int]]:
    """Each (operator, partition) of the checkpoint: its store names and bytes on disk."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(root)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return {}
    out: dict[Unit, tuple[list[str], int]] = {}
    for op_status in fs.listStatus(path):
        if not op_status.isDirectory() or not op_status.getPath().getName().isdigit():
            continue
        for part_status in fs.listStatus(op_status.getPath()):
            name = part_status.getPath().getName()
            if not part_status.isDirectory() or not name.isdigit():
                continue
            children = fs.listStatus(part_status.getPath())
            named = [c.getPath().getName() for c in children if c.isDirectory() and c.getPath().getName() not in _NOT_STORES]
            files = any(c.isFile() for c in children)
            stores = ([DEFAULT_STORE] if files or not named else []) + sorted(named)
            size = int(fs.getContentSummary(part_status.getPath()).getLength())
            out[(int(op_status.getPath().getName()), int(name))] = (stores, size)
    return out


def _provider(spark: Any, root: str, unit: Unit, store: str, run_id: str) -> Any:
    package = _package(spark)
    jvm = spark.sparkContext._jvm
    return package.StateStoreProviderId(package.StateStoreId(root, unit[0], unit[1], store),
                                        jvm.java.util.UUID.fromString(run_id))


def executor_of(location: str | None) -> tuple[str, str] | None:
    """(host, executor id) from the coordinator's `executor_<host>_<id>`."""
    if not location or not location.startswith(_PREFIX):
        return None
    host, _, executor = location[len(_PREFIX):].rpartition("_")
    return (host, executor) if host and executor else None


@dataclass(frozen=True)
class Listing:
    """One walk of a query's state directory: its root and each unit's store names and bytes."""

    root: str
    stores: dict[Unit, tuple[list[str], int]]


def listing(spark: Any, query: Any) -> Listing | None:
    """Walk the query's state directory once (None before its first batch). A step lists once and
    moves from that listing: walking it again for each move (gigabytes of checkpoint files) let the
    next batch's stateful stage be placed before the step's last moves were reported."""
    root = state_root(query)
    return None if root is None else Listing(root, _stores(spark, root))


def partitions(spark: Any, query: Any, listed: Listing | None = None) -> list[Partition]:
    """Every state partition of a running query, where it is active and its size on disk."""
    listed = listed or listing(spark, query)
    if listed is None:
        return []
    coordinator = _coordinator(spark)
    out = []
    for unit, (stores, size) in sorted(listed.stores.items()):
        located = coordinator.getLocation(_provider(spark, listed.root, unit, stores[0], str(query.runId)))
        place = executor_of(str(located.get())) if located.isDefined() else None
        out.append(Partition(unit, place[1] if place else None, size))
    return out


def move(spark: Any, query: Any, unit: Unit, executor: str, host: str, listed: Listing | None = None) -> None:
    """Make `executor` (on `host`) the active instance of every store of `unit`."""
    listed = listed or listing(spark, query)
    if listed is None:
        return
    stores = listed.stores.get(unit, ([DEFAULT_STORE], 0))[0]
    coordinator = _coordinator(spark)
    none = spark.sparkContext._jvm.PythonUtils.toSeq([])
    for store in stores:
        coordinator.reportActiveInstance(_provider(spark, listed.root, unit, store, str(query.runId)), host, executor,
                                         none)


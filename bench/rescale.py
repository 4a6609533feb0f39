"""`sluice bench rescale`: Megaphone's figure on Spark. How a stateful query's batches fare while
its pool grows 2 -> 4 executors and shrinks 4 -> 2, under three strategies in one run:

- `all-at-once`: Spark's own behaviour. A grow only requests executors (state stays where it
  was loaded); a shrink kills the surplus at once (gracefully, as soon as each is idle).
- `executor-paced`: one executor at a time, the next after a batch of the query.
- `partition-paced`: the planner (`runtime/placement.py`) moves state partitions a few per batch
  within a budget from the SLA slack, and a leaving executor is killed once empty.

One Spark application in `local-cluster` mode (four one-core workers, executors as separate JVMs)
hosts each run's query through Sluice's runtime: a Kafka source, `groupBy(key).count()` over
`keys` distinct keys (preloaded into the topic, so the state holds them all before the change),
8 state partitions, a 1 s trigger, a files sink. A producer then writes `rate` events/s. After
`steady` seconds the target changes; the run goes on for `after` seconds. Per batch it records
Spark's `triggerExecution` and the batch's worst row latency (production to commit). At the end the sink
is read back: each key's last count against that key's events the query consumed (the source
topic read again up to the query's last end offsets) gives rows lost or doubled, per key: a key
short of its events adds to lost, a key over them to doubled, so errors of different keys cannot
cancel.

`--state-mb N` is the regime Megaphone is about, where the state dominates: each key's state also
holds a value of `value_bytes` (a pad of SHA-512 hex digits of the key, so it does not compress
away on disk), the key count and value size chosen so that keys x value is N MiB (`sized`), over
64 state partitions, with executors big enough to hold it. The state's size as Spark reports it
(rows, memory) and on disk are recorded at the change. Every run also records when state first
moved (the first partition move, or the first executor removal for the strategies that move none)
so the peak batch before it (a grow's JVM start) and from it on (state reloads) are reported
apart, and partition-paced's measured reload cost per step (`megaphone.Reload`).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sluice.api.constants import API_VERSION
from sluice.api.manifest import load_query
from sluice.runtime.session import ROCKSDB

STRATEGIES = ("all-at-once", "executor-paced", "partition-paced")
DIRECTIONS = {"grow": (2, 4), "shrink": (4, 2)}
STORES = {"default": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
          "rocksdb": ROCKSDB}
PARTITIONS = 8
STATE_PARTITIONS = 64
"""State partitions under `--state-mb` (the regime where state dominates)."""
STATE_KEYS = 1_000_000
"""Keys under `--state-mb` unless `--keys` says otherwise (fewer for small states, see `sized`)."""
MIN_VALUE_BYTES = 256
MAX_VALUE_BYTES = 16 * 1024
"""A key's value under `--state-mb`: at most this (the pad's expression grows with it)."""
HEX_PER_DIGEST = 128
"""Hex digits of one SHA-512."""
STEADY_WINDOW = 20.0
"""Seconds before the change whose batches are the steady figures (the preload's backlog is gone
by then), or half of `--steady` if that is longer: a state-heavy query's batches take many seconds."""


def steady_window(steady: float) -> float:
    """The steady window for a `--steady` of that many seconds."""
    return max(STEADY_WINDOW, steady / 2)


GRACE = 120.0
"""Seconds of graceful draining a shrink gets before its leaving executors are killed by force:
from the change, or under partition-paced from the last state partition moved (the runtime's
own default is 30 s, `--executor-grace`)."""


@dataclass(frozen=True)
class Options:
    keys: int = 1_000_000
    rate: float = 1000.0
    steady: float = 40.0
    after: float = 80.0
    sla: str = "5s"
    state_mb: int | None = None
    """`--state-mb`: the state's target size in MiB (keys x value_bytes), or None (counts only)."""
    value_bytes: int = 0
    """Bytes of each key's value in the state (0: the count alone)."""
    partitions: int = PARTITIONS
    grace: float = GRACE
    """`--grace`: seconds a shrink's leaving executors are drained gracefully before the rest go by force."""


def sized(state_mb: int, keys: int | None) -> tuple[int, int]:
    """(keys, value bytes) whose product is at least `state_mb` MiB: `keys` if given, else
    STATE_KEYS or fewer so that a value is at least MIN_VALUE_BYTES. Raises ValueError with one
    sentence when the value would be over MAX_VALUE_BYTES."""
    total = state_mb * 2**20
    if keys is None:
        keys = max(1000, min(STATE_KEYS, total // MIN_VALUE_BYTES))
    value = -(-total // keys)
    if value > MAX_VALUE_BYTES:
        raise ValueError(f"--state-mb {state_mb} over --keys {keys} needs {value} bytes a key, over the "
                         f"{MAX_VALUE_BYTES} a key's value may have; raise --keys to at least {-(-total // MAX_VALUE_BYTES)}")
    return keys, value


def pad_expression(value_bytes: int) -> str:
    """A row-local Spark SQL expression of `value_bytes` characters from the key: SHA-512 hex
    digits of the key and salted copies of it (deterministic, and not compressible by the state
    store's LZ4 the way a repeated character is)."""
    digests = [f"sha2(concat(key, '{i}'), 512)" for i in range(-(-value_bytes // HEX_PER_DIGEST))]
    return f"rpad(concat({', '.join(digests)}), {value_bytes}, '.')"


@dataclass
class Run:
    direction: str
    strategy: str
    store: str
    changed_at: float = 0.0
    batches: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since the change, triggerExecution ms) per batch."""
    latency: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since the change, the batch's worst row latency in ms) per batch."""
    migration_s: float | None = None
    new_executor_share: float | None = None
    moves: int = 0
    moved_bytes: int = 0
    expected: int = 0
    counted: int = 0
    lost: int | None = None
    """Events short, summed over the keys short of theirs (None: a run from before the per-key check)."""
    doubled: int | None = None
    """Events over, summed over the keys over theirs."""
    ready_s: float | None = None
    """Seconds after the change when the executor count first reached the target."""
    warm_s: float | None = None
    """Seconds after the change when every new executor had run a task (a grow; None if one never did
    within the run)."""
    warm_up_s: list[float] = field(default_factory=list)
    """Each new executor's warm-up job, seconds (partition-paced grows: `executor_warmup`)."""
    state_moved_s: float | None = None
    """Seconds after the change when state first moved: the first partition move (partition-paced)
    or the first executor removal (the others); None if it never did (their grows)."""
    state_rows: int | None = None
    state_memory_bytes: int | None = None
    """Spark's `memoryUsedBytes` of the state operators at the change (RocksDB: its own memory use)."""
    state_disk_bytes: int | None = None
    """The state partitions' bytes in the checkpoint at the change."""
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(seconds since the change, executors, pending state moves) about every second after it."""
    on_leaving: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the change, state units on executors chosen to leave) at each sample: the
    mover's placement from its last walk of the state directory (partition-paced shrinks)."""
    sla_s: float | None = None
    """The query's latency SLA in seconds (None: a run from before `--sla`, at 5 s)."""
    checkpoint_mb: float | None = None
    """The query's checkpoint at the run's end, in MiB (deleted after the sink check)."""
    steady_window: float = STEADY_WINDOW
    """Seconds before the change whose batches are the steady figures (`steady_window`)."""
    reloads: list[tuple[int, int, float, float]] = field(default_factory=list)
    """(units, bytes, seconds, seconds its budget allowed) of each partition-paced step measured
    after the change (`megaphone.Reload`)."""
    step_times: list[tuple[float, float, int]] = field(default_factory=list)
    """(seconds listing the state, seconds reporting the moves, moves) of each partition-paced
    step that moved after the change (`megaphone.StateMover.timings`)."""


def manifest(bootstrap: str, topic: str, sink: Path, sla: str, value_bytes: int = 0,
             partitions: int = PARTITIONS) -> dict[str, Any]:
    """The benchmark's query: each key's count, and with `value_bytes` a value of that size kept
    in its state (the greatest pad seen, always the same for one key); the sink gets only its
    length (a pad no output reads would be pruned from the aggregation, and from the state)."""
    from sluice.testing.load import EVENT_SCHEMA

    pipeline: list[dict[str, Any]] = [{"groupBy": ["key"]}, {"aggregate": [{"fn": "count", "name": "n"}]}]
    if value_bytes > 0:
        pipeline = [{"withColumn": {"name": "pad", "expr": pad_expression(value_bytes)}}, {"groupBy": ["key"]},
                    {"aggregate": [{"fn": "count", "name": "n"}, {"fn": "max", "column": "pad", "name": "pad"}]},
                    {"select": ["key", "n", "length(pad) AS pad_bytes"]}]  # unread, Spark would prune pad from the state
    return {"apiVersion": API_VERSION, "kind": "StreamingQuery", "metadata": {"name": "state", "namespace": "bench"},
            "spec": {"pool": "bench",
                     "source": {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic, "startingOffsets": "earliest",
                                "schema": EVENT_SCHEMA},
                     "pipeline": pipeline,
                     "sink": {"type": "files", "path": str(sink), "format": "json"},
                     "sla": {"latencyTarget": sla}, "trigger": {"interval": "1s"},
                     "resources": {"shufflePartitions": partitions}}}


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def run_once(direction: str, strategy: str, store: str, options: Options, spark: Any, broker: Any, folder: Path,
             log: Callable[[str], None]) -> Run:
    from sluice.runtime import state_stores
    from sluice.runtime.executors import ExecutorScaler
    from sluice.runtime.host import QueryHost
    from sluice.testing.load import LoadPlan, generate

    shutil.rmtree(folder, ignore_errors=True)
    start, end = DIRECTIONS[direction]
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", STORES[store])
    host = QueryHost(spark, folder / "checkpoints", None)
    scaler = ExecutorScaler.for_host(host, grace=options.grace, interval=0.25, moving=strategy == "partition-paced",
                                     paced=strategy != "all-at-once")
    mover = scaler.mover
    result = Run(direction, strategy, store, steady_window=steady_window(options.steady))
    scaler.set_target(start)
    _wait(lambda: scaler.state().current == start, 120, f"{start} executors")
    topic = broker.create_topic(f"rescale-{uuid.uuid4().hex[:8]}", partitions=4)
    preload_rate = min(50_000.0, options.keys / 2)  # this machine's producer writes ~150,000 events/s at most
    # every key once, however slowly the producer keeps pace (a time-bounded preload came out
    # 4,377 events short on 2026-11-29 and failed the run), within a generous deadline
    deadline = time.time() + 3 * options.keys / preload_rate + 60
    preload = generate(LoadPlan(topic, rate=preload_rate, keys=options.keys, count=options.keys), broker.bootstrap,
                       stop=lambda: time.time() > deadline)
    if preload["sent"] < options.keys:
        raise RuntimeError(f"the producer preloaded {preload['sent']} of {options.keys} events")
    stop = threading.Event()
    steady = threading.Thread(target=generate, args=(LoadPlan(topic, options.rate, keys=options.keys), broker.bootstrap),
                              kwargs={"stop": stop.is_set}, daemon=True)
    query = load_query(manifest(broker.bootstrap, topic, folder / "sink", options.sla, options.value_bytes, options.partitions))
    hosted = host.add(query)
    try:
        _wait(lambda: hosted.batches >= 1 or hosted.phase == "Failed", 300 + (options.state_mb or 0),
              "the state loaded (first batch)")
        if hosted.phase == "Failed":
            raise RuntimeError(f"the benchmark's query failed: {hosted.message}")
        steady.start()
        before = {e.id for e in scaler.executors()}
        origin = time.time() + options.steady
        recorded: set[int] = set()

        def sample() -> None:
            with host.lock:
                timelines = sorted(hosted.timelines.items())
            for batch, timeline in timelines:
                took = timeline.durations_ms.get("triggerExecution")
                if batch in recorded or took is None or timeline.latency is None:
                    continue
                recorded.add(batch)
                at = (timeline.committed or time.time()) - origin
                result.batches.append((round(at, 2), round(float(took), 1)))
                result.latency.append((round(at, 2), round(timeline.latency * 1000, 1)))

        while time.time() < origin:
            sample()
            time.sleep(1)
        with host.lock:
            result.state_rows, result.state_memory_bytes = hosted.state_rows, hosted.state_bytes
        result.state_disk_bytes = sum(p.bytes for p in state_stores.partitions(spark, hosted.handle))
        moves_before = mover.moves if mover else 0
        reloads_before = len(mover.reloads) if mover else 0
        timings_before = len(mover.timings) if mover else 0
        result.changed_at = time.time()
        scaler.set_target(end)
        log(f"  {direction}/{strategy}/{store}: target {start} -> {end}")
        result.sla_s = hosted.spec.latency_target
        warning = no_slack(result.latency, result.sla_s, result.steady_window)
        if warning:
            log(f"  {direction}/{strategy}/{store}: {warning}")
        while time.time() < origin + options.after:
            sample()
            state = scaler.state()
            since = round(time.time() - origin, 1)
            if result.ready_s is None and state.current == end:
                result.ready_s = since
            if direction == "grow" and result.warm_s is None and result.ready_s is not None:
                fresh = [e for e in scaler.executors() if e.id not in before]
                if fresh and all(e.completed_tasks > 0 for e in fresh):
                    result.warm_s = since
            if result.state_moved_s is None and (state.stateMoves > moves_before or state.removed):
                result.state_moved_s = since
            if int(time.time() - origin) % 5 == 0:
                log(f"    t={time.time() - origin:5.1f}s executors={state.current} leaving={state.leaving} "
                    f"pending={state.pendingMoves} moves={state.stateMoves} placement={state.placement.get(query.key)}")
            result.samples.append((since, state.current, state.pendingMoves if mover else 0))
            if mover and direction == "shrink":
                going = set(state.leaving) | set(state.removing)
                held = state.placement.get(query.key, {})
                result.on_leaving.append((since, sum(n for e, n in held.items() if e in going)))
            time.sleep(1)
        result.migration_s = migration_end(result.samples, end)
        if direction == "grow":
            new = {e.id for e in scaler.executors()} - before
            parts = state_stores.partitions(spark, hosted.handle)
            result.new_executor_share = round(sum(1 for p in parts if p.executor in new) / max(len(parts), 1), 3)
        result.warm_up_s = sorted(took for e, took in scaler.warm_ups.items() if e not in before and took is not None)
        result.moves = mover.moves if mover else 0
        result.moved_bytes = mover.moved_bytes if mover else 0
        result.reloads = [(r.units, r.bytes, round(r.seconds, 3), round(r.allowed, 3))
                          for r in (mover.reloads[reloads_before:] if mover else [])]
        result.step_times = list(mover.timings[timings_before:]) if mover else []
    finally:
        handle = hosted.handle
        stop.set()
        host.stop_all()
        scaler.stop()
        steady.join(timeout=30)
    result.expected, result.counted, mismatched = _sink_check(spark, handle, folder / "sink", broker.bootstrap,
                                                              host.checkpoint(query.key))
    # the checkpoint is scratch once the sink is checked, and large: with 1 GiB of RocksDB state
    # the benchmark's folder grew to 34 GB in four runs (2026-11-29; checkpoints, executors' work
    # directories and the broker's log, not measured apart), more than 12 runs' disk would hold
    result.checkpoint_mb = _mb(folder_bytes(folder / "checkpoints"))
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    result.lost, result.doubled = per_key(mismatched)
    log(f"  {direction}/{strategy}/{store}: {len(result.batches)} batches, migration {result.migration_s} s, "
        f"expected {result.expected} counted {result.counted}, lost {result.lost} doubled {result.doubled} (per key)")
    return result


def offsets_at(checkpoint: Path, batch_id: int) -> dict[str, dict[str, int]] | None:
    """The end offsets of batch `batch_id` from the query's offset log (topic -> partition ->
    offset; pure but for the read), or None when the log has no such batch. Spark writes a batch's
    entry before it runs: a line `v1`, one of metadata, then one per source (`-` for none)."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    ends: dict[str, dict[str, int]] = {}
    for line in lines[2:]:
        if line.strip() in ("", "-"):
            continue
        for topic, partitions in json.loads(line).items():
            ends.setdefault(topic, {}).update({str(k): int(v) for k, v in partitions.items()})
    return ends


def _sink_check(spark: Any, handle: Any, sink: Path, bootstrap: str,
                checkpoint: Path | None = None) -> tuple[int, int, list[tuple[int, int]]]:
    """(events the query consumed by the newest batch at the sink, the sum of each key's last count
    there, (consumed, counted) of every key where the two differ). A key's consumed events are the
    source topic's records with that key up to that batch's end offsets (its offset log entry; the
    last progress's when the log has none), read again. The last progress alone is not enough: a
    batch stopped after its sink's write and before its commit leaves its output at the sink
    (2026-11-30: a RocksDB grow showed 2,221 events "doubled" that way, the counts of the batch
    after the last progress judged against the offsets before it)."""
    from pyspark.sql import functions as f

    rows = spark.read.json(str(sink))  # batch_id=<id>/ directories: a partition column
    latest = rows.groupBy("key").agg(f.max_by("n", "batch_id").alias("counted"))
    counted = int(latest.agg(f.sum("counted")).collect()[0][0] or 0)
    newest = rows.agg(f.max("batch_id")).collect()[0][0]
    ends = offsets_at(checkpoint, int(newest)) if checkpoint is not None and newest is not None else None
    if ends is None:
        ends = {}
        progress = handle.lastProgress if handle is not None else None
        for source in (progress or {}).get("sources", []):
            end = source["endOffset"]
            for topic, partitions in (json.loads(end) if isinstance(end, str) else end).items():
                ends.setdefault(topic, {}).update({str(k): int(v) for k, v in partitions.items()})
    consumed = sum(v for partitions in ends.values() for v in partitions.values())
    if not ends:
        return consumed, counted, [(0, counted)] if counted else []
    produced = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", ",".join(ends)).option("startingOffsets", "earliest")
                .option("endingOffsets", json.dumps(ends)).load()
                .selectExpr("CAST(key AS STRING) AS key").groupBy("key").agg(f.count("*").alias("consumed")))
    both = produced.join(latest, "key", "full_outer").fillna(0, ["consumed", "counted"])
    differ = both.where("consumed != counted").select("consumed", "counted").collect()
    return consumed, counted, [(int(r["consumed"]), int(r["counted"])) for r in differ]


def migration_end(samples: list[tuple[float, int, int]], target: int) -> float | None:
    """When the migration ended: the first sample after the last one that still had executors to
    start or stop or state to move, once at least 2 s after the change; None if it never ended
    within the run (pure). The first sample that looked done is not enough: the state mover
    counts pending moves at its next step, after a batch, so the sample right after new
    executors registered said 0 (2026-11-29: a grow declared done at 13.8 s moved state until 76 s)."""
    unsettled = [t for t, executors, pending in samples if executors != target or pending > 0]
    after = [t for t, _, _ in samples if t >= 2 and (not unsettled or t > unsettled[-1])]
    return after[0] if after else None


def left_at_removal(run: Run) -> int | None:
    """A shrink's state units still on the leaving executors when they went (pure): the units they
    held at the last sample before the executor count reached the target. Above 0, the grace ran
    out (`--grace`) and the rest were killed by force, their state reloaded at once. Runs from
    before `on_leaving` was sampled count pending moves instead, which also holds balance moves
    between staying executors (2026-11-29: a graceful RocksDB shrink showed 1). None for a grow,
    a strategy that moves no state first (it counts none), a run without samples, or one whose
    count never reached the target."""
    if run.direction != "shrink" or run.strategy != "partition-paced" or not run.samples:
        return None
    target = run.samples[-1][1]
    held = dict(run.on_leaving)
    left = 0
    for since, executors, pending in run.samples:
        if executors <= target:
            return left
        left = held.get(since, 0) if run.on_leaving else pending
    return None


def no_slack(latency: list[tuple[float, float]], sla_s: float, window: float = STEADY_WINDOW) -> str | None:
    """One sentence when the steady window's latency p99 leaves the SLA no slack (pure): then
    partition-paced's budget is 0 and it moves no state, which the run should say, not hide."""
    steady = _p99(_steady(latency, window))
    if steady is None or steady < sla_s * 1000:
        return None
    return (f"the steady latency p99 {steady / 1000:.1f} s is at or over the {sla_s:g} s SLA: partition-paced has no "
            f"slack and moves no state; an --sla above it gives it some")


def _steady(points: list[tuple[float, float]], window: float) -> list[float]:
    """The values of the (seconds since the change, ms) points in the steady window before it."""
    return [ms for t, ms in points if -window <= t < 0]


def folder_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 if it is absent)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def per_key(mismatched: list[tuple[int, int]]) -> tuple[int, int]:
    """(lost, doubled) from each mismatched key's (consumed, counted): a key short of its events
    adds the shortfall to lost, a key over them the excess to doubled (pure)."""
    lost = sum(max(consumed - counted, 0) for consumed, counted in mismatched)
    doubled = sum(max(counted - consumed, 0) for consumed, counted in mismatched)
    return lost, doubled


def figures(run: Run) -> dict[str, Any]:
    steady = _steady(run.batches, run.steady_window)
    during_end = run.migration_s if run.migration_s is not None else max((t for t, _ in run.batches), default=0.0)
    # a batch counts as during the migration if it ran in it: it ended after the change and began
    # before the migration's end (+5 s); `t` is when it committed
    ran = {t for t, ms in run.batches if t >= 0 and t - ms / 1000 <= during_end + 5}
    during = [(t, ms) for t, ms in run.batches if t in ran]
    steady_p99 = _p99(steady)
    peak = max((ms for _, ms in during), default=None)
    # a batch that began before state first moved paid for the change itself (a grow's JVM start),
    # one that began after it may have reloaded state
    moved = run.state_moved_s
    before = [ms for t, ms in during if moved is None or t - ms / 1000 < moved]
    after = [ms for t, ms in during if moved is not None and t - ms / 1000 >= moved]
    peak_start, peak_moving = max(before, default=None), max(after, default=None)
    lat_steady = _p99(_steady(run.latency, run.steady_window))
    lat_during = [ms for t, ms in run.latency if t in ran]  # latency is recorded at its batch's commit
    return {"sla_s": run.sla_s,
            "steady_slack_s": round(run.sla_s - lat_steady / 1000, 2) if run.sla_s is not None and lat_steady else None,
            "steady_p99_ms": steady_p99, "peak_batch_ms": peak,
            "peak_over_steady": round(peak / steady_p99, 2) if peak and steady_p99 else None,
            "steady_latency_p99_ms": lat_steady, "peak_latency_p99_ms": _p99(lat_during),
            "peak_before_state_moved_ms": peak_start, "peak_state_moving_ms": peak_moving,
            "peak_before_state_moved_over_steady": _ratio(peak_start, steady_p99),
            "peak_state_moving_over_steady": _ratio(peak_moving, steady_p99),
            "ready_s": run.ready_s, "warm_s": run.warm_s, "warm_up_s": run.warm_up_s, "state_moved_s": moved,
            "migration_s": run.migration_s, "units_left_at_removal": left_at_removal(run),
            "new_executor_share": run.new_executor_share, "moves": run.moves,
            "moved_mb": round(run.moved_bytes / 2**20, 1),
            "checkpoint_mb": run.checkpoint_mb,
            "state_rows": run.state_rows, "state_memory_mb": _mb(run.state_memory_bytes), "state_disk_mb": _mb(run.state_disk_bytes),
            "partition_load_s": [round(seconds / units, 3) for units, _, seconds, _ in run.reloads if units],
            "steps_over_budget": sum(1 for *_, seconds, allowed in run.reloads if seconds > allowed),
            "steps_measured": len(run.reloads),
            **({"lost": run.lost, "doubled": run.doubled, "checked": "per key"} if run.lost is not None else
               {"lost": max(run.expected - run.counted, 0), "doubled": max(run.counted - run.expected, 0),
                "checked": "net (a run from before the per-key check)"})}


def _ratio(value: float | None, steady: float | None) -> float | None:
    return round(value / steady, 2) if value and steady else None


def _mb(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def table_text(results: dict[str, Any]) -> str:
    lines = ["| store | direction | strategy | steady p99 batch | peak batch | peak / steady | peak before / after state moved | "
             "latency p99 steady / peak | SLA (steady slack) | ready / warm / state moved | migration | new executors' share | moves (MiB) | state MiB (memory / disk) | "
             "lost | doubled |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for store, directions in results.items():
        for direction, strategies in directions.items():
            for strategy, r in strategies.items():
                share = "" if r["new_executor_share"] is None else f"{r['new_executor_share']:.0%}"
                lines.append(f"| {store} | {direction} | {strategy} | {r['steady_p99_ms']} ms | {r['peak_batch_ms']} ms | "
                             f"{r['peak_over_steady']}x | {_split(r)} | {r['steady_latency_p99_ms']} / {r['peak_latency_p99_ms']} ms | "
                             f"{_sla(r)} | {_times(r)} | {_migration(r)} | {share} | {r['moves']} ({r.get('moved_mb', 0)}) | "
                             f"{r.get('state_memory_mb')} / {r.get('state_disk_mb')} | {r['lost']} | {r['doubled']} |")
    return "\n".join(lines)


def _migration(r: dict[str, Any]) -> str:
    """The migration's length, or that it had not ended when the run did (`migration_end` None),
    and the state units a shrink's leaving executors still held when they went."""
    text = "not over at the end" if r["migration_s"] is None else f"{r['migration_s']} s"
    left = r.get("units_left_at_removal")
    return text + (f" ({left} units left at the removal)" if left else "")


def _sla(r: dict[str, Any]) -> str:
    """'5 s (2.1 s)': the SLA and its slack over the steady latency p99 ('-' for runs from before `--sla`)."""
    if r.get("sla_s") is None:
        return "-"
    slack = r.get("steady_slack_s")
    return f"{r['sla_s']:g} s ({'-' if slack is None else f'{slack:g} s'})"


def _times(r: dict[str, Any]) -> str:
    """Seconds after the change: executors at the target / new ones warm / state first moved."""
    return " / ".join("-" if r.get(k) is None else f"{r[k]} s" for k in ("ready_s", "warm_s", "state_moved_s"))


def _split(r: dict[str, Any]) -> str:
    """'before / after' peaks over the steady p99 (runs from before the split show '-')."""
    def shown(ratio: float | None) -> str:
        return "-" if ratio is None else f"{ratio}x"

    return f"{shown(r.get('peak_before_state_moved_over_steady'))} / {shown(r.get('peak_state_moving_over_steady'))}"


def plot(runs: list[Run], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.2 * len(runs)), sharex=True, squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        # from the steady window on: the first batch reads the preloaded keys and would set the scale
        batches = [(t, ms) for t, ms in run.batches if t >= -run.steady_window]
        latency = [(t, ms) for t, ms in run.latency if t >= -run.steady_window]
        ax.plot([t for t, _ in batches], [ms for _, ms in batches], label="batch (ms)")
        ax.plot([t for t, _ in latency], [ms for _, ms in latency], label="worst row latency (ms)", alpha=0.7)
        end = run.migration_s if run.migration_s is not None else max((t for t, _ in run.batches), default=0.0)
        ax.axvspan(0, end, color="tab:orange", alpha=0.15, label="migration")
        ax.set_title(f"{run.store}, {run.direction}, {run.strategy}", fontsize=9)
        ax.set_ylabel("ms")
        ax.legend(loc="upper left", fontsize=7)
    axes[-1, 0].set_xlabel("seconds since the target changed")
    fig.tight_layout()
    fig.savefig(out / "rescale.png", dpi=110)
    plt.close(fig)


def run(options: Options, strategies: list[str], stores: list[str], out: Path, log: Callable[[str], None],
        directions: Sequence[str] = tuple(DIRECTIONS)) -> dict[str, Any]:
    from sluice.runtime.runner import stop_session
    from sluice.runtime.session import PROVIDER, SessionConfig, build_session, local_cluster
    from sluice.testing.kafka import KafkaBroker

    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "kafka", ignore_errors=True)
    broker = KafkaBroker(out / "kafka").start()
    stop_session()
    # the default store keeps its state in the executors' heaps at about twice the values' bytes
    # (481 MiB in memory for --state-mb 256, 2026-11-29): on 2 executors each holds about --state-mb,
    # and twice that while a batch builds its partitions' next versions from the last
    executor_mb = 512 + 2 * (options.state_mb or 0)
    runs: list[Run] = []
    started = time.time()
    spark = None
    try:
        for store in stores:  # a session per store: the filesystem the session sets up depends on it
            if spark is not None:
                spark.stop()
            spark = build_session(SessionConfig(master=local_cluster(4, 1, executor_mb + 512), kafka=True,
                                                workdir=out / "spark",
                                                extra={"spark.executor.memory": f"{executor_mb}m", PROVIDER: STORES[store]}))
            for direction in directions:
                for strategy in strategies:
                    log(f"{store}, {direction}, {strategy} ({time.time() - started:.0f}s elapsed)")
                    runs.append(run_once(direction, strategy, store, options, spark, broker,
                                         out / "runs" / f"{store}-{direction}-{strategy}", log))
                    (out / "partial.json").write_text(json.dumps([asdict(r) for r in runs]))  # kept if a later run fails
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    return report(runs, options, round(time.time() - started), out)


def report(runs: list[Run], options: Options, wall_seconds: int, out: Path) -> dict[str, Any]:
    """Figures, table and plot from the recorded runs: `results.json` keeps the runs, so
    `--from-results` renders them again without running anything."""
    results: dict[str, Any] = {}
    for r in runs:
        results.setdefault(r.store, {}).setdefault(r.direction, {})[r.strategy] = figures(r)
    document = {"options": asdict(options), "wall_seconds": wall_seconds, **results.get(runs[0].store, {}),
                "stores": results, "runs": [asdict(r) for r in runs]}
    (out / "results.json").write_text(json.dumps(document, indent=1))
    (out / "summary.txt").write_text(table_text(results) + "\n")
    plot(runs, out)
    return document


def rerender(results: Path, out: Path) -> dict[str, Any]:
    """`report` again from an earlier run's results.json."""
    document = json.loads(results.read_text())
    runs = [Run(**{**r, "batches": [tuple(b) for b in r["batches"]], "latency": [tuple(x) for x in r["latency"]],
                   "reloads": [tuple(x) for x in r.get("reloads", [])],
                   "step_times": [tuple(x) for x in r.get("step_times", [])],
                   "samples": [tuple(x) for x in r.get("samples", [])],
                   "on_leaving": [tuple(x) for x in r.get("on_leaving", [])]})
            for r in document["runs"]]
    out.mkdir(parents=True, exist_ok=True)
    return report(runs, Options(**document["options"]), document["wall_seconds"], out)


"""`sluice bench calibrate`: the machine speed a benchmark ran at, from a fixed reference of about a minute.

Two runs of the same code on a small shared machine can differ more than the goals they test
(docs/performance.md, "How a figure is judged"). A figure therefore names the machine speed it was measured at: the same
three fixed workloads, timed before each benchmark and kept in its results.json (`"sitting"`):

- `python_ms`: a pure-Python loop (the CPU a scheduler or a load generator gets);
- `spark_start_s` and `spark_batch_ms`: a local[2] Spark session's start, then the median
  `triggerExecution` of micro-batches of 200 generated rows each into a noop sink (a fresh JVM, in a child
  process, as every benchmark's Spark runs);
- `kafka_start_s` and `kafka_rtt_ms`: a KRaft broker's start, then the median time from producing
  one record (acks=all) to a consumer reading it.

Each is compared with the reference kept in `bench/results/calibrate-reference.json` (`--save-reference`
writes it); a benchmark prints one line when any is more than `OFF` away from it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parent / "results" / "calibrate-reference.json"
"""The reference speed the project's published figures are compared with."""
OFF = 0.20
"""How far (as a fraction of the reference) a timing may be before a benchmark says so."""
TIMINGS = ("python_ms", "spark_start_s", "spark_batch_ms", "kafka_start_s", "kafka_rtt_ms")
"""The timings of one calibration, each lower-is-faster."""
PYTHON_REPEATS = 7
PYTHON_LOOP = 4_000_000
"""Iterations of the pure-Python loop timed (about half a second here)."""
SPARK_BATCHES = 40
"""Micro-batches timed (after SPARK_WARM batches left out for the JIT)."""
SPARK_WARM = 10
KAFKA_TRIPS = 100


def python_loop() -> float:
    """Milliseconds of a fixed pure-Python workload (median of PYTHON_REPEATS)."""
    times = []
    for _ in range(PYTHON_REPEATS):
        start = time.perf_counter()
        total = 0
        for i in range(PYTHON_LOOP):
            total += (i * i) % 7
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def spark_loop() -> dict[str, float]:
    """In a child process: a local[2] session's start and its micro-batches' median triggerExecution."""
    proc = subprocess.run([sys.executable, "-m", "sluice.bench.calibrate"], capture_output=True, text=True,
                          timeout=300, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = " / ".join(proc.stderr.strip().splitlines()[-2:])
        raise RuntimeError(f"the calibration's Spark loop failed (exit {proc.returncode}): {tail}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def _spark_child() -> None:
    from sluice.runtime.session import SessionConfig, build_session

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="sluice-calibrate-"))
    spark = build_session(SessionConfig(master="local[2]", scheduling="FIFO", workdir=workdir,
                                        app_name="sluice-calibrate"))
    spark.range(1).count()  # the session is up once it has run a job
    start_s = time.monotonic() - started
    # rate-micro-batch: every trigger has rows (the `rate` source's offsets move once a second)
    handle = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 200).option("numPartitions", 2).load()
              .selectExpr("value % 97 AS k", "value").where("k > 3")
              .writeStream.format("noop").option("checkpointLocation", str(workdir / "checkpoint"))
              .trigger(processingTime="100 milliseconds").start())
    deadline = time.monotonic() + 120
    while len(handle.recentProgress) < SPARK_WARM + SPARK_BATCHES and time.monotonic() < deadline:
        time.sleep(0.2)
    progress = handle.recentProgress[SPARK_WARM:SPARK_WARM + SPARK_BATCHES]
    handle.stop()
    spark.stop()
    if not progress:
        raise SystemExit("the calibration's micro-batches did not run in 120 s")
    batch = statistics.median(float(p.durationMs["triggerExecution"]) for p in progress)
    print(json.dumps({"spark_start_s": round(start_s, 2), "spark_batch_ms": batch}), flush=True)


def kafka_loop() -> dict[str, float]:
    """A KRaft broker's start, then the median produce-to-consume time of one record."""
    from confluent_kafka import Consumer, Producer

    from sluice.testing.kafka import KafkaBroker

    started = time.monotonic()
    broker = KafkaBroker(Path(tempfile.mkdtemp(prefix="sluice-calibrate-kafka-"))).start()
    start_s = time.monotonic() - started
    try:
        topic = broker.create_topic(f"calibrate-{uuid.uuid4().hex[:8]}")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"calibrate-{uuid.uuid4()}",
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5})
        consumer.subscribe([topic])
        trips: list[float] = []
        deadline = time.monotonic() + 120
        while len(trips) < KAFKA_TRIPS + 5 and time.monotonic() < deadline:
            sent = time.perf_counter()
            producer.produce(topic, b"x")
            producer.flush(10)
            while time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    trips.append((time.perf_counter() - sent) * 1000)
                    break
        consumer.close()
        del producer  # its connections closed before the broker goes
    finally:
        broker.stop()
    if len(trips) <= 5:
        raise RuntimeError("the calibration's Kafka round trips did not complete in 120 s")
    return {"kafka_start_s": round(start_s, 2), "kafka_rtt_ms": statistics.median(trips[5:])}


def measure(log: Any = print) -> dict[str, Any]:
    """The machine speed now: every timing of TIMINGS, the load average before, when and where."""
    load = os.getloadavg()
    at = datetime.now(UTC).isoformat(timespec="seconds")
    log("calibrating the machine speed (about a minute): a Python loop, Spark micro-batches, Kafka round trips")
    timings: dict[str, float] = {"python_ms": python_loop()}
    timings.update(spark_loop())
    timings.update(kafka_loop())
    return {"at": at, "host": os.uname().nodename, "cores": os.cpu_count(), "loadavg_1m": round(load[0], 2),
            **{k: round(timings[k], 2) for k in TIMINGS}}


def reference(path: Path = REFERENCE) -> dict[str, Any] | None:
    """The kept reference, or None when there is none."""
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded


def compare(speed: dict[str, Any], ref: dict[str, Any] | None) -> dict[str, float]:
    """Each timing as a ratio to the reference's (above 1: slower than the reference)."""
    if not ref:
        return {}
    return {k: round(speed[k] / ref[k], 2) for k in TIMINGS if k in speed and ref.get(k)}


def warning(ratios: dict[str, float], ref: dict[str, Any] | None) -> str | None:
    """One line when a timing is more than OFF away from the reference, else None."""
    off = {k: r for k, r in ratios.items() if abs(r - 1) > OFF}
    if not ref or not off:
        return None
    parts = ", ".join(f"{k} {r:.2f}x" for k, r in off.items())
    return (f"this machine is more than {OFF:.0%} off the reference of {ref.get('at', '?')} ({parts}): "
            "its figures are not comparable with the published ones as they stand.")


def repeated(times: int, log: Any = print) -> dict[str, Any]:
    """`measure` `times` times: each timing's median, and its (min, max) under `"spread"`."""
    runs = [measure(log) for _ in range(times)]
    if times == 1:
        return runs[0]
    return {**runs[-1], **{k: round(statistics.median(r[k] for r in runs), 2) for k in TIMINGS},
            "repeats": times, "spread": {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in TIMINGS}}


def speed(log: Any = print, times: int = 1) -> dict[str, Any]:
    """Measure the machine speed, compare it with the reference, say so in one line when it is off."""
    now = repeated(times, log)
    ref = reference()
    ratios = compare(now, ref)
    line = warning(ratios, ref)
    if line:
        log(line)
    return {**now, "reference_at": ref.get("at") if ref else None, "vs_reference": ratios}


def render(result: dict[str, Any]) -> str:
    ratios = result.get("vs_reference", {})
    spread = result.get("spread", {})
    lines = [f"{'timing':16} {'now':>10} {'vs reference':>13} {'spread':>17}"]
    for k in TIMINGS:
        ratio = f"{ratios[k]:.2f}x" if k in ratios else "-"
        low_high = f"{spread[k][0]:.2f}-{spread[k][1]:.2f}" if k in spread else "-"
        lines.append(f"{k:16} {result[k]:>10.2f} {ratio:>13} {low_high:>17}")
    lines.append(f"at {result['at']} on {result['host']} ({result['cores']} cores, load {result['loadavg_1m']}); "
                 f"reference {result.get('reference_at') or 'none'}")
    return "\n".join(lines)


if __name__ == "__main__":
    _spark_child()

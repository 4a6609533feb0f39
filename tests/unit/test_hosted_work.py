"""The work fit of a hosted query keeps a burst's large batches after they leave the recent ones,
so its fixed and per-row task cost stay separable (what-if's costs, `status.costs`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sluice.api.query import StreamingQuery
from sluice.runtime.critical_path import BatchTimeline, StageSpan
from sluice.runtime.hosted import BAND_LOG, LARGEST_KEPT, RECENT_BATCHES, HostedQuery, query_spec
from sluice.runtime.latency import LatencyWindow

ROOT = Path(__file__).resolve().parents[2]
FIXED, PER_ROW = 0.02, 10e-6  # task CPU seconds: 20 ms + 10 µs a row


def hosted() -> HostedQuery:
    query = StreamingQuery.model_validate(yaml.safe_load((ROOT / "examples" / "hourly-revenue.yaml").read_text()))
    return HostedQuery(query, LatencyWindow(query.spec.sla.latencyTarget.seconds), query_spec(query))


def run_batch(q: HostedQuery, batch_id: int, rows: int, cold: bool = False) -> None:
    """A finished batch as the listener and the stage poller leave it."""
    t = q.timeline(batch_id)
    t.rows, t.cold, t.tasks = float(rows), cold, 2
    t.cpu_seconds = FIXED + PER_ROW * rows
    t.run_seconds = 1.5 * t.cpu_seconds
    t.durations_ms = {"triggerExecution": 100.0 + t.run_seconds * 1000, "commitOffsets": 5.0}
    t.stages = [StageSpan("s0", 0.0, 0.01, 0.05 + t.run_seconds)]
    t.committed = float(batch_id)


def test_a_burst_s_batches_stay_in_the_work_fit_after_they_leave_the_recent_window() -> None:
    q = hosted()
    batch = 0
    for rows in [50_000] * 3 + [200_000] * 12:  # the cold start, then a burst of ten batches and two more
        run_batch(q, batch, rows, cold=batch < 3)
        batch += 1
    for _ in range(RECENT_BATCHES):  # steady: every batch alike, the burst's ones pushed out
        run_batch(q, batch, 5_000)
        batch += 1
    assert all(t.rows == 5_000 for t in q.timelines.values())
    # the largest warm ones are kept (the cold ones, though as large as some, never)
    assert len(q.largest) == LARGEST_KEPT and all(t.rows == 200_000 and not t.cold for t in q.largest)
    costs = q.costs()
    assert costs is not None and costs.task_cpu_ms is not None and costs.task_cpu_per_row_us is not None
    # a line through both sizes: the true 20 ms + 10 µs a row, where the steady batches alone would
    # take all of 70 ms a batch as growing with the rows (14 µs a row)
    assert costs.task_cpu_ms == pytest.approx(FIXED * 1000, rel=1e-6)
    assert costs.task_cpu_per_row_us == pytest.approx(PER_ROW * 1e6, rel=1e-6)
    assert f"({LARGEST_KEPT} of them the run's largest, older)" in costs.fit and "a line through" in costs.fit
    recent_only = hosted()
    for i in range(RECENT_BATCHES):
        run_batch(recent_only, i, 5_000)
    alike = recent_only.costs()
    assert alike is not None and alike.task_cpu_ms == 0.0
    assert alike.task_cpu_per_row_us == pytest.approx((FIXED + PER_ROW * 5_000) / 5_000 * 1e6, rel=1e-6)
    assert "older" not in alike.fit


def test_a_larger_batch_takes_the_place_of_the_smallest_kept_one() -> None:
    q = hosted()
    sizes = [1_000 * (i + 1) for i in range(LARGEST_KEPT)] + [500, 100_000]
    for i, rows in enumerate(sizes):
        leaving = BatchTimeline(rows=float(rows), cpu_seconds=0.1, durations_ms={"triggerExecution": 200.0},
                                stages=[StageSpan("s0", 0.0, 0.0, 0.1)], committed=float(i))
        q.keep_if_largest(leaving)
    assert sorted(int(t.rows) for t in q.largest) == sorted([*sizes[1:LARGEST_KEPT], 100_000])
    q.keep_if_largest(BatchTimeline(rows=1e6, cpu_seconds=0.0))  # without task CPU: nothing to fit
    q.keep_if_largest(BatchTimeline(rows=1e6, cpu_seconds=0.1, cold=True, durations_ms={"triggerExecution": 1.0},
                                    stages=[StageSpan("s0", 0.0, 0.0, 0.1)]))
    assert max(t.rows for t in q.largest) == 100_000


def test_ds2_reads_a_query_s_batches_only_once_its_jvms_had_time_to_compile_its_code() -> None:
    from sluice.runtime.hosted import RATES_WARMUP

    q = hosted()
    assert q.measured_load().batches == 0
    for batch in range(6):  # a batch every 10 s from its first with rows
        run_batch(q, batch, 1000)
        q.timeline(batch).committed = 1000.0 + 10 * batch
        q.timeline(batch).cpu_seconds = 0.5 if batch < 5 else 0.05  # a cold JVM's tasks, then a warm one's
    assert q.measured_load().batches == 6  # no first batch with rows known: every batch counts
    q.input_since = 1000.0
    load = q.measured_load()
    warm = [b for b in range(6) if 10 * b >= RATES_WARMUP]  # committed at least RATES_WARMUP after the first
    assert warm == [5] and load.batches == 1  # the cold JVM's five are left out
    assert load.usefulSeconds == pytest.approx(0.05) and load.perBatch == [(1000, 0.05)]


def test_ds2_reads_the_tasks_cpu_so_waiting_for_a_core_is_not_read_as_demand() -> None:
    q = hosted()
    for batch in range(4):
        run_batch(q, batch, 1000)
        t = q.timeline(batch)
        t.useful_seconds = t.run_seconds = 4 * t.cpu_seconds  # tasks runnable 3/4 of the time on a full node
    load = q.measured_load()
    assert load.usefulSeconds == pytest.approx(4 * (FIXED + PER_ROW * 1000))
    assert load.perBatch == [(1000, pytest.approx(FIXED + PER_ROW * 1000))] * 4
    spark_gave_no_cpu = hosted()
    run_batch(spark_gave_no_cpu, 0, 1000)
    spark_gave_no_cpu.timeline(0).cpu_seconds, spark_gave_no_cpu.timeline(0).useful_seconds = 0.0, 0.2
    assert spark_gave_no_cpu.measured_load().perBatch == [(1000, 0.2)]  # then run time less fetch wait


def test_the_band_log_keeps_the_most_recent_grants_with_the_slack_each_band_came_from() -> None:
    query = hosted()
    for batch in range(1, BAND_LOG + 6):
        query.record_band(batch, f"band{batch % 8}", granted=1000.0 + batch, slack=batch / 10, waited=0.01)
    query.record_band(BAND_LOG + 5, "band2", granted=2000.0, slack=-1.0, waited=0.5)  # the same batch asked again
    assert len(query.band_log) == BAND_LOG
    assert min(query.band_log) == 6 and max(query.band_log) == BAND_LOG + 5
    assert list(query.grant_log) == list(query.band_log)
    assert query.band_log[BAND_LOG + 5] == "band2" and query.grant_log[BAND_LOG + 5] == (2000.0, -1.0, 0.5)
    assert query.grant_log[6] == (1006.0, 0.6, 0.01)
    assert query.bands["band2"] == sum(1 for b in range(1, BAND_LOG + 6) if b % 8 == 2) + 1

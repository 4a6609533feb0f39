"""Every row sent is judged (`sluice bench cameo`, `capacity`): rows never read count as outside the SLA."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.api.scenario import load_scenario
from sluice.bench import cameo, scenario_runs
from sluice.bench.capacity import judge

ROOT = Path(__file__).resolve().parents[2]


def report(key: str, sent: int, rows: int, batches: list[tuple[int, float]]) -> dict[str, Any]:
    """A run's report: `rows` read in all; each measured batch (rows, every row's latency in ms)."""
    timeline = [[10.0 + i, n, [latency] * 15] for i, (n, latency) in enumerate(batches)]
    return {"started_at": 0.0, "sent": {key: {"sent": sent, "started_at": 0.0}},
            "queries": {key: {"rows": rows, "timeline": timeline}}}


def test_rows_left_unread_at_the_end_count_as_outside_the_sla() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "two-tenants.yaml")
    key = queries[0].key
    sla = queries[0].spec.sla.latencyTarget.ms
    other = queries[1].key
    # 1,000 rows read in measured batches, all within the SLA; 1,000 more sent and never read
    run = report(key, sent=2000, rows=1000, batches=[(500, sla / 2), (500, sla / 2)])
    run["queries"][other] = {"rows": 0, "timeline": []}
    run["sent"][other] = {"sent": 300, "started_at": 0.0}
    table = cameo.summarize({"cameo": [run]}, scenario, queries)["policies"]["cameo"]
    figures = table[key]
    assert (figures["sent"], figures["processed"], figures["backlog_end"]) == (2000, 1000, 1000)
    assert abs(figures["attainment"] - 0.5) < 1e-9 and abs(figures["attainment_batches"] - 1.0) < 1e-9
    assert not cameo.met_p99(figures)  # half its rows never read: its p99 lies past the run's end
    # a query that read nothing it was sent keeps 0%, not "no figure"
    assert table[other]["attainment"] == 0.0 and table[other]["backlog_end"] == 300
    verdict = judge(1.0, table, scenario, queries)
    assert not verdict.ok and verdict.worst_attainment == 0.0


def test_a_query_that_kept_up_is_judged_by_its_batches_alone() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "two-tenants.yaml")
    key = queries[0].key
    sla = queries[0].spec.sla.latencyTarget.ms
    run = report(key, sent=1000, rows=1000, batches=[(900, sla / 2), (100, sla * 2)])
    figures = cameo.summarize({"cameo": [run]}, scenario, queries)["policies"]["cameo"][key]
    assert figures["backlog_end"] == 0 and abs(figures["attainment"] - 0.9) < 1e-9
    assert figures["attainment"] == figures["attainment_batches"]


def test_the_run_lasts_a_drain_tail_past_its_load() -> None:
    _, queries = load_scenario(ROOT / "bench" / "scenarios" / "two-tenants.yaml")
    longest = max(q.spec.sla.latencyTarget.seconds for q in queries)
    assert scenario_runs.drain_seconds(queries) == longest + scenario_runs.DRAIN_MARGIN_S


def test_repeats_report_each_figure_s_spread() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "two-tenants.yaml")
    key, other = queries[0].key, queries[1].key
    sla = queries[0].spec.sla.latencyTarget.ms
    runs = [report(key, sent=100, rows=100, batches=[(100, sla / 2)]),
            report(key, sent=100, rows=100, batches=[(50, sla / 2), (50, sla * 2)]),
            report(key, sent=100, rows=50, batches=[(50, sla / 2)])]  # half never read
    for run in runs:
        run["queries"][other], run["sent"][other] = {"rows": 0, "timeline": []}, {"sent": 0}
    figures = cameo.summarize({"cameo": runs}, scenario, queries)["policies"]["cameo"][key]
    assert figures["spread"]["attainment"] == pytest.approx({"min": 0.5, "median": 0.5, "max": 1.0})
    assert abs(figures["attainment"] - 200 / 300) < 1e-9  # every row of the three repeats
    assert figures["spread"]["p99_ms"]["max"] == sla * 2
    assert figures["repeats"]["attainment"] == pytest.approx([1.0, 0.5, 0.5])  # each repeat's, in run order
    assert cameo.summarize({"cameo": runs[:1]}, scenario, queries)["policies"]["cameo"][key].get("spread") is None


def test_a_run_drains_until_each_of_its_queries_has_read_what_it_was_sent() -> None:
    from sluice.api.wire import QueryStatus
    from sluice.runtime.runner import all_read

    def read(rows: int) -> QueryStatus:
        return QueryStatus(phase="Running", sla_ms=1000, rows=rows)

    statuses = {"a/x": read(100), "b/y": read(40)}
    assert not all_read(statuses, None)  # the load has not said what it sent yet
    assert not all_read(statuses, {"a/x": 100, "b/y": 50})
    assert all_read(statuses, {"a/x": 100, "b/y": 40})
    assert all_read(statuses, {"a/x": 90, "b/y": 40, "c/z": 999})  # c/z runs in another application
    assert not all_read(statuses, {"c/z": 0})  # none of this run's queries: nothing shows it drained


def test_a_run_with_a_real_time_query_drains_until_its_epoch_in_flight_has_ended() -> None:
    """A Real-time query writes each row at once but counts the rows it read only when its epoch
    (CHECKPOINT_SECONDS) ends: cut at the longest SLA, the last epoch's rows were judged unread
    (realtime.yaml under auto, 2026-11-28: 6,700 of 60,000 rows, 11%, in each of four runs)."""
    from sluice.runtime.realtime import CHECKPOINT_SECONDS, drain_limit

    assert drain_limit(2.1, False) == 2.1
    assert drain_limit(2.1, True) == 2.1 + CHECKPOINT_SECONDS

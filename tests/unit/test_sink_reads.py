"""One measuring point for Kafka sinks (`sluice bench cameo`): latency ends where a reader sees
the output record, in micro-batch and Real-time Mode alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.api.scenario import load_scenario
from sluice.bench import cameo
from sluice.testing.sink_reads import latencies, seq_of

ROOT = Path(__file__).resolve().parents[2]


def test_an_output_record_is_matched_to_its_input_by_seq() -> None:
    assert seq_of(b'{"key": "k1", "seq": 42, "amount": 950.0}') == 42
    assert seq_of(b'{"key": "k1", "n": 3}') is None  # an aggregate's row: no input to match
    assert seq_of(b'{"seq": true}') is None and seq_of(b"not json") is None and seq_of(None) is None


def test_latency_is_arrival_less_production_for_inputs_of_the_measured_window() -> None:
    arrivals = {1: 10.5, 2: 11.0, 3: 12.0, 9: 13.0}
    produced = {1: 10.0, 2: 9.0, 3: 11.9}
    # seq 2 was produced in the warm-up (before 9.5); seq 9's input is unknown
    got = latencies(arrivals, produced, since=9.5)
    assert [at for at, _ in got] == [10.5, 12.0]
    assert [round(ms, 6) for _, ms in got] == [500.0, 100.0]


def run(key: str, other: str, timeline_ms: float, read_ms: list[float], sent: int, rows: int, records: int) -> dict[str, Any]:
    """A run whose Kafka filter (`key`) committed 100 rows at `timeline_ms` and whose sink reader
    saw `read_ms` per output record."""
    return {"started_at": 0.0, "sent": {key: {"sent": sent, "started_at": 0.0}, other: {"sent": 0, "started_at": 0.0}},
            "queries": {key: {"rows": rows, "timeline": [[10.0, 100, [timeline_ms] * 15]]}, other: {"rows": 0, "timeline": []}},
            "sink_reads": {key: {"latencies": [[10.0 + i, ms] for i, ms in enumerate(read_ms)], "records": records,
                                 "unmatched": 0, "error": None}}}


def test_a_query_read_at_its_sink_is_judged_by_each_output_record_as_read() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    key, other = queries[0].key, queries[2].key  # fraud-alerts (100 ms, Kafka sink)
    # the commit said 50 ms for every row; the reader saw 4 records, one of them at 300 ms
    report = run(key, other, timeline_ms=50.0, read_ms=[20.0, 30.0, 40.0, 300.0], sent=100, rows=100, records=4)
    figures = cameo.summarize({"cameo": [report]}, scenario, queries)["policies"]["cameo"][key]
    assert figures["latency_end"] == "sink read" and figures["max_ms"] == 300.0
    assert abs(figures["attainment"] - 0.75) < 1e-9
    assert cameo.summarize({"cameo": [report]}, scenario, queries)["policies"]["cameo"][other]["latency_end"] == "commit"


def test_unread_input_rows_count_as_output_records_at_the_query_s_own_ratio() -> None:
    scenario, queries = load_scenario(ROOT / "bench" / "scenarios" / "realtime.yaml")
    key, other = queries[0].key, queries[2].key
    # 1,000 sent, 800 read, 80 records written (1 in 10 passes): the 200 unread rows are 20
    # records' worth outside the SLA beside the 80 read within it
    report = run(key, other, timeline_ms=50.0, read_ms=[20.0] * 80, sent=1000, rows=800, records=80)
    figures = cameo.summarize({"cameo": [report]}, scenario, queries)["policies"]["cameo"][key]
    assert figures["backlog_end"] == 200 and abs(figures["attainment"] - 0.8) < 1e-9

"""Attributing Spark's stage metrics (status API JSON) to queries and batches."""

from __future__ import annotations

from sluice.runtime.stages import parse_stages


def stage(stage_id: int, description: str, status: str = "COMPLETE", **metrics: int) -> dict[str, object]:
    return {"stageId": stage_id, "status": status, "name": "start at NativeMethodAccessorImpl.java:0",
            "description": description, "executorRunTime": 1200, "executorCpuTime": 300_000_000,
            "shuffleFetchWaitTime": 200, "inputRecords": 50, "outputRecords": 5, "numCompleteTasks": 4, **metrics}


def test_stages_are_attributed_by_the_gate_description() -> None:
    stages = [
        stage(3, "sluice pay/alerts batch 7"),
        stage(4, "sluice ana/stats batch 12", shuffleReadRecords=900),
        stage(5, "some other job"),
        stage(6, "sluice pay/alerts batch 8", status="ACTIVE"),
        stage(2, "sluice pay/alerts batch 6"),
    ]
    parsed = parse_stages(stages, after=2)
    assert [(s.stage_id, s.query, s.batch_id) for s in parsed] == [(3, "pay/alerts", 7), (4, "ana/stats", 12)]
    first = parsed[0]
    assert first.run_seconds == 1.2 and first.cpu_seconds == 0.3 and first.shuffle_fetch_wait_seconds == 0.2
    assert first.useful_seconds == 1.0  # run time minus shuffle fetch wait (DS2's useful time)
    assert parsed[1].shuffle_read_records == 900

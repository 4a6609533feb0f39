"""The interval control's room on the machine: each shrink it records takes its added batches'
cores out of what the next may use, until the busy share's window has seen them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from sluice.api.query import StreamingQuery
from sluice.runtime.batch_budget import BatchMeter
from sluice.runtime.hosted import HostedQuery, query_spec
from sluice.runtime.interval_control import IntervalControl
from sluice.runtime.latency import LatencyWindow
from sluice.scheduler.intervals import Choice

ROOT = Path(__file__).resolve().parents[2]


def hosted(interval: float) -> HostedQuery:
    query = StreamingQuery.model_validate(yaml.safe_load((ROOT / "examples" / "hourly-revenue.yaml").read_text()))
    found = HostedQuery(query, LatencyWindow(query.spec.sla.latencyTarget.seconds), query_spec(query))
    found.interval = interval
    return found


def test_a_recorded_shrink_takes_its_batches_cores_out_of_the_room_until_the_window_passes() -> None:
    now = [0.0]
    meter = BatchMeter(window=60.0, min_batches=20, cores=2)
    meter.sample(0.0, 10.0, 0, 100.0)
    meter.sample(10.0, 10.5, 50, 116.4)  # 16.4 busy seconds of 2 cores' 20: 82%; 10 ms of CPU a batch
    control = IntervalControl(threading.Lock(), lambda: now[0], dwell=30.0, meter=meter)
    first = control.machine()
    assert first is not None and first.busy == pytest.approx(0.82) and first.batch_cpu == pytest.approx(0.01)
    assert first.granted == 0 and first.spare() == pytest.approx(0.06)

    control.record(hosted(2.0), Choice(0.5, "shorter"))  # 0.01 x (1/0.5 - 1/2) = 0.015 cores more
    control.record(hosted(0.5), Choice(1.0, "longer"))  # a longer interval takes nothing
    now[0] = 30.0
    later = control.machine()
    assert later is not None and later.granted == pytest.approx(0.015) and later.spare() == pytest.approx(0.045)
    now[0] = 61.0  # the window has seen it
    seen = control.machine()
    assert seen is not None and seen.granted == 0

    assert IntervalControl(threading.Lock(), lambda: 0.0, dwell=30.0).machine() is None  # no meter: not known

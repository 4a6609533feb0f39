"""`sluice demo`'s sizing and verdict: the heavy tenant's rate from its measured cost, the roles
read from the manifests, and one line that says what the table shows, a miss included."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.api.manifest import parse_text
from sluice.api.query import StreamingQuery
from sluice.cli.demo import Sizing, cost_line, demo_roles, demo_verdict, heavy_rate

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"


def queries() -> list[StreamingQuery]:
    found = []
    for path in sorted(DEMO.glob("*.yaml")):
        parsed, problems = parse_text(path.read_text(), str(path))
        assert not problems
        found += [p.resource for p in parsed if isinstance(p.resource, StreamingQuery)]
    return found


def test_the_heavy_rate_makes_its_batch_take_the_target_by_the_measured_cost() -> None:
    # 500 ms fixed + 5 µs a row; a 4,500 ms batch every 10 s: (4500 - 500) / 0.005 = 800,000 rows a batch
    assert heavy_rate(500, 5, 10, 4500) == 80_000
    assert heavy_rate(500, 5, 2, 4500) == 400_000  # the rows of a shorter interval come faster
    assert heavy_rate(4500, 5, 10, 4500) is None  # the fixed part alone takes the target
    assert heavy_rate(100, 0, 10, 4500) is None  # no cost per row measured: no rate sizes it


def test_two_measured_batch_sizes_give_the_fixed_cost_and_the_cost_a_row() -> None:
    # 300,000 rows in 900 ms and 2,400,000 in 2,580 ms: 0.8 µs a row and 660 ms whatever the rows
    line = cost_line([(2_400_000, 2580), (300_000, 900)])
    assert line is not None and (round(line[0], 6), round(line[1], 6)) == (660.0, 0.8)
    assert cost_line([(300_000, 900), (300_000, 950)]) is None  # one size: no line
    assert cost_line([(300_000, 900), (2_400_000, 800)]) is None  # cheaper with more rows: no line


def test_the_demo_s_roles_are_the_tightest_and_the_loosest_sla() -> None:
    tight, heavy = demo_roles(queries())
    assert (tight.key, heavy.key) == ("payments/alerts", "analytics/merchant-stats")
    assert tight.spec.sla.critical and heavy.spec.trigger is not None and heavy.spec.trigger.interval.seconds == 10
    sizing = Sizing(heavy.key, tight.key, 4000, 10, 812, 3.25, 98_092)
    assert sizing.line() == ("sized: analytics/merchant-stats costs 812 ms + 3.25 µs a row here, so 98,092 rows/s "
                             "make its batch every 10s take about 4.0s (the aim: 2x payments/alerts's SLA, within "
                             "what was measured)")


def test_a_heavy_query_the_demo_cannot_size_is_refused_in_one_sentence() -> None:
    tight, heavy = demo_roles(queries())
    no_trigger = heavy.model_copy(update={"spec": heavy.spec.model_copy(update={"trigger": None})})
    with pytest.raises(ValueError, match=r"analytics/merchant-stats: the demo sizes .* spec\.trigger\.interval"):
        demo_roles([tight, no_trigger])
    with pytest.raises(ValueError, match="needs two queries"):
        demo_roles([tight])


def run(attainment: float, p99: float) -> dict[str, object]:
    return {"queries": {"payments/alerts": {"attainment": attainment, "p99_ms": p99}}}


def test_the_verdict_says_what_the_table_shows_and_a_miss_as_a_miss() -> None:
    tight, _ = demo_roles(queries())
    shown = demo_verdict({"fifo": run(0.62, 4100), "cameo": run(0.998, 410)}, tight)
    assert shown.startswith("payments/alerts (SLA 2s, goal 99% of rows): cameo kept it with 99.8% within SLA, "
                            "p99 410 ms; fifo 62.0%, p99 4,100 ms (10.0x cameo's)")
    assert shown.endswith("under fifo its batches wait behind the heavy tenant's, under cameo they go first.")
    missed = demo_verdict({"fifo": run(0.62, 4100), "cameo": run(0.95, 1900)}, tight)
    assert "cameo missed it with 95.0%" in missed and missed.endswith(".") and "go first" not in missed
    level = demo_verdict({"fifo": run(1.0, 900), "cameo": run(1.0, 800)}, tight)
    assert level.endswith("did not block it long enough to miss under fifo.")
    assert "not enough measured batches" in demo_verdict({"fifo": run(0.5, 0), "cameo": run(1.0, 800)}, tight)

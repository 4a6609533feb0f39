"""Priority bands: FAIR scheduler pools with steep weights, chosen per batch from its slack.

Spark fixes pool weights when the application starts, so the runtime writes this ladder into
`fairscheduler.xml` once and each batch picks a band with `spark.scheduler.pool`. band0 is the
most urgent; each band has twice the weight of the next, so under contention task slots go to
urgent bands first (running tasks are never pre-empted: fairness applies at task launch).
"""

from __future__ import annotations

from bisect import bisect_right

DEFAULT_BAND = "default"
"""Spark's own default pool: used when the scheduler is unreachable (fail open) and for fifo/fair."""

# Slack (start deadline - now, seconds) upper bounds of bands 1..: below 0 is band0 (late).
SLACK_BOUNDS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 60.0)


def band_name(index: int) -> str:
    return f"band{index}"


def band_for_slack(slack: float, bands: int) -> int:
    """Band index for a slack in seconds: less slack, lower (more urgent) band."""
    return min(bisect_right(SLACK_BOUNDS, slack), bands - 1)


def band_weights(bands: int) -> dict[str, int]:
    """Weight of each band: band0 = 2**(bands-1) ... last band = 1."""
    return {band_name(i): 2 ** (bands - 1 - i) for i in range(bands)}


def fairscheduler_xml(bands: int) -> str:
    """The `spark.scheduler.allocation.file` content for the band ladder (plus `default`)."""
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    for name, weight in band_weights(bands).items():
        lines += [
            f'  <pool name="{name}">',
            "    <schedulingMode>FIFO</schedulingMode>",
            f"    <weight>{weight}</weight>",
            "    <minShare>0</minShare>",
            "  </pool>",
        ]
    lines += [
        f'  <pool name="{DEFAULT_BAND}">',
        "    <schedulingMode>FIFO</schedulingMode>",
        "    <weight>1</weight>",
        "    <minShare>0</minShare>",
        "  </pool>",
        "</allocations>",
    ]
    return "\n".join(lines) + "\n"

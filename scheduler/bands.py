"""Priority bands: FAIR scheduler pools, chosen per batch from its slack.

Spark fixes pool weights when the application starts, so the runtime writes this ladder into
`fairscheduler.xml` once and each batch picks a band with `spark.scheduler.pool`. band0 is the
most urgent; each band has twice the weight of the next. Running tasks are never pre-empted: the
order applies at each task launch.

Weights alone do not order a pool of two cores: Spark's FAIR comparator gives a free slot to the
pool with the fewest running tasks per weight, so a bulk band with none running (0/1) beats an
urgent band running one (1/16), and an urgent batch keeps one core at best (measured: cameo's
critical filters kept fewer rows within SLA than fair's per-tenant pools; docs/architecture.md,
"Measurements behind the design"). So the
urgent bands (slack below URGENT_SLACK) also get a minimum share no pool reaches: Spark serves a
pool below its minimum share before any pool at or above it, so an urgent batch's pending tasks
take every slot that frees before a bulk batch's do.
"""

from __future__ import annotations

from bisect import bisect_right

DEFAULT_BAND = "default"
"""Spark's own default pool: used when the scheduler is unreachable (fail open) and for fifo/fair."""

# Slack (start deadline - now, seconds) upper bounds of bands 1..: below 0 is band0 (late).
SLACK_BOUNDS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 60.0)


URGENT_SLACK = 2.0
"""Seconds: a batch whose slack is below this runs in an urgent band (served before the others).
About the longest bulk task here: an urgent batch that waited for one would miss its deadline."""
URGENT_MIN_SHARE = 1_000_000
"""Task slots: the urgent bands' minimum share, above any pool's size, so they stay below it."""


def band_name(index: int) -> str:
    return f"band{index}"


def band_for_slack(slack: float, bands: int) -> int:
    """Band index for a slack in seconds: less slack, lower (more urgent) band."""
    return min(bisect_right(SLACK_BOUNDS, slack), bands - 1)


def band_weights(bands: int) -> dict[str, int]:
    """Weight of each band: band0 = 2**(bands-1) ... last band = 1."""
    return {band_name(i): 2 ** (bands - 1 - i) for i in range(bands)}


def urgent_bands(bands: int) -> int:
    """How many bands, from band0, hold only batches with slack below URGENT_SLACK (the last band
    holds every slack above its lower bound, so it is never one of them)."""
    return min(bisect_right(SLACK_BOUNDS, URGENT_SLACK), bands - 1)


def fairscheduler_xml(bands: int) -> str:
    """The `spark.scheduler.allocation.file` content for the band ladder (plus `default`)."""
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    urgent = urgent_bands(bands)
    for i, (name, weight) in enumerate(band_weights(bands).items()):
        lines += [
            f'  <pool name="{name}">',
            "    <schedulingMode>FIFO</schedulingMode>",
            f"    <weight>{weight}</weight>",
            f"    <minShare>{URGENT_MIN_SHARE if i < urgent else 0}</minShare>",
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

"""`sluice bench rescale`'s figures from one run's records (pure), and its refusals."""

from __future__ import annotations

from click.testing import CliRunner

from sluice.bench.rescale import Run, figures, per_key
from sluice.cli.main import main


def test_figures_from_a_runs_batches_latencies_and_sink_counts() -> None:
    run = Run("grow", "partition-paced", "default", batches=[(-30.0, 9000.0), (-3.0, 200.0), (-2.0, 220.0), (-1.0, 210.0), (1.0, 500.0),
                                                            (2.0, 300.0), (30.0, 900.0)],
              latency=[(-2.0, 1000.0), (-1.0, 1100.0), (1.0, 2500.0), (2.0, 1200.0)],
              migration_s=3.0, new_executor_share=0.5, moves=4, expected=1000, counted=998)
    got = figures(run)
    assert got["steady_p99_ms"] == 220.0 and got["peak_batch_ms"] == 500.0  # the 30 s batch is after the migration
    assert got["peak_over_steady"] == round(500 / 220, 2)
    assert got["steady_latency_p99_ms"] == 1100.0 and got["peak_latency_p99_ms"] == 2500.0
    assert (got["lost"], got["doubled"]) == (2, 0) and got["new_executor_share"] == 0.5 and got["moves"] == 4
    assert got["checked"].startswith("net")  # a run from before the per-key check: only the net sum


def test_lost_and_doubled_are_counted_per_key_so_errors_cannot_cancel() -> None:
    # key a lost 3 of its 10 events and key b counted 3 of its 5 twice: the net sum (15 consumed,
    # 15 counted) shows nothing wrong
    mismatched = [(10, 7), (5, 8)]
    assert per_key(mismatched) == (3, 3)
    assert per_key([(4, 0), (0, 2)]) == (4, 2)  # a key missing at the sink; a key the source never had
    assert per_key([]) == (0, 0)
    run = Run("shrink", "all-at-once", "rocksdb", expected=15, counted=15, lost=3, doubled=3)
    got = figures(run)
    assert (got["lost"], got["doubled"], got["checked"]) == (3, 3, "per key")


def test_a_batch_that_began_in_the_migration_counts_though_it_ended_after() -> None:
    """Batches are recorded at their commit: a 14 s batch begun at 0.5 s committed at 14.5 s, after
    a migration that ended at 6 s (+5), and is the peak (the first run of the bench missed it)."""
    run = Run("shrink", "all-at-once", "default", batches=[(-2.0, 900.0), (-1.0, 1000.0), (14.5, 14000.0), (15.5, 1000.0)],
              latency=[(-2.0, 1500.0), (-1.0, 1600.0), (14.5, 15000.0), (15.5, 1700.0)], migration_s=6.0)
    got = figures(run)
    assert got["peak_batch_ms"] == 14000.0 and got["peak_latency_p99_ms"] == 15000.0


def test_bad_strategies_and_stores_get_one_sentence() -> None:
    out = CliRunner().invoke(main, ["bench", "rescale", "--strategies", "fast"])
    assert out.exit_code == 1 and "--strategies: use some of all-at-once" in out.output
    out = CliRunner().invoke(main, ["bench", "rescale", "--stores", "redis"])
    assert out.exit_code == 1 and "--stores: use some of default, rocksdb" in out.output

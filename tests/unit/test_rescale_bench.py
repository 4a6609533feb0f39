"""`sluice bench rescale`'s figures from one run's records (pure), and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.api.expressions import check_expression
from sluice.api.manifest import load_query
from sluice.bench.rescale import (
    Run,
    figures,
    folder_bytes,
    left_at_removal,
    manifest,
    migration_end,
    no_slack,
    offsets_at,
    pad_expression,
    per_key,
    sized,
    steady_window,
    table_text,
)
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


def test_state_mb_sets_the_keys_and_the_value_size_that_reach_it() -> None:
    assert sized(1024, None) == (1_000_000, 1074)  # 2**30 / 10**6 rounded up
    assert sized(64, None) == (262_144, 256)  # fewer keys, so a value keeps 256 bytes
    assert sized(1, None) == (4096, 256)
    assert sized(100, 100_000) == (100_000, 1049)  # --keys given: the value is the size over them
    with pytest.raises(ValueError, match="raise --keys to at least 65536"):
        sized(1024, 1000)


def test_the_pad_is_the_value_size_of_unrepeated_digests_and_a_valid_row_local_expression() -> None:
    text = pad_expression(300)
    assert text.count("sha2(") == 3 and text.endswith(", 300, '.')")  # 3 x 128 hex digits cut to 300
    assert check_expression(text) == text
    query = load_query(manifest("127.0.0.1:9092", "t", Path("/tmp/sink"), "5s", value_bytes=300, partitions=64))
    assert [step.kind for step in query.spec.pipeline] == ["withColumn", "groupBy", "aggregate", "select"]
    assert query.spec.resources.shufflePartitions == 64


def test_state_mb_refusals_name_the_flag() -> None:
    out = CliRunner().invoke(main, ["bench", "rescale", "--state-mb", "1024", "--keys", "1000"])
    assert out.exit_code == 1 and "--state-mb 1024 over --keys 1000 needs 1073742 bytes a key" in out.output
    assert "Traceback" not in out.output


def test_the_peak_before_state_moved_and_the_peak_while_it_moves_are_apart() -> None:
    # a grow: the new JVMs start (the batch at 2 s, begun at 0.8 s), state first moves at 4 s, and
    # the batch begun at 4.5 s reloads it
    run = Run("grow", "partition-paced", "default", batches=[(-2.0, 200.0), (-1.0, 200.0), (2.0, 1200.0), (3.5, 300.0),
                                                            (5.5, 1000.0), (6.5, 250.0)],
              latency=[(-1.0, 900.0)], migration_s=7.0, ready_s=1.5, warm_s=3.0, state_moved_s=4.0,
              reloads=[(2, 8 * 2**20, 0.8, 1.0), (1, 4 * 2**20, 0.6, 0.5)])
    got = figures(run)
    assert got["peak_before_state_moved_ms"] == 1200.0 and got["peak_state_moving_ms"] == 1000.0
    assert got["peak_before_state_moved_over_steady"] == 6.0 and got["peak_state_moving_over_steady"] == 5.0
    assert got["partition_load_s"] == [0.4, 0.6] and got["ready_s"] == 1.5
    assert (got["steps_measured"], got["steps_over_budget"]) == (2, 1)  # the second spent 0.6 s of its 0.5
    assert "| 1.5 s / 3.0 s / 4.0 s |" in table_text({"default": {"grow": {"partition-paced": got}}})
    # all-at-once's grow moves no state: its whole peak is the change's own
    run = Run("grow", "all-at-once", "default", batches=run.batches, latency=run.latency, migration_s=7.0)
    got = figures(run)
    assert got["peak_before_state_moved_ms"] == 1200.0 and got["peak_state_moving_ms"] is None
    text = table_text({"default": {"grow": {"all-at-once": got}}})
    assert "| 1200.0 ms | 6.0x | 6.0x / - |" in text and "| - / - / - |" in text


def test_the_migration_ends_after_the_last_sample_with_work_left_not_at_the_first_that_looks_done() -> None:
    # 2026-11-29's grow: executors up at 13.8 s with no move counted yet, then 4 moves pending
    # from 15.8 s and still 2 at the run's end: it never ended (the first rule said 13.8 s)
    grow = [(0.5, 2, 0), (1.5, 2, 0), (13.8, 4, 0), (15.8, 4, 4), (45.4, 4, 4), (50.4, 4, 3), (76.0, 4, 2)]
    assert migration_end(grow, 4) is None
    unfinished = figures(Run("grow", "partition-paced", "default", batches=[(-1.0, 200.0), (1.0, 300.0)],
                             latency=[(-1.0, 900.0)], migration_s=None))
    assert "| not over at the end |" in table_text({"default": {"grow": {"partition-paced": unfinished}}})
    assert migration_end([(0.5, 2, 0), (5.0, 4, 0), (6.0, 4, 2), (7.0, 4, 0), (8.0, 4, 0)], 4) == 7.0
    assert migration_end([(0.5, 4, 0), (1.5, 3, 0), (2.5, 2, 0), (3.5, 2, 0)], 2) == 2.5  # a shrink, no mover
    assert migration_end([(0.5, 4, 0), (1.5, 4, 0), (2.5, 4, 0)], 4) == 2.5  # nothing to do: 2 s at least


def test_the_sla_and_its_steady_slack_are_reported_and_no_slack_is_said_in_one_sentence() -> None:
    latency = [(-30.0, 40_000.0), (-2.0, 17_000.0), (-1.0, 17_800.0), (1.0, 20_000.0)]
    run = Run("grow", "partition-paced", "default", batches=[(-1.0, 8000.0), (1.0, 9000.0)], latency=latency,
              migration_s=2.0, sla_s=60.0)
    got = figures(run)
    assert (got["sla_s"], got["steady_slack_s"]) == (60.0, 42.2)  # the -30 s latency is before the steady window
    assert "| 60 s (42.2 s) |" in table_text({"default": {"grow": {"partition-paced": got}}})
    assert no_slack(latency, 60.0) is None
    said = no_slack(latency, 5.0)
    assert said is not None and "17.8 s is at or over the 5 s SLA" in said and "--sla" in said
    assert no_slack([], 5.0) is None  # no steady batch: nothing to say
    older = figures(Run("grow", "all-at-once", "default", batches=run.batches, latency=latency))  # before --sla
    assert older["sla_s"] is None and "| - |" in table_text({"default": {"grow": {"all-at-once": older}}})


def test_the_sla_flag_is_a_duration_and_a_bad_one_is_refused_in_one_sentence() -> None:
    out = CliRunner().invoke(main, ["bench", "rescale", "--sla", "soon"])
    assert out.exit_code == 2 and "--sla" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(main, ["bench", "rescale", "--sla", "2h"])
    assert out.exit_code == 2 and "outside" in out.output


def test_a_shrink_says_how_many_state_units_its_leaving_executors_held_when_they_went() -> None:
    # 2026-11-29's 1 GiB shrink: 17 units still to move when the 120 s grace ran out and the two
    # leaving executors were killed by force (their state reloaded at once by the next batch)
    forced = Run("shrink", "partition-paced", "default", batches=[(-1.0, 2000.0), (1.0, 2500.0)],
                 migration_s=146.3, samples=[(0.5, 4, 0), (1.5, 4, 45), (131.3, 4, 17), (132.3, 2, 17), (140.3, 2, 16)])
    assert left_at_removal(forced) == 17
    got = figures(forced)
    assert got["units_left_at_removal"] == 17
    assert "| 146.3 s (17 units left at the removal) |" in table_text({"default": {"shrink": {"partition-paced": got}}})
    drained = Run("shrink", "partition-paced", "default", samples=[(0.5, 4, 3), (30.0, 4, 0), (31.0, 2, 0)])
    assert left_at_removal(drained) == 0  # every unit moved off first
    assert left_at_removal(Run("grow", "partition-paced", "default", samples=[(0.5, 2, 0), (9.0, 4, 4)])) is None
    assert left_at_removal(Run("shrink", "all-at-once", "default", samples=[(0.5, 4, 0), (1.0, 3, 0)])) is None
    # with the leaving executors' units sampled, a balance move still pending between staying
    # executors is not a unit left behind (2026-11-29's graceful RocksDB shrink showed 1)
    balanced = Run("shrink", "partition-paced", "rocksdb", samples=[(0.5, 4, 9), (60.0, 4, 1), (61.0, 2, 1)],
                   on_leaving=[(0.5, 8), (60.0, 0), (61.0, 0)])
    assert left_at_removal(balanced) == 0
    cut = Run("shrink", "partition-paced", "rocksdb", samples=[(0.5, 4, 9), (120.0, 4, 5), (121.0, 2, 5)],
              on_leaving=[(0.5, 8), (120.0, 3), (121.0, 0)])
    assert left_at_removal(cut) == 3
    out = CliRunner().invoke(main, ["bench", "rescale", "--grace", "a while"])
    assert out.exit_code == 2 and "--grace" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(main, ["bench", "rescale", "--directions", "sideways"])
    assert out.exit_code == 1 and out.output.strip() == "--directions: use some of grow, shrink (got 'sideways')."


def test_a_long_steady_phase_widens_the_steady_window_for_slow_batches() -> None:
    # batches 12 s apart: a 20 s window would hold one, a --steady 120s run's 60 s window holds five
    batches = [(-12.0 * i, 9000.0 + i) for i in range(1, 6)] + [(1.0, 15000.0)]
    assert steady_window(40.0) == 20.0 and steady_window(120.0) == 60.0
    narrow = figures(Run("grow", "partition-paced", "default", batches=batches, migration_s=2.0))
    wide = figures(Run("grow", "partition-paced", "default", batches=batches, migration_s=2.0, steady_window=60.0))
    assert narrow["steady_p99_ms"] == 9001.0 and wide["steady_p99_ms"] == 9005.0


def test_a_folder_s_bytes_count_every_file_under_it_and_the_checkpoint_size_is_reported(tmp_path: Path) -> None:
    (tmp_path / "state" / "0").mkdir(parents=True)
    (tmp_path / "state" / "0" / "1.zip").write_bytes(b"x" * 3000)
    (tmp_path / "offsets").write_bytes(b"y" * 500)
    assert folder_bytes(tmp_path) == 3500 and folder_bytes(tmp_path / "absent") == 0
    got = figures(Run("shrink", "all-at-once", "rocksdb", checkpoint_mb=3421.7))
    assert got["checkpoint_mb"] == 3421.7


def test_the_sink_is_judged_against_the_offsets_of_its_newest_batch(tmp_path: Path) -> None:
    # Spark's offset log as it writes it (v1, the metadata line, one line per source): a batch
    # stopped after its sink's write and before its commit is judged by its own end offsets
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "41").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1796000000000,"conf":{}}\n'
                            '{"rescale-state":{"1":5200,"0":5190}}')
    (log / "42").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1796000001000,"conf":{}}\n'
                            '{"rescale-state":{"1":6300,"0":6311}}\n-')
    assert offsets_at(tmp_path, 41) == {"rescale-state": {"0": 5190, "1": 5200}}
    assert offsets_at(tmp_path, 42) == {"rescale-state": {"0": 6311, "1": 6300}}
    assert offsets_at(tmp_path, 43) is None  # not in the log: the last progress is used instead

"""The machine speed (`sluice bench calibrate`): compared with the reference, said when off, kept in results.json."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
from click.testing import CliRunner

from sluice.bench import calibrate
from sluice.cli.common import calibrate_now, calibrate_option

REF = {"at": "2026-11-27T20:00:00+00:00", "python_ms": 400.0, "spark_start_s": 16.0, "spark_batch_ms": 150.0,
       "kafka_start_s": 6.5, "kafka_rtt_ms": 7.0}


def test_each_timing_is_a_ratio_to_the_reference() -> None:
    now = {**REF, "python_ms": 500.0, "spark_batch_ms": 105.0}
    ratios = calibrate.compare(now, REF)
    assert ratios == {"python_ms": 1.25, "spark_start_s": 1.0, "spark_batch_ms": 0.7, "kafka_start_s": 1.0,
                      "kafka_rtt_ms": 1.0}
    assert calibrate.compare(now, None) == {}


def test_one_line_names_what_is_more_than_twenty_percent_off_either_way() -> None:
    assert calibrate.warning({"python_ms": 1.2, "spark_batch_ms": 0.81}, REF) is None
    line = calibrate.warning({"python_ms": 1.25, "spark_batch_ms": 0.7, "kafka_rtt_ms": 1.1}, REF)
    assert line is not None and "\n" not in line
    assert "python_ms 1.25x" in line and "spark_batch_ms 0.70x" in line and "kafka_rtt_ms" not in line
    assert REF["at"] in line
    assert calibrate.warning({"python_ms": 3.0}, None) is None  # no reference: nothing to be off from


def test_the_kept_reference_has_every_timing() -> None:
    kept = calibrate.reference()
    assert kept is not None and all(kept[k] > 0 for k in calibrate.TIMINGS)
    assert calibrate.reference(Path("/nonexistent/calibrate-reference.json")) is None


def test_the_table_shows_each_timing_its_ratio_and_spread() -> None:
    result = {**REF, "host": "vm", "cores": 2, "loadavg_1m": 0.5, "reference_at": REF["at"],
              "vs_reference": {"python_ms": 1.25}, "spread": {"python_ms": [380.0, 520.0]}}
    table = calibrate.render(result)
    assert "1.25x" in table and "380.00-520.00" in table and table.count("\n") == len(calibrate.TIMINGS) + 1


def _command() -> click.Command:
    @click.command()
    @click.option("--out")
    @click.option("--stale", is_flag=True)
    @calibrate_option
    def bench(out: str, stale: bool) -> None:
        calibrate_now()
        results = Path(out) / "results.json"
        if not stale:  # the benchmark wrote its results
            results.write_text(json.dumps({"figure": 1}))

    return bench


def test_a_benchmark_s_results_name_their_machine_speed_measured_or_not(tmp_path: Path) -> None:
    result = CliRunner().invoke(_command(), ["--out", str(tmp_path), "--no-calibrate"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "results.json").read_text()) == {"figure": 1, "sitting": {"skipped": "--no-calibrate"}}


def test_an_earlier_run_s_results_are_left_alone(tmp_path: Path) -> None:
    earlier = tmp_path / "results.json"
    earlier.write_text(json.dumps({"figure": 0}))
    past = time.time() - 3600
    os.utime(earlier, (past, past))
    result = CliRunner().invoke(_command(), ["--out", str(tmp_path), "--no-calibrate", "--stale"])
    assert result.exit_code == 0 and json.loads(earlier.read_text()) == {"figure": 0}

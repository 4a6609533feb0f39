"""`sluice bench calibrate` end to end: the machine speed's timings, measured, against the kept reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.bench import calibrate

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.bench]


def test_calibrate_measures_each_timing_and_compares_it_with_the_reference(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sluice", "bench", "calibrate", "--out", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)
    written = json.loads((tmp_path / "results.json").read_text())
    assert printed == written
    for timing in calibrate.TIMINGS:
        assert written[timing] > 0
    assert set(written["vs_reference"]) == set(calibrate.TIMINGS)
    assert written["reference_at"] == calibrate.reference()["at"]  # type: ignore[index]

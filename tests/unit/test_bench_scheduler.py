"""`sluice bench scheduler` keeps its JSON contract (figures themselves live in docs/performance.md, measured)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_scheduler_json_contract() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", "bench", "scheduler", "--clients", "2", "--duration", "1s",
         "--core-queries", "1000", "--json"],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {"grants_per_s", "p50_ms", "p99_ms", "clients"} <= set(result)
    assert result["clients"] == 2
    assert result["grants"] > 0 and result["grants_per_s"] > 0
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]

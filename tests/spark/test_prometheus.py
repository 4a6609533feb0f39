"""A real Prometheus (built from the Go module proxy, without its web UI) scrapes a real runtime's
/metrics while a query runs, and evaluates the chart's own recording rules on that data."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.manifest import load_query
from sluice.runtime.control import make_control_app
from sluice.runtime.host import QueryHost
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread
from sluice.testing import prometheus
from sluice.testing.controlplane import build_binaries, kube_version
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_prometheus_scrapes_the_runtime_and_the_charts_rules_evaluate(spark: Any, tmp_path: Path) -> None:
    helm = build_binaries()[1]
    chart = subprocess.run([str(helm / "helm"), "template", "sluice", str(ROOT), "--kube-version", kube_version(), "--set", "alerts.enabled=true"],
                           capture_output=True, text=True, check=True).stdout
    rule = next(d for d in yaml.safe_load_all(chart) if d and d["kind"] == "PrometheusRule")

    host = QueryHost(spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    server = ServerThread(make_control_app(host, "t")).start()
    try:
        with prometheus.running(tmp_path / "prometheus", {"sluice-runtime": server.url.removeprefix("http://")},
                                {"groups": rule["spec"]["groups"]}) as prom:
            host.add(load_query(yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())))
            labels = {"tenant": "payments", "query": "fraud-filter"}
            ratio = wait_for(lambda: prom.query("sluice:query_sla_error_ratio:rate5m"), timeout=90, every=1,
                             what="the recording rule evaluated on scraped data")
            assert ratio[0]["metric"] == {"__name__": "sluice:query_sla_error_ratio:rate5m", **labels}
            assert 0.0 <= float(ratio[0]["value"][1]) <= 1.0
            p99 = prom.query('histogram_quantile(0.99, sum by (le) (rate(sluice_query_latency_seconds_bucket[1m])))')
            assert 0.0 < float(p99[0]["value"][1]) < 60.0
            target_seconds = prom.query("sluice_query_latency_target_seconds")
            assert float(target_seconds[0]["value"][1]) == 0.5
            # task time joins on the same labels (it carried query="payments/fraud-filter" before)
            tasks = wait_for(lambda: prom.query('sluice_runtime_task_run_seconds_total{tenant="payments",query="fraud-filter"}'),
                             timeout=60, every=1, what="task time under the query's labels")
            assert float(tasks[0]["value"][1]) > 0
    finally:
        server.stop()
        host.stop_all()

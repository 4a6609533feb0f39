"""A real Prometheus (built from the Go module proxy, without its web UI) scrapes a real runtime's
/metrics while a query runs, and evaluates the chart's own recording rules on that data."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
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
from sluice.testing import processes
from sluice.testing.controlplane import build_binaries, free_port
from sluice.testing.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def query_api(base: str, promql: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"prometheus exited: {log.read_text(errors='replace')[-500:]}", pytrace=False)
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_prometheus_scrapes_the_runtime_and_the_charts_rules_evaluate(spark: Any, tmp_path: Path) -> None:
    _kube, helm, prometheus = build_binaries()
    chart = subprocess.run([str(helm / "helm"), "template", "sluice", str(ROOT), "--set", "alerts.enabled=true"],
                           capture_output=True, text=True, check=True).stdout
    rule = next(d for d in yaml.safe_load_all(chart) if d and d["kind"] == "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))

    host = QueryHost(spark, tmp_path / "ck", LocalScheduler(Scheduler("cameo", capacity=2)))
    server = ServerThread(make_control_app(host, "t")).start()
    target = server.url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{"job_name": "sluice-runtime", "static_configs": [{"targets": [target]}]}],
    }))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = processes.spawn("prometheus", [
        str(prometheus / "prometheus"), f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ], tmp_path / "prometheus.log")
    try:
        host.add(load_query(yaml.safe_load((ROOT / "examples" / "fraud-filter.yaml").read_text())))
        wait_for(lambda: ready(base, proc, tmp_path / "prometheus.log"), timeout=60, what="Prometheus ready")
        labels = {"tenant": "payments", "query": "fraud-filter"}
        ratio = wait_for(lambda: query_api(base, "sluice:query_sla_error_ratio:rate5m"), timeout=90, every=1,
                         what="the recording rule evaluated on scraped data")
        assert ratio[0]["metric"] == {"__name__": "sluice:query_sla_error_ratio:rate5m", **labels}
        assert 0.0 <= float(ratio[0]["value"][1]) <= 1.0
        p99 = query_api(base, 'histogram_quantile(0.99, sum by (le) (rate(sluice_query_latency_seconds_bucket[1m])))')
        assert 0.0 < float(p99[0]["value"][1]) < 60.0
        target_seconds = query_api(base, "sluice_query_latency_target_seconds")
        assert float(target_seconds[0]["value"][1]) == 0.5
    finally:
        processes.stop("prometheus", proc)
        server.stop()
        host.stop_all()

"""The chart's alerts, checked by Prometheus's own promtool: the rules parse, and each alert has
a unit test (tests/cluster/alerts/sluice-alerts.test.yaml) that fires it on a series of input
and keeps it quiet otherwise. The rules are rendered by real helm from the chart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sluice.testing.controlplane import ControlPlane, build_binaries, kube_version

pytestmark = [pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).with_name("alerts") / "sluice-alerts.test.yaml"


def rendered_rules(plane: ControlPlane, *values: str) -> dict[str, object]:
    out = plane.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--namespace", "sluice-system", "--set", "alerts.enabled=true",
                     *values).stdout
    rule = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = build_binaries()[2] / "promtool"
    return subprocess.run([str(tool), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_rules_parse_and_every_alert_passes_its_unit_test(crds_installed: ControlPlane, tmp_path: Path) -> None:
    rules = rendered_rules(crds_installed)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}  # type: ignore[attr-defined]
    cases = yaml.safe_load(TESTS.read_text())["tests"]
    fired = {t["alertname"] for case in cases for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert alerts == fired, f"alerts without a firing test: {alerts - fired}"


def test_the_objective_sets_the_burn_thresholds(crds_installed: ControlPlane) -> None:
    rules = rendered_rules(crds_installed, "--set", "alerts.objective=0.95")
    fast = next(r for g in rules["groups"] for r in g["rules"]  # type: ignore[attr-defined]
                if r.get("alert") == "SluiceQuerySLABurnFast")
    assert "> 0.72" in fast["expr"]  # 14.4 x the 5% budget


def test_the_dashboard_is_json_and_every_query_parses(crds_installed: ControlPlane, tmp_path: Path) -> None:
    import json

    out = crds_installed.helm("template", "sluice", str(ROOT), "--kube-version", kube_version(), "--set", "dashboard.enabled=true").stdout
    config = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"])
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config["data"]["sluice-pool.json"])
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    expressions += [a["expr"] for a in dashboard["annotations"]["list"]]
    assert len(dashboard["panels"]) == 5 and len(expressions) == 9
    # Grafana's variables, as Grafana substitutes them, then Prometheus's own parser (a rule file)
    variables = {"$__rate_interval": "5m", "$pool": "shared", "$namespace": "sluice-system"}
    rules = []
    for i, expr in enumerate(expressions):
        for name, value in variables.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:panel{i}", "expr": expr})
    (tmp_path / "panels.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = promtool("check", "rules", "panels.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr

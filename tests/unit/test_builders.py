"""What a StreamingPool becomes: image and pull secrets for the driver and the executors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sluice.api.pool import StreamingPool
from sluice.operator import settings
from sluice.operator.builders import executor_pod_template, pool_objects, spark_conf


def _pool(**spec: Any) -> tuple[dict[str, Any], StreamingPool]:
    body = {"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingPool",
            "metadata": {"name": "shared", "uid": "u-1"}, "spec": spec}
    return body, StreamingPool.model_validate(body)


def _driver(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_a_pool_without_an_image_runs_the_operators_runtime_image() -> None:
    before = settings.current()
    settings.use(settings.Settings.from_env({"SLUICE_RUNTIME_IMAGE": "registry.local/sluice-runtime:dev"}))
    try:
        body, model = _pool()
        driver = _driver(pool_objects(body, model, "sluice-system", "t"))
        assert {c["image"] for c in driver["containers"]} == {"registry.local/sluice-runtime:dev"}
        assert spark_conf(model, "sluice-system")["spark.kubernetes.container.image"] == "registry.local/sluice-runtime:dev"
        body, model = _pool(image="mine:1")
        assert {c["image"] for c in _driver(pool_objects(body, model, "sluice-system", "t"))["containers"]} == {"mine:1"}
    finally:
        settings.use(before)


def test_pull_secrets_reach_the_driver_and_the_executors() -> None:
    body, model = _pool(imagePullSecrets=["regcred"])
    objects = pool_objects(body, model, "sluice-system", "t")
    assert _driver(objects)["imagePullSecrets"] == [{"name": "regcred"}]
    assert executor_pod_template(model)["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert spark_conf(model, "sluice-system")["spark.kubernetes.container.image.pullSecrets"] == "regcred"
    assert spark_conf(model, "sluice-system")["spark.locality.wait"] == "0s"  # no task waits for its cached consumer
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    assert "regcred" in yaml.safe_dump(config)  # the executor pod template Spark reads
    body, model = _pool()
    assert "imagePullSecrets" not in _driver(pool_objects(body, model, "sluice-system", "t"))


def test_a_pools_network_policies_open_the_control_api_to_the_operator_and_spark_ports_to_its_executors() -> None:
    from sluice.api.constants import (
        BLOCK_MANAGER_PORT,
        CONTROL_PORT,
        DRIVER_PORT,
        METRICS_PORT,
        OPERATOR_POD_LABEL,
    )

    body, model = _pool()
    objects = pool_objects(body, model, "sluice-system", "t")
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    driver, executors = policies["sluice-pool-shared-driver"], policies["sluice-pool-shared-executors"]
    pod = _driver(objects)
    pod_labels = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert driver["podSelector"]["matchLabels"].items() <= pod_labels.items()
    rules = {tuple(p["port"] for p in rule["ports"]): rule.get("from") for rule in driver["ingress"]}
    assert rules == {
        (CONTROL_PORT,): [{"podSelector": {"matchLabels": dict([OPERATOR_POD_LABEL])}}],
        (DRIVER_PORT, BLOCK_MANAGER_PORT): [{"podSelector": {"matchLabels": {"sluice.dev/pool": "shared", "spark-role": "executor"}}}],
        (METRICS_PORT,): [{"podSelector": {"matchLabels": dict([OPERATOR_POD_LABEL])}},
                          {"namespaceSelector": {"matchExpressions": [
                              {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}]}}],
    }
    assert executors["podSelector"]["matchLabels"] == {"sluice.dev/pool": "shared", "spark-role": "executor"}
    assert executors["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"sluice.dev/pool": "shared"}}}]}]
    assert driver["policyTypes"] == executors["policyTypes"] == ["Ingress"]  # egress stays open: sources and sinks
    # the ports the policies name are the ones the pod serves, and the probe uses the open one
    runtime = pod["containers"][0]
    served = {p["containerPort"] for p in runtime["ports"]}
    assert {CONTROL_PORT, METRICS_PORT, DRIVER_PORT, BLOCK_MANAGER_PORT} <= served
    assert runtime["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert runtime["args"][runtime["args"].index("--metrics-port") + 1] == str(METRICS_PORT)


def test_a_pools_metrics_port_opens_to_the_namespaces_the_operator_is_told_and_to_no_one_else() -> None:
    from sluice.api.constants import METRICS_PORT
    from sluice.operator.settings import Settings, SettingsError

    def metrics_from(env: dict[str, str]) -> list[dict[str, object]]:
        settings.use(Settings.from_env(env))
        try:
            body, model = _pool()
            driver = next(o["spec"] for o in pool_objects(body, model, "sluice-system", "t")
                          if o["kind"] == "NetworkPolicy" and o["metadata"]["name"].endswith("-driver"))
        finally:
            settings.use(None)
        return next(rule["from"] for rule in driver["ingress"] if rule["ports"] == [{"protocol": "TCP", "port": METRICS_PORT}])

    assert metrics_from({"SLUICE_METRICS_FROM": "obs, prom"})[1]["namespaceSelector"]["matchExpressions"][0]["values"] == ["obs", "prom"]
    assert len(metrics_from({"SLUICE_METRICS_FROM": ""})) == 1  # the operator's pods alone
    with pytest.raises(SettingsError, match="SLUICE_METRICS_FROM names 'Prom'"):
        Settings.from_env({"SLUICE_METRICS_FROM": "Prom"})


def test_executors_mount_the_checkpoint_volume_where_the_driver_does() -> None:
    """A stateful query's tasks write its state under the checkpoint (on pods without it, Spark's
    state store failed with 'Mkdirs failed to create file:/var/lib/sluice/checkpoints/...')."""
    for spec, volume in (({"checkpoints": {"claimName": "ck"}}, {"persistentVolumeClaim": {"claimName": "ck"}}),
                         ({"checkpoints": {"hostPath": "/srv/ck"}}, {"hostPath": {"path": "/srv/ck", "type": "DirectoryOrCreate"}}),
                         ({}, {"emptyDir": {}})):
        body, model = _pool(**spec)
        driver = _driver(pool_objects(body, model, "sluice-system", "t"))
        executor = executor_pod_template(model)["spec"]
        at = next(m["mountPath"] for m in driver["containers"][0]["volumeMounts"] if m["name"] == "work")
        assert {"name": "work", "mountPath": at} in executor["containers"][0]["volumeMounts"]
        assert {"name": "work", **volume} in executor["volumes"] and {"name": "work", **volume} in driver["volumes"]
        assert executor["securityContext"]["fsGroup"] == driver["securityContext"]["fsGroup"]


def test_the_pool_s_critical_lane_reaches_its_scheduler_sidecar() -> None:
    def lane_of(objects: list[dict[str, Any]]) -> str:
        sidecar = next(c for c in _driver(objects)["containers"] if c["name"] == "scheduler")
        args: list[str] = sidecar["args"]
        return args[args.index("--critical-lane") + 1]

    body, model = _pool()
    assert lane_of(pool_objects(body, model, "sluice-system", "t")) == "1"  # CRITICAL_LANE, the default
    body, model = _pool(criticalLane=3)
    assert lane_of(pool_objects(body, model, "sluice-system", "t")) == "3"


def test_the_executors_jit_choice_reaches_the_runtime_as_its_setting_and_a_typo_is_refused() -> None:
    from pydantic import ValidationError

    from sluice.api.constants import EXECUTOR_JIT_CONF

    _, model = _pool()
    assert spark_conf(model, "sluice-system")[EXECUTOR_JIT_CONF] == "tiered"  # HotSpot's default
    body, model = _pool(executor={"jit": "c1"})
    assert spark_conf(model, "sluice-system")[EXECUTOR_JIT_CONF] == "c1"
    args = _driver(pool_objects(body, model, "sluice-system", "t"))["containers"][0]["args"]
    assert f"{EXECUTOR_JIT_CONF}=c1" in args
    with pytest.raises(ValidationError, match="jit"):
        _pool(executor={"jit": "C2"})


def test_the_executors_urgent_reserve_reaches_the_runtime_as_its_setting() -> None:
    from pydantic import ValidationError

    from sluice.api.constants import URGENT_RESERVE, URGENT_RESERVE_CONF
    from sluice.operator.builders import spark_conf

    _, model = _pool()
    assert spark_conf(model, "sluice-system")[URGENT_RESERVE_CONF] == str(URGENT_RESERVE) == "0"  # off
    _, model = _pool(executor={"urgentReserve": 1})
    assert spark_conf(model, "sluice-system")[URGENT_RESERVE_CONF] == "1"
    with pytest.raises(ValidationError, match="urgentReserve"):
        _pool(executor={"urgentReserve": -1})


def test_the_executors_bulk_tasks_reach_the_runtime_only_where_given_and_more_than_four_a_core_are_refused() -> None:
    from pydantic import ValidationError

    from sluice.api.constants import BULK_TASKS_CONF
    from sluice.operator.builders import spark_conf

    _, model = _pool(executor={"cores": 2})
    assert BULK_TASKS_CONF not in spark_conf(model, "sluice-system")  # the runtime then takes the cores
    _, model = _pool(executor={"cores": 2, "bulkTasks": 4})
    assert spark_conf(model, "sluice-system")[BULK_TASKS_CONF] == "4"
    with pytest.raises(ValidationError, match=r"bulkTasks 9 is more than 4 x cores \(8\); give at most that"):
        _pool(executor={"cores": 2, "bulkTasks": 9})
    with pytest.raises(ValidationError, match="bulkTasks"):
        _pool(executor={"bulkTasks": 0})


def test_the_pool_s_start_warm_up_reaches_the_runtime_in_seconds_and_a_long_one_is_refused() -> None:
    from pydantic import ValidationError

    from sluice.api.constants import START_WARMUP_CONF

    _, model = _pool()
    assert spark_conf(model, "sluice-system")[START_WARMUP_CONF] == "45"  # the default
    body, model = _pool(startWarmup="0s")
    args = _driver(pool_objects(body, model, "sluice-system", "t"))["containers"][0]["args"]
    assert f"{START_WARMUP_CONF}=0" in args  # off
    with pytest.raises(ValidationError, match="longer than 5m"):
        _pool(startWarmup="10m")


def test_the_driver_is_not_restarted_while_its_start_s_warm_up_runs() -> None:
    from sluice.operator.builders import STARTUP_PROBES

    body, model = _pool(startWarmup="5m")
    runtime = _driver(pool_objects(body, model, "sluice-system", "t"))["containers"][0]
    startup = runtime["startupProbe"]  # liveness counts only once this passed
    assert startup["httpGet"] == runtime["livenessProbe"]["httpGet"]
    assert startup["periodSeconds"] * STARTUP_PROBES >= model.spec.startWarmup.seconds + 90 + 60  # + executor + Spark

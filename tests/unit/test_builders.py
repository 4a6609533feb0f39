"""What a StreamingPool becomes: image and pull secrets for the driver and the executors."""

from __future__ import annotations

from typing import Any

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
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    assert "regcred" in yaml.safe_dump(config)  # the executor pod template Spark reads
    body, model = _pool()
    assert "imagePullSecrets" not in _driver(pool_objects(body, model, "sluice-system", "t"))

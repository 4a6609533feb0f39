"""Kubernetes objects for a StreamingPool (pure: spec in, manifests out, no I/O).

Everything lives in the operator's namespace and is owned by the (cluster-scoped) pool, so
deleting the pool deletes them (the garbage collector follows owner references).
"""

from __future__ import annotations

from typing import Any

import yaml

from sluice.api.constants import (
    API_VERSION,
    BLOCK_MANAGER_PORT,
    BULK_TASKS_CONF,
    CONTROL_PORT,
    DRIVER_PORT,
    EXECUTOR_JIT_CONF,
    LOCALITY_WAIT,
    METRICS_PORT,
    OPERATOR_POD_LABEL,
    SCHEDULER_PORT,
    START_WARMUP_CONF,
    URGENT_RESERVE_CONF,
    WARMUP_CONF,
)
from sluice.api.pool import StreamingPool

from . import settings

STARTUP_PROBES = 60
"""The driver's startup probe's tries, 10 s apart: Spark's start, the first executor pod's (the
runtime waits up to 90 s for it) and the longest `spec.startWarmup` (5m) fit in 10 minutes."""

RUNTIME_URL_ANNOTATION = "sluice.dev/runtime-url"
"""Overrides where the operator reaches the pool's runtime (default: its in-cluster Service)."""


WORKDIR = "/var/lib/sluice"
"""The runtime's work directory in the driver pod: the checkpoint volume is mounted here."""


def base_name(pool: str) -> str:
    return f"sluice-pool-{pool}"


def labels(pool: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "sluice-runtime", "app.kubernetes.io/managed-by": "sluice", "sluice.dev/pool": pool}


def image_of(model: StreamingPool) -> str:
    """The pool's image: its spec.image, else the operator's runtime image."""
    return model.spec.image or settings.current().runtime_image


def executor_selector(pool: str) -> str:
    """The label selector of a pool's executor pods (Spark labels them spark-role=executor)."""
    return f"sluice.dev/pool={pool},spark-role=executor"


def owner_reference(pool: dict[str, Any]) -> dict[str, Any]:
    meta = pool["metadata"]
    return {"apiVersion": API_VERSION, "kind": "StreamingPool", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def runtime_url(pool: dict[str, Any], namespace: str) -> str:
    annotations = pool["metadata"].get("annotations") or {}
    override = annotations.get(RUNTIME_URL_ANNOTATION)
    if override:
        return str(override).rstrip("/")
    return f"http://{base_name(pool['metadata']['name'])}.{namespace}.svc:{CONTROL_PORT}"


def _meta(name: str, namespace: str, pool: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": labels(pool["metadata"]["name"]),
            "ownerReferences": [owner_reference(pool)]}


def pull_secrets(model: StreamingPool) -> list[dict[str, str]]:
    return [{"name": secret} for secret in model.spec.imagePullSecrets]


_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True}
"""Every container of a pool pod: nothing written outside its volumes (Spark's scratch space is /tmp, an emptyDir)."""
_SIDECAR_PROBE = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{SCHEDULER_PORT}/healthz', timeout=5)"


def executor_pod_template(model: StreamingPool) -> dict[str, Any]:
    """Executors mount the pool's checkpoint volume (a claim or a host directory) where the driver
    does: a stateful query's tasks write its state store's files under the checkpoint. Without
    one (an emptyDir each), a stateful query's state stays in the executor pod that wrote it."""
    checkpoints = model.spec.checkpoints
    shared = checkpoints.claimName is not None or checkpoints.hostPath is not None
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {**labels(model.metadata.name), "sluice.dev/role": "executor"}},
        "spec": {
            **({"imagePullSecrets": pull_secrets(model)} if model.spec.imagePullSecrets else {}),
            # fsGroup: as the driver's, a checkpoint claim's volume is made writable by the runtime's user
            "securityContext": {"runAsNonRoot": True, "runAsUser": 185, "fsGroup": 185,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "automountServiceAccountToken": False,  # an executor never calls the API server
            "containers": [{
                "name": "spark-kubernetes-executor",
                # Spark mounts its local dirs itself; the JVM's and Netty's scratch files go to /tmp,
                # and so do the jars an executor fetches from the driver (into its working directory)
                "securityContext": _CONTAINER_SECURITY,
                "workingDir": "/tmp",
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "work", "mountPath": WORKDIR}],
            }],
            "volumes": [{"name": "tmp", "emptyDir": {}},
                        {"name": "work", **(checkpoints.volume() if shared else {"emptyDir": {}})}],
        },
    }


def spark_conf(model: StreamingPool, namespace: str) -> dict[str, str]:
    name = base_name(model.metadata.name)
    executor = model.spec.executor
    # the runtime starts with minExecutors; the target (spec.executors, `kubectl scale`) goes
    # through the control API, so scaling never changes the pod template and restarts the driver
    initial = model.spec.minExecutors
    return {
        "spark.master": "k8s://https://kubernetes.default.svc",
        "spark.submit.deployMode": "client",
        # executors dial the driver pod's own IP (Kubernetes expands $(VAR) from the pod's env):
        # a Service name would resolve only once the pod is Ready, which waits for Spark itself
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.host": "$(SLUICE_POD_IP)",
        # executor pods are owned by the driver pod, so deleting it (or the pool) leaves no orphans
        "spark.kubernetes.driver.pod.name": "$(SLUICE_POD_NAME)",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": image_of(model),
        "spark.kubernetes.authenticate.driver.serviceAccountName": name,
        "spark.kubernetes.executor.podTemplateFile": "/etc/sluice/executor-pod.yaml",
        "spark.kubernetes.executor.label.sluice.dev/pool": model.metadata.name,
        "spark.executor.cores": str(executor.cores),
        "spark.executor.memory": f"{executor.memory.mib}m",
        **({"spark.kubernetes.executor.request.cores": executor.cpuRequest.text} if executor.cpuRequest else {}),
        WARMUP_CONF: f"{executor.warmup.seconds:g}",
        START_WARMUP_CONF: f"{model.spec.startWarmup.seconds:g}",
        EXECUTOR_JIT_CONF: executor.jit,
        URGENT_RESERVE_CONF: str(executor.urgentReserve),
        **({BULK_TASKS_CONF: str(executor.bulkTasks)} if executor.bulkTasks is not None else {}),
        "spark.executor.instances": str(initial),
        "spark.dynamicAllocation.enabled": "false",
        "spark.scheduler.mode": "FAIR" if model.spec.policy != "fifo" else "FIFO",
        "spark.locality.wait": LOCALITY_WAIT,
        **({"spark.kubernetes.container.image.pullSecrets": ",".join(model.spec.imagePullSecrets)}
           if model.spec.imagePullSecrets else {}),
    }


def pool_objects(pool: dict[str, Any], model: StreamingPool, namespace: str, token: str) -> list[dict[str, Any]]:
    """All objects a pool becomes; `token` is the control API's bearer token (a new one or the Secret's)."""
    name = base_name(model.metadata.name)
    sel = labels(model.metadata.name)
    conf = spark_conf(model, namespace)
    capacity = model.spec.executor.cores * max(model.spec.maxExecutors, 1)
    runtime_args = ["python", "-m", "sluice.runtime", "--port", str(CONTROL_PORT), "--metrics-port", str(METRICS_PORT),
                    "--token-file", "/etc/sluice-token/token",
                    "--workdir", WORKDIR, "--files-root", model.spec.filesRoot,
                    "--scheduler", f"http://127.0.0.1:{SCHEDULER_PORT}", "--master", conf["spark.master"]]
    runtime_args += [arg for key, value in conf.items() if key != "spark.master" for arg in ("--conf", f"{key}={value}")]
    driver = model.spec.driver
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, namespace, pool),
        "spec": {
            "replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {**sel, "sluice.dev/role": "driver"}},
            "template": {
                "metadata": {"labels": {**sel, "sluice.dev/role": "driver"}},
                "spec": {
                    "serviceAccountName": name,
                    **({"imagePullSecrets": pull_secrets(model)} if model.spec.imagePullSecrets else {}),
                    # fsGroup: a checkpoint claim's volume is made writable by the runtime's user
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 185, "fsGroup": 185,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                        {
                            "name": "runtime", "image": image_of(model), "args": runtime_args,
                            "ports": [{"name": "control", "containerPort": CONTROL_PORT},
                                      {"name": "metrics", "containerPort": METRICS_PORT},
                                      {"name": "driver", "containerPort": DRIVER_PORT},
                                      {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT},
                                      {"name": "spark-ui", "containerPort": 4040}],
                            "env": [{"name": "SLUICE_POLICY", "value": model.spec.policy},
                                    {"name": "SLUICE_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                    {"name": "SLUICE_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                            "resources": {"requests": {"cpu": driver.cpuRequest.text if driver.cpuRequest else str(driver.cores),
                                                       "memory": driver.memory.text},
                                          "limits": {"memory": driver.memory.text}},
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10},
                            # the runtime answers once Spark, its first executor and the start's
                            # warm-up (spec.startWarmup, up to 5m) are through: liveness waits for it
                            "startupProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10,
                                             "failureThreshold": STARTUP_PROBES},
                            # restarted only after two minutes without an answer: a driver restart
                            # replays every query's batch in flight, so a long GC pause must not cause one
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 20,
                                              "timeoutSeconds": 5, "failureThreshold": 6},
                            "volumeMounts": [{"name": "token", "mountPath": "/etc/sluice-token", "readOnly": True},
                                             {"name": "config", "mountPath": "/etc/sluice", "readOnly": True},
                                             {"name": "work", "mountPath": WORKDIR},
                                             {"name": "tmp", "mountPath": "/tmp"}],
                            "securityContext": _CONTAINER_SECURITY,
                        },
                        {
                            "name": "scheduler", "image": image_of(model),
                            "args": ["python", "-m", "sluice.scheduler", "--host", "127.0.0.1", "--port", str(SCHEDULER_PORT),
                                     "--policy", model.spec.policy,
                                     "--capacity", str(capacity), "--critical-lane", str(model.spec.criticalLane)],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                            # it listens on loopback only, where the kubelet's HTTP probes cannot reach: ask from inside
                            "livenessProbe": {"exec": {"command": ["python", "-c", _SIDECAR_PROBE]}, "periodSeconds": 30,
                                              "timeoutSeconds": 10, "failureThreshold": 4},
                            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            "securityContext": _CONTAINER_SECURITY,
                        },
                    ],
                    "volumes": [{"name": "token", "secret": {"secretName": f"{name}-token"}},
                                {"name": "config", "configMap": {"name": f"{name}-config"}},
                                {"name": "work", **model.spec.checkpoints.volume()},
                                {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
    control = {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, namespace, pool),
               "spec": {"selector": {**sel, "sluice.dev/role": "driver"},
                        "ports": [{"name": "control", "port": CONTROL_PORT, "targetPort": "control"}]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, pool)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(name, namespace, pool),
            "rules": [
                # the Spark driver creates and deletes its executor pods and their config maps, and
                # looks up claims it might reuse (spark.kubernetes.driver.reusePersistentVolumeClaim)
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "delete", "deletecollection"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list"]},
            ]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(name, namespace, pool),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(f"{name}-token", namespace, pool),
              "type": "Opaque", "stringData": {"token": token}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(f"{name}-config", namespace, pool),
              "data": {"executor-pod.yaml": yaml.safe_dump(executor_pod_template(model), sort_keys=False)}}
    return [account, role, binding, secret, config, control, *network_policies(model, namespace, pool), deployment]


def network_policies(model: StreamingPool, namespace: str, pool: dict[str, Any]) -> list[dict[str, Any]]:
    """Who may reach a pool's pods: its driver's control API only the operator's pods; the driver's
    Spark ports only the pool's own executors; its metrics port the operator and the pods of the
    namespaces the operator is told Prometheus runs in (`Settings.metrics_from`; the kubelet's probe
    comes from the node, which NetworkPolicy never blocks); the executors only the pool's driver and
    executors. Egress is left open (sources and sinks are anywhere). Enforced by the cluster's
    network plugin, where it enforces NetworkPolicy."""
    name = base_name(model.metadata.name)
    pool_pods = {"sluice.dev/pool": model.metadata.name}
    driver = {**labels(model.metadata.name), "sluice.dev/role": "driver"}
    executors = {**pool_pods, "spark-role": "executor"}
    operator = dict([OPERATOR_POD_LABEL])
    monitoring = settings.current().metrics_from
    scrapers = [{"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(monitoring)}]}}] if monitoring else []

    def tcp(*ports: int) -> list[dict[str, Any]]:
        return [{"protocol": "TCP", "port": port} for port in ports]

    def policy(suffix: str, selected: dict[str, str], ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _meta(f"{name}-{suffix}", namespace, pool),
                "spec": {"podSelector": {"matchLabels": selected}, "policyTypes": ["Ingress"], "ingress": ingress}}

    return [
        policy("driver", driver, [
            {"from": [{"podSelector": {"matchLabels": operator}}], "ports": tcp(CONTROL_PORT)},
            {"from": [{"podSelector": {"matchLabels": executors}}], "ports": tcp(DRIVER_PORT, BLOCK_MANAGER_PORT)},
            {"from": [{"podSelector": {"matchLabels": operator}}, *scrapers], "ports": tcp(METRICS_PORT)},
        ]),
        # shuffle and broadcast blocks move between executors and from the driver on ports Spark picks
        policy("executors", executors, [{"from": [{"podSelector": {"matchLabels": pool_pods}}]}]),
    ]

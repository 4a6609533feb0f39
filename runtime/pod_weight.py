"""A joining executor yields its node's CPU until it is warm: its pod's CPU request, lowered in place.

On a node the kernel weighs each pod's cgroup by its CPU request (cgroup v1 `cpu.shares` =
millicores x 1024 / 1000; v2's `cpu.weight` alike), whatever its threads' priorities. A new
executor's JVM compiles its task paths for its first 45-50 s (0.6-0.96 of a 2-core node, measured
on pods), and at the pool's request its compilers weigh as much as the warm executor and the
driver beside it, whose batches the urgent queries wait on. While an executor warms up before
urgent work (`spec.executor.warmup`, `Warmup.java`: it takes bulk tasks only) the runtime lowers
its pod's request to the pool's `spec.executor.warmupCpuRequest` (10m by default) through the pod's `resize` subresource (in-place resize,
Kubernetes 1.33 and later by default) and gives the pool's request back once it is warm. Shares
weigh only under contention: on a busy node the cold executor takes what the warm pods leave, on
an idle node it runs at full speed. The pool's first executors have no warm one to yield to and
keep their request (as `Warmup` lets them take every task).

`plan` is pure; `PodWeights` is the thin shell: the API server's REST over the driver pod's
service account (its Role may patch `pods/resize`), the executor pods found by Spark's labels.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from sluice.api.constants import WARMUP_CPU_REQUEST

log = logging.getLogger("sluice.runtime.pod_weight")

CONTAINER = "spark-kubernetes-executor"
"""The executor container's name (the pool's executor pod template names it as Spark does)."""
APP_LABEL = "spark-app-selector"
EXECUTOR_LABEL = "spark-exec-id"
"""The labels Spark gives each executor pod: its application's id, its executor id."""
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def plan(cold: Collection[str], warm: Collection[str], lowered: Collection[str]) -> tuple[list[str], list[str]]:
    """(executors to lower, executors to give their request back). A cold executor yields while a
    warm one runs; one that is no longer cold (warm, or gone), or every one once no warm executor
    is left (the cold ones then take every task), gets its request back."""
    still = set(cold) if warm else set()
    return sorted(still - set(lowered)), sorted(set(lowered) - still)


class InCluster:
    """The API server as a pod's service account reaches it (KUBERNETES_SERVICE_HOST, its token, its CA)."""

    def __init__(self, account: Path = ACCOUNT, env: Mapping[str, str] = os.environ) -> None:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        if not host or not (account / "token").exists():
            raise OSError("not in a pod with a service account token")
        self.base = f"https://{host}:{port}"
        self.namespace = (account / "namespace").read_text().strip()
        self._token_file = account / "token"
        self._tls = ssl.create_default_context(cafile=str(account / "ca.crt"))

    def call(self, method: str, path: str, body: Any = None, content: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token_file.read_text().strip()}", "Content-Type": content,
            "Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=5, context=self._tls) as response:
            return json.loads(response.read() or b"null")


class PodWeights:
    """Lowers cold executors' pod requests and gives them back once warm (`plan`), one call each."""

    def __init__(self, api: InCluster, app_id: str, request: str, cold_request: str = WARMUP_CPU_REQUEST) -> None:
        self.api = api
        self.app_id = app_id
        self.request = request
        """The pool's CPU request an executor (what a warm one asks for)."""
        self.cold_request = cold_request
        """What a cold one asks for while it yields."""
        self.lowered: set[str] = set()
        self.refused: set[str] = set()
        """Executors whose lowering was refused: not asked again (a restore is, until it goes through)."""
        self.trouble = ""
        """The last refusal, in one sentence ("" while every resize went through)."""

    def _pod(self, executor: str) -> str | None:
        selector = urllib.parse.quote(f"{APP_LABEL}={self.app_id},{EXECUTOR_LABEL}={executor}")
        found = self.api.call("GET", f"/api/v1/namespaces/{self.api.namespace}/pods?labelSelector={selector}")
        items = (found or {}).get("items") or []
        return str(items[0]["metadata"]["name"]) if items else None

    def _resize(self, executor: str, cpu: str) -> bool:
        """Whether the executor's pod now asks for `cpu` (False: refused; a gone pod counts as done)."""
        try:
            pod = self._pod(executor)
            if pod is None:
                return True
            patch = {"spec": {"containers": [{"name": CONTAINER, "resources": {"requests": {"cpu": cpu}}}]}}
            self.api.call("PATCH", f"/api/v1/namespaces/{self.api.namespace}/pods/{pod}/resize", patch,
                          "application/strategic-merge-patch+json")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return True
            self._refused(f"resizing executor {executor}'s pod to {cpu} CPU: HTTP {error.code} {error.reason}")
            return False
        except (OSError, ValueError) as error:
            self._refused(f"resizing executor {executor}'s pod to {cpu} CPU: {error}")
            return False
        log.info("executor %s's pod now asks for %s CPU", executor, cpu)
        return True

    def _refused(self, why: str) -> None:
        if why != self.trouble:
            log.warning("%s (a cold executor keeps the pool's CPU weight)", why)
        self.trouble = why

    def apply(self, executors: Mapping[str, str]) -> None:
        """`executors`: id -> "cold" | "warm", the lane's warm-up as the driver knows it."""
        cold = [e for e, state in executors.items() if state == "cold"]
        warm = [e for e, state in executors.items() if state == "warm"]
        lower, restore = plan(cold, warm, self.lowered)
        for executor in restore:
            if self._resize(executor, self.request):
                self.lowered.discard(executor)
        for executor in lower:
            if executor in self.refused:
                continue
            if self._resize(executor, self.cold_request):
                self.lowered.add(executor)
            else:
                self.refused.add(executor)

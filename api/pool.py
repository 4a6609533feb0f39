"""The StreamingPool custom resource: one shared Spark runtime that hosts many tenants' queries."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import CommonStatus, DnsName, Model, ObjectMeta
from .constants import API_VERSION, ApiVersion, Policy
from .units import Cpu, Memory


class ExecutorShape(Model):
    """Size of one Spark executor pod."""

    cores: int = Field(default=1, ge=1, le=64)
    """Task slots (cores) per executor."""
    memory: Memory = Memory.parse("1Gi")
    """Executor memory, e.g. '2Gi'."""
    cpuRequest: Cpu | None = None
    """CPU the executor pod requests from the scheduler, e.g. '500m'; omitted: `cores`. Lower it
    to pack executors on small nodes (Spark still runs `cores` task slots in each)."""


class DriverShape(Model):
    """Size of the driver pod (runtime + scheduler sidecar)."""

    cores: int = Field(default=1, ge=1, le=64)
    """Driver cores."""
    memory: Memory = Memory.parse("2Gi")
    """Driver memory, e.g. '2Gi'."""
    cpuRequest: Cpu | None = None
    """CPU the driver pod's runtime container requests, e.g. '500m'; omitted: `cores`."""


class Checkpoints(Model):
    """Where the pool's queries keep their checkpoints (offsets, commits, state): a volume that
    outlives the driver pod, so a restarted driver resumes every query where it stopped."""

    model_config = Model.model_config | {
        "json_schema_extra": {"x-kubernetes-validations": [
            {"rule": "!(has(self.claimName) && has(self.hostPath))",
             "message": "set one of checkpoints.claimName and checkpoints.hostPath, not both"}]}
    }

    claimName: DnsName | None = None
    """A PersistentVolumeClaim in the operator's namespace (ReadWriteOnce is enough: one driver
    pod mounts it). The choice for real clusters."""
    hostPath: str | None = Field(default=None, pattern=r"^/.*")
    """A directory on the node, writable by uid 185 (single-node and development clusters only:
    a driver rescheduled to another node finds none of its checkpoints)."""

    @model_validator(mode="after")
    def _one(self) -> Checkpoints:
        if self.claimName is not None and self.hostPath is not None:
            raise ValueError("set one of checkpoints.claimName and checkpoints.hostPath, not both")
        return self

    def volume(self) -> dict[str, object]:
        """The pod volume: the claim, the host directory, or (neither) an emptyDir lost with the pod."""
        if self.claimName is not None:
            return {"persistentVolumeClaim": {"claimName": self.claimName}}
        if self.hostPath is not None:
            return {"hostPath": {"path": self.hostPath, "type": "DirectoryOrCreate"}}
        return {"emptyDir": {}}


class Quota(Model):
    """Limits for one tenant namespace on this pool."""

    maxQueries: int | None = Field(default=None, ge=0)
    """At most this many queries from the namespace; omitted: unlimited."""
    weight: float = Field(default=1.0, gt=0)
    """The tenant's weight: under `fair` its queries share one Spark FAIR pool of this weight
    (relative to other tenants'). Reaches a query when it is next registered (created, updated,
    or the operator restarts)."""


_MIN_EXECUTORS, _MAX_EXECUTORS = 1, 4
_MIN = f"(has(self.minExecutors) ? self.minExecutors : {_MIN_EXECUTORS})"
_MAX = f"(has(self.maxExecutors) ? self.maxExecutors : {_MAX_EXECUTORS})"


class StreamingPoolSpec(Model):
    """A shared Spark runtime and its rules of admission."""

    # the same bounds as `_bounds` below, for the apiserver (`kubectl scale` too)
    model_config = Model.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {"rule": f"{_MIN} <= {_MAX}", "message": "minExecutors must be at most maxExecutors"},
                {"rule": f"!has(self.executors) || ({_MIN} <= self.executors && self.executors <= {_MAX})",
                 "message": "executors must lie within minExecutors..maxExecutors (default 1..4); "
                            "scale within them or change the bounds"},
            ]
        }
    }

    image: str | None = Field(default=None, min_length=1)
    """Container image of the runtime (Spark driver + executors) and scheduler sidecar; omitted:
    the operator's runtime image (the chart's `runtimeImage`)."""
    imagePullSecrets: list[DnsName] = Field(default_factory=list, max_length=16)
    """Secrets (in the operator's namespace) for pulling the image, for the driver and executors."""
    executor: ExecutorShape = Field(default_factory=ExecutorShape)
    """Executor pod shape."""
    driver: DriverShape = Field(default_factory=DriverShape)
    """Driver pod shape."""
    minExecutors: int = Field(default=_MIN_EXECUTORS, ge=0)
    """Fewest executors the autoscaler keeps."""
    maxExecutors: int = Field(default=_MAX_EXECUTORS, ge=1)
    """Most executors the autoscaler may request."""
    executors: int | None = Field(default=None, ge=0)
    """Fixed executor count (set by `kubectl scale`); omitted: DS2 chooses within min..max."""
    checkpoints: Checkpoints = Field(default_factory=Checkpoints)
    """Checkpoint volume; omitted: an emptyDir, so a restarted driver pod starts every query
    afresh from its `startingOffsets` (set `claimName` to keep them)."""
    policy: Policy = "cameo"
    """Dispatch order across queries: fifo, fair (weighted per tenant), edf or cameo."""
    allowedNamespaces: list[DnsName] = Field(default_factory=list, max_length=256)
    """Namespaces whose queries may use the pool; empty: every namespace."""
    quotas: dict[DnsName, Quota] = Field(default_factory=dict, max_length=256)
    """Per-namespace limits, keyed by namespace."""

    @model_validator(mode="after")
    def _bounds(self) -> StreamingPoolSpec:
        if self.minExecutors > self.maxExecutors:
            raise ValueError(
                f"minExecutors ({self.minExecutors}) is above maxExecutors ({self.maxExecutors}); "
                "make minExecutors at most maxExecutors"
            )
        if self.executors is not None and not (
            self.minExecutors <= self.executors <= self.maxExecutors
        ):
            raise ValueError(
                f"executors ({self.executors}) is outside minExecutors..maxExecutors "
                f"({self.minExecutors}..{self.maxExecutors})"
            )
        return self

    def admits(self, namespace: str) -> bool:
        return not self.allowedNamespaces or namespace in self.allowedNamespaces


class StreamingPoolStatus(CommonStatus):
    """Observed state of a StreamingPool."""

    queries: int = 0
    """Queries hosted now."""
    policy: str = ""
    """Policy in force."""
    selector: str = ""
    """Label selector of the pool's executor pods (the scale subresource's, for HPA and KEDA)."""


class StreamingPool(Model):
    """A shared Spark runtime (cluster-scoped) that hosts many tenants' streaming queries."""

    apiVersion: ApiVersion = API_VERSION
    kind: Literal["StreamingPool"] = "StreamingPool"
    metadata: ObjectMeta
    spec: StreamingPoolSpec = Field(default_factory=StreamingPoolSpec)
    status: StreamingPoolStatus | None = None

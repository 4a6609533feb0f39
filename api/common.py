"""Pieces shared by both custom resources: the strict base model, metadata and status parts."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

DnsName = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", min_length=1, max_length=63),
]


def nulls_absent(model: type[BaseModel], data: Any) -> Any:
    """`data` as the API server keeps it: a known field set to null is dropped (a structural schema
    prunes it, so its default applies), and so is a null entry of a map field; an unknown field
    stays, null or not, to be refused (kubectl's strict field validation refuses it)."""
    if not isinstance(data, dict):
        return data
    fields = {**model.model_fields, **{f.alias: f for f in model.model_fields.values() if f.alias}}
    out = {}
    for key, value in data.items():
        field = fields.get(key)
        if field is not None and value is None:
            continue
        if field is not None and isinstance(value, dict) and get_origin(field.annotation) is dict:
            value = {k: v for k, v in value.items() if v is not None}
        out[key] = value
    return out


class Model(BaseModel):
    """Base of every model read from a manifest: unknown fields are errors, null fields absent."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # no coercion: `rowsPerSecond: true` is not 1, `"5"` is not 5
        use_attribute_docstrings=True,
        validate_assignment=True,
        populate_by_name=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _nulls_absent(cls, data: Any) -> Any:
        return nulls_absent(cls, data)


class ObjectMeta(BaseModel):
    """The Kubernetes object metadata Sluice reads; the API server owns the rest of it."""

    # A key that is no field of Kubernetes' ObjectMeta is refused, as the API server refuses it
    # (kubectl's strict field validation); the server's own fields (uid, resourceVersion, ...)
    # are accepted, so a manifest read back from the cluster validates, and left out of dumps.
    model_config = ConfigDict(extra="forbid")

    name: DnsName
    namespace: DnsName | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None
    generateName: Any = Field(default=None, exclude=True)
    uid: Any = Field(default=None, exclude=True)
    resourceVersion: Any = Field(default=None, exclude=True)
    creationTimestamp: Any = Field(default=None, exclude=True)
    deletionTimestamp: Any = Field(default=None, exclude=True)
    deletionGracePeriodSeconds: Any = Field(default=None, exclude=True)
    ownerReferences: Any = Field(default=None, exclude=True)
    finalizers: Any = Field(default=None, exclude=True)
    managedFields: Any = Field(default=None, exclude=True)
    selfLink: Any = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_absent(cls, data: Any) -> Any:
        return nulls_absent(cls, data)


class Condition(Model):
    """A Kubernetes-style condition (metav1.Condition shape)."""

    type: str
    """Condition type, e.g. Ready, Admitted, Registered."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    reason: str = ""
    """One CamelCase word for the last transition."""
    message: str = ""
    """A sentence for humans about the last transition."""
    lastTransitionTime: str = ""
    """RFC 3339 time of the last change of status."""
    observedGeneration: int | None = None
    """The .metadata.generation the condition was set for."""


class LatencyStatus(Model):
    """End-to-end latency observed over the recent window (event production to sink commit)."""

    p50Ms: float | None = None
    """Median latency in milliseconds."""
    p99Ms: float | None = None
    """99th percentile latency in milliseconds."""
    p99: str = ""
    """The p99 with its unit, for `kubectl get` (e.g. 812ms, 1.5s)."""


class ExecutorsStatus(Model):
    """Executor counts."""

    current: int = 0
    """Executors registered now."""
    target: int = 0
    """Executors requested by the last scaling decision."""


class ScalingDecision(Model):
    """The last DS2 scaling decision."""

    time: str = ""
    """RFC 3339 time of the decision."""
    fromExecutors: int = 0
    """Executors before the decision."""
    toExecutors: int = 0
    """Executors after the decision."""
    reason: str = ""
    """Why, in a sentence."""
    bound: str = ""
    """Which bound decided: rates (DS2) or slas (the simulated schedule needs more to keep every SLA)."""


class CommonStatus(Model):
    """Status fields both resources carry."""

    phase: str = "Pending"
    """Lifecycle phase."""
    message: str = ""
    """A sentence on the current phase."""
    conditions: list[Condition] = Field(default_factory=list)
    """Current conditions."""
    observedGeneration: int | None = None
    """The .metadata.generation last reconciled."""
    latency: LatencyStatus | None = None
    """Observed end-to-end latency."""
    slaAttainment: float | None = Field(default=None, ge=0, le=1)
    """Share of batches committed within the latency target (0..1)."""
    attainment: str = ""
    """slaAttainment as a percentage, for `kubectl get` (e.g. 97.5%)."""
    inputRate: float | None = None
    """Rows per second arriving."""
    processingRate: float | None = None
    """Rows per second processed."""
    executors: ExecutorsStatus | None = None
    """Executors current and target."""
    bottleneck: str = ""
    """What takes the largest share of recent batches' critical path (a stage, waiting for cores, the gate, planning, ...)."""
    lastScalingDecision: ScalingDecision | None = None
    """The last scaling decision, if any."""


def query_labels(key: str) -> tuple[str, str]:
    """A query's metric labels (`tenant`, `query`) from its key `tenant/name`: the one label format
    of the operator's, the runtime's and the scheduler's metrics, so their series join."""
    tenant, _, name = key.partition("/")
    return (tenant, name) if name else ("default", tenant)


SHOWN = 60
"""Characters of a value an error message quotes (a 5,000-character value stays one short sentence)."""


def shown(text: str, limit: int = SHOWN) -> str:
    """User input as an error message quotes it: control characters escaped (the message stays
    one line), at most `limit` characters and "..." after."""
    line = "".join(c if c >= " " else c.encode("unicode_escape").decode() for c in text)
    return line if len(line) <= limit else line[:limit] + "..."

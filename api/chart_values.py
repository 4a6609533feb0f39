"""The Helm chart's values as a model: `values.schema.json` is generated from it (as crds/ is from
the resources' models), so `helm install --set replicas=two` fails with the field's name.
A test keeps the model's defaults equal to values.yaml and the schema file equal to the model."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .common import DnsName
from .constants import (
    METRICS_FROM_NAMESPACES,
    OPERATOR_HEALTH_PORT,
    OPERATOR_METRICS_PORT,
    RUNTIME_IMAGE,
)


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Image(_Values):
    repository: str = Field(default="ghcr.io/sluice-dev/sluice-operator", min_length=1)
    """The operator image's repository (build it from images/operator.Dockerfile)."""
    tag: str = ""
    """Its tag; empty: the chart's appVersion."""
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Pdb(_Values):
    enabled: bool = False
    minAvailable: int | str = 1
    """A count or a percentage such as '50%'."""


class NetworkPolicy(_Values):
    enabled: bool = True
    """A NetworkPolicy on the operator's pods letting in only its health port and, from the
    namespaces below, its metrics port (each pool's pods get their own from the operator)."""
    metricsFromNamespaces: list[DnsName] = Field(default_factory=lambda: list(METRICS_FROM_NAMESPACES))
    """The namespaces whose pods may scrape the operator's and the pools' metrics ports (where your
    Prometheus runs); every other pod is kept out of them. Empty: only the operator scrapes pools."""


class PullSecret(_Values):
    name: str = Field(min_length=1)


class TenantRoles(_Values):
    enabled: bool = True
    """ClusterRoles aggregated into admin/edit and view for StreamingQueries."""
    readPools: bool = True
    """Every signed-in user may read StreamingPools."""


class Peering(_Values):
    enabled: bool = False
    """One replica acts, the others stand by (kopf peering)."""
    lifetimeSeconds: int = Field(default=60, ge=5, le=3600)
    """A standby takes over once the active replica's record is this old."""


Share = Annotated[str, StringConstraints(pattern=r"^(0?\.[0-9]*[1-9][0-9]*|1(\.0*)?)$")]
"""A share in (0, 1] as `--set` passes it (helm's --set keeps decimals as text)."""


class ServiceMonitor(_Values):
    enabled: bool = False
    interval: str = Field(default="30s", pattern=r"^[0-9]+(ms|s|m|h)$")
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels on the ServiceMonitor and the pools' PodMonitor: what your Prometheus selects on
    (kube-prometheus-stack: `release: <its release name>`)."""
    pools: bool = True
    """With `enabled`, also a PodMonitor for every pool's runtime pod (runtime and scheduler series
    on its control port)."""


class Metrics(_Values):
    port: int = Field(default=OPERATOR_METRICS_PORT, ge=1, le=65535)
    serviceMonitor: ServiceMonitor = Field(default_factory=ServiceMonitor)


Quantity = str | int | float


def _requests() -> dict[str, Quantity]:
    return {"cpu": "100m", "memory": "256Mi"}


def _limits() -> dict[str, Quantity]:
    return {"memory": "512Mi"}


class Resources(_Values):
    requests: dict[str, Quantity] = Field(default_factory=_requests)
    limits: dict[str, Quantity] = Field(default_factory=_limits)


class Alerts(_Values):
    enabled: bool = False
    """A PrometheusRule with Sluice's alerts (needs the Prometheus Operator's CRD)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels on the PrometheusRule: what your Prometheus selects rules by."""
    objective: Annotated[float, Field(gt=0, lt=1)] | Share = 0.99
    """The share of a query's rows that must meet its latency target (the SLO of the burn-rate
    alerts): 0.99 leaves an error budget of 1%."""
    pendingFor: str = Field(default="10m", pattern=r"^[0-9]+(s|m|h)$")
    """How long a query may stay Pending or Failed, or a pool Overloaded, before an alert."""


class Dashboard(_Values):
    enabled: bool = False
    """Sluice's Grafana dashboard as a ConfigMap for Grafana's dashboard sidecar."""
    labels: dict[str, str] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    """The label the sidecar watches (kube-prometheus-stack's default)."""


class ChartValues(_Values):
    """values.yaml of the Sluice chart."""

    image: Image = Field(default_factory=Image)
    replicas: int = Field(default=1, ge=0)
    """Operator replicas; above 1, enable `peering`."""
    peering: Peering = Field(default_factory=Peering)
    podDisruptionBudget: Pdb = Field(default_factory=Pdb)
    networkPolicy: NetworkPolicy = Field(default_factory=NetworkPolicy)
    imagePullSecrets: list[PullSecret] = Field(default_factory=list)
    nameOverride: str = ""
    fullnameOverride: str = ""
    healthPort: int = Field(default=OPERATOR_HEALTH_PORT, ge=1, le=65535)
    """kopf's liveness endpoint (/healthz)."""
    tenantRoles: TenantRoles = Field(default_factory=TenantRoles)
    watchNamespaces: list[DnsName] = Field(default_factory=list)
    """Namespaces whose StreamingQueries the operator watches; empty: all."""
    runtimeImage: str = Field(default=RUNTIME_IMAGE, min_length=1)
    """The image of pools without spec.image."""
    logLevel: Literal["debug", "info", "warning", "error"] = "info"
    resources: Resources = Field(default_factory=Resources)
    metrics: Metrics = Field(default_factory=Metrics)
    alerts: Alerts = Field(default_factory=Alerts)
    dashboard: Dashboard = Field(default_factory=Dashboard)
    podSecurityContext: dict[str, Any] = Field(default_factory=lambda: {
        "runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}})
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)


def values_schema() -> dict[str, Any]:
    """The JSON Schema helm checks values against (draft 2020-12)."""
    schema = ChartValues.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def values_schema_json() -> str:
    """What `sluice values-schema` prints and values.schema.json holds."""
    return json.dumps(values_schema(), indent=2, sort_keys=False) + "\n"

"""The CRD schema (what the real kube-apiserver checks) and the models (what `sluice validate` and
the operator check) agree on hostile manifests: what one refuses, the other refuses. Each is sent
to the API server as kubectl sends it (JSON, strict field validation) in a server-side dry run.

The one difference allowed, by design: what no schema can check (an expression parsed, a column
looked up in the rows before it, a DDL schema read; `ManifestError.semantic`) the API server
accepts and the models refuse; the operator then refuses the query with that sentence (the unit
fuzzing checks admission). Every other disagreement is a defect in one of them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from sluice.api.manifest import ManifestErrors, parse_document
from sluice.testing.controlplane import ControlPlane
from sluice.testing.manifests import every_mutation, mutated

pytestmark = pytest.mark.cluster
TENANTS = ("payments", "analytics")  # the examples' namespaces


@pytest.fixture(scope="module")
def server(crds_installed: ControlPlane) -> ControlPlane:
    for namespace in TENANTS:
        crds_installed.kubectl("create", "namespace", namespace, check=False)
    return crds_installed


def apiserver_refusal(plane: ControlPlane, document: dict[str, Any]) -> str | None:
    """The API server's refusal of `document` in a dry-run create ('' if accepted); None where
    kubectl could not send it at all (not JSON, or no namespace to send a query to)."""
    try:
        body = json.dumps(document, allow_nan=False).encode()
    except (ValueError, TypeError):
        return None
    if document.get("kind") == "StreamingPool":
        path = "/apis/sluice.dev/v1alpha1/streamingpools"
    else:
        namespace = document["metadata"].get("namespace") if isinstance(document.get("metadata"), dict) else None
        if namespace not in TENANTS:
            return None
        path = f"/apis/sluice.dev/v1alpha1/namespaces/{namespace}/streamingqueries"
    # one kept-alive connection for the thousands of cases: a new TLS connection for each more
    # than doubled this test's time
    code, status = plane.call("POST", f"{path}?dryRun=All&fieldValidation=Strict", body)
    if code < 300:
        return ""
    assert code < 500, f"the API server failed ({code}): {status}"
    if status.get("reason") == "AlreadyExists":
        return ""  # another test's object of that name: the store refuses only after validation passed
    return str(status.get("message", code))


def disagreement(plane: ControlPlane, document: dict[str, Any], what: str) -> str | None:
    refusal = apiserver_refusal(plane, document)
    if refusal is None:
        return None
    try:
        parse_document(document, "m.yaml")
        errors = []
    except ManifestErrors as refused:
        errors = refused.errors
    if refusal and not errors:
        return f"{what}: the API server refused it ({refusal[:200]}) and the models accepted it"
    if not refusal and any(not e.semantic for e in errors):
        return f"{what}: the models refused it ({errors[0]}) and the API server accepted it"
    return None


def test_every_mutated_example_gets_the_same_verdict_from_the_api_server_and_the_models(server: ControlPlane) -> None:
    cases = every_mutation()
    found = [d for d in (disagreement(server, document, what) for document, what in cases) if d]
    assert len(cases) > 4000
    assert found == [], f"{len(found)} of {len(cases)} disagree, e.g.:\n" + "\n".join(found[:10])


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_drawn_manifests_get_the_same_verdict_from_the_api_server_and_the_models(server: ControlPlane,
                                                                                  case: tuple[dict[str, Any], str]) -> None:
    document, what = case
    assert disagreement(server, document, what) is None

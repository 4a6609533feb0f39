"""The reference page (`docs/reference.md`), generated from the CRDs and the conditions' vocabulary.

`sluice reference > docs/reference.md` writes it; a test keeps the checked-in page equal to it, as
one keeps `crds/` equal to the models. Every field of both resources (spec and status) with its
type, default and description comes from the generated CRD schemas; every condition type and
reason, with what to do about it, from `CONDITIONS` and `REASONS` below (a test checks that the
operator sets no reason this table lacks).
"""

from __future__ import annotations

from typing import Any

CONDITIONS: dict[str, tuple[str, str]] = {
    "Ready": ("both", "True while a query runs on its pool (or is suspended as asked), or a pool's runtime answers. "
                      "`kubectl wait --for=condition=Ready` waits for it."),
    "Stalled": ("both", "True when nothing changes until a person acts: a failed query, an invalid manifest, a quota "
                        "or namespace rule, a full pool. kstatus (Flux, kpt) reads it as Failed."),
    "Reconciling": ("both", "True while something resolves itself: a runtime starting, a registration, a pool not "
                            "yet created, a source not yet reachable. kstatus reads it as InProgress."),
    "Admitted": ("query", "Whether the pool took the query: its pool exists, its namespace is allowed, quotas and "
                          "the driver's capacity leave room."),
    "Registered": ("query", "Whether the pool's runtime hosts the query."),
    "Overloaded": ("both", "True when the measured demand needs more executors than the pool may have."),
    "Scaled": ("pool", "Whether the runtime runs the executor count the pool asks for."),
}
"""Each condition type: which resource carries it, and what it means."""

REASONS: tuple[tuple[str, str, str], ...] = (
    ("Admitted", "Admitted", "The pool took the query."),
    ("Admitted", "PoolNotFound", "No StreamingPool of that name yet; it registers by itself once the pool exists. "
                                 "Fix `spec.pool` if the name is wrong."),
    ("Admitted", "NamespaceNotAllowed", "The pool's `spec.allowedNamespaces` leaves the query's namespace out: ask the "
                                        "platform team to add it, or use another pool."),
    ("Admitted", "QuotaExceeded", "The namespace has `quotas.<ns>.maxQueries` queries on the pool already: delete one "
                                  "or ask for a higher quota. It is retried."),
    ("Admitted", "FilesOutsideRoot", "A `files` path lies outside the pool's `spec.filesRoot/<namespace>`: write a "
                                     "path under it."),
    ("Admitted", "TaskSlotsReserved", "A Real-time query needs more task slots than the pool has left: raise the "
                                      "pool's `maxExecutors`, or run the query in micro-batches. It is retried."),
    ("Admitted", "DriverFull", "The pool's driver cannot plan one more query's batches at their intervals: raise "
                               "`spec.driver.cores`, loosen SLAs, or use another pool. It is retried."),
    ("Registered", "Registered", "The runtime hosts the query."),
    ("Registered", "RuntimeUnreachable", "The pool's runtime does not answer yet (its pod is starting); retried every "
                                         "few seconds. If it lasts, look at the pool's driver pod."),
    ("Registered", "Rejected", "The runtime refused the query (the message says why): fix the manifest."),
    ("Stalled", "InvalidSpec", "The manifest or pool spec does not validate (the message names the field): fix it "
                               "and apply again."),
    ("Stalled", "Failed", "The query failed in Spark (the message has Spark's first line): fix the cause; the "
                          "query restarts from its checkpoint when its spec changes."),
    ("Ready", "Running", "The query runs on its pool, or the pool's runtime answers."),
    ("Ready", "Suspended", "The query is suspended as `spec.suspend` asks; its checkpoint is kept."),
    ("Ready", "Starting", "The runtime is starting the query (a source not yet reachable is retried)."),
    ("Ready", "RuntimeReady", "The pool's runtime answers at its control API."),
    ("Ready", "RuntimeStarting", "The pool's runtime does not answer yet (its pod is starting)."),
    ("Overloaded", "WithinCapacity", "The executors carry the measured demand."),
    ("Overloaded", "DemandExceedsExecutors", "The demand needs more executors than `maxExecutors`: raise it, or move "
                                             "queries to another pool; SLAs are at risk until then."),
    ("Overloaded", "PoolOverloaded", "The query's pool is overloaded (see the pool's Overloaded condition)."),
    ("Scaled", "AtTarget", "The runtime runs the executors the pool asks for."),
    ("Scaled", "Scaling", "Executors are being added or removed (state moves first on a shrink)."),
    ("Scaled", "RuntimeUnreachable", "The pool's runtime does not answer; the target is applied once it does."),
    ("Scaled", "ExecutorTargetRejected", "The runtime refused the executor target (a local-mode runtime has no "
                                         "executors to add); the message says why."),
)
"""(condition type, reason, what it means and what to do). A reason that stands for a phase on
`Stalled` or `Reconciling` is the same word as on `Admitted` or `Registered`."""


def _type(node: dict[str, Any]) -> str:
    kind = str(node.get("type", "object"))
    if kind == "array":
        return f"list of {_type(node.get('items') or {})}"
    if kind == "object" and "additionalProperties" in node:
        return f"map of {_type(node['additionalProperties'])}"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    return kind


def _rows(node: dict[str, Any], path: str) -> list[str]:
    rows = []
    for name, child in (node.get("properties") or {}).items():
        where = f"{path}.{name}"
        default = child.get("default")
        text = " ".join(str(child.get("description", "")).split()).replace("|", "\\|")
        shown = "" if default is None else f"`{default}`"
        rows.append(f"| `{where}` | {_type(child)} | {shown} | {text} |")
        if child.get("type") == "object" and "properties" in child:
            rows += _rows(child, where)
        items = child.get("items") or {}
        if child.get("type") == "array" and "properties" in items:
            rows += _rows(items, f"{where}[]")
    return rows


def reference_markdown() -> str:
    """The whole page."""
    from .crd import crds

    out = ["# Reference", "",
           "Generated by `sluice reference` from the CRD models and the conditions' vocabulary; do not edit by "
           "hand (a test keeps it equal). `kubectl explain streamingquery.spec` shows the same descriptions on a "
           "cluster.", ""]
    for crd in crds():
        kind = crd["spec"]["names"]["kind"]
        version = crd["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        out += [f"## {kind}", "", " ".join(str(schema.get("description", "")).split()), ""]
        for part in ("spec", "status"):
            out += [f"### {kind} `.{part}`", "", "| field | type | default | description |", "|---|---|---|---|",
                    *_rows(schema["properties"][part], part), ""]
        columns = version.get("additionalPrinterColumns") or []
        out += [f"### `kubectl get` columns of {kind}", "",
                ", ".join(f"{c['name']}{' (-o wide)' if c.get('priority') else ''}" for c in columns), ""]
    out += ["## Conditions", "", "| type | on | meaning |", "|---|---|---|",
            *(f"| `{kind}` | {on} | {text} |" for kind, (on, text) in CONDITIONS.items()), "",
            "## Reasons", "", "| condition | reason | meaning and what to do |", "|---|---|---|",
            *(f"| `{kind}` | `{reason}` | {text} |" for kind, reason, text in REASONS), ""]
    return "\n".join(out)

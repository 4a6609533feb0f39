"""`kubectl sluice`: a query's or a pool's SLA at a glance, and a support bundle of a pool.

Installed with the package as `kubectl-sluice`, so kubectl finds it as a plugin. It reads the
cluster through `kubectl` itself (the user's kubeconfig, context and credentials, as kubectl
resolves them) and writes nothing to the cluster.

- `kubectl sluice status NAME [-n NAMESPACE]`: a StreamingQuery (or, with `sp/NAME` or when no
  query has that name, a StreamingPool): its SLA, p50/p99, attainment, bottleneck, conditions,
  and for a pool its executors and recent scaling decisions with their reasons; `--json` prints
  the resource's status (and a pool's events) as JSON for scripts.
- `kubectl sluice report POOL [--out FILE]`: a tarball with the pool, its queries, the objects it
  owns, their events, the status the runtime reported and the tails of the pool pods' logs.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import click

KUBECTL = "kubectl"
LOG_TAIL = 500
"""Lines of each container's log a report keeps."""


class KubectlError(click.ClickException):
    exit_code = 1


def _kubectl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise KubectlError("kubectl is not on PATH; kubectl sluice runs through it.") from None
    except subprocess.TimeoutExpired:
        raise KubectlError(f"kubectl {' '.join(args)} did not answer within 60 s; check the cluster.") from None
    if check and proc.returncode != 0:
        raise KubectlError((proc.stderr.strip().splitlines() or ["kubectl failed"])[-1])
    return proc


def _get(kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
    proc = _kubectl("get", kind, name, "-o", "json", *(["-n", namespace] if namespace else []), check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr or "not found" in proc.stderr:
            return None
        raise KubectlError((proc.stderr.strip().splitlines() or ["kubectl failed"])[-1])
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def _conditions(status: dict[str, Any]) -> list[str]:
    return [f"  {c.get('type')}: {c.get('status')} ({c.get('reason', '')}) {c.get('message', '')}".rstrip()
            for c in status.get("conditions") or []]


def query_text(body: dict[str, Any]) -> str:
    """What `status` prints for a StreamingQuery."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    latency = status.get("latency") or {}
    sla = (spec.get("sla") or {}).get("latencyTarget", "?")
    why_mode = f" ({status['executionReason']})" if status.get("executionReason") else ""
    why_interval = f" ({status['batchIntervalReason']})" if status.get("batchIntervalReason") else ""
    critical = " (critical)" if (spec.get("sla") or {}).get("critical") else ""
    lag = f", Kafka lag {status['kafkaLag']} rows" if status.get("kafkaLag") is not None else ""
    lines = [
        f"StreamingQuery {meta.get('namespace')}/{meta['name']} on pool {spec.get('pool')}: {status.get('phase', 'Pending')}",
        f"  SLA {sla}{critical}; p50 {_ms(latency.get('p50Ms'))}, p99 {_ms(latency.get('p99Ms'))}; "
        f"within SLA {status.get('attainment') or '-'}",
        f"  bottleneck: {status.get('bottleneck') or '-'}; execution: {status.get('execution') or '-'}{why_mode}",
        f"  batch interval: {_ms(status.get('batchIntervalMs'))}{why_interval}",
        f"  input {status.get('inputRate', '-')} rows/s, processed {status.get('processingRate', '-')} rows/s{lag}",
    ]
    if status.get("message"):
        lines.append(f"  message: {status['message']}")
    return "\n".join([*lines, "conditions:", *_conditions(status)])


def pool_text(body: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """What `status` prints for a StreamingPool, with its recent scaling events."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    executors = status.get("executors") or {}
    auto = status.get("autoscaling") or {}
    recommendation = auto.get("recommendation") or {}
    lines = [
        f"StreamingPool {meta['name']}: {status.get('phase', 'Pending')}, policy {spec.get('policy', '-')}, "
        f"{status.get('queries', 0)} queries",
        f"  executors {executors.get('current', '-')} of target {executors.get('target', '-')} "
        f"(min {spec.get('minExecutors', '-')}, max {spec.get('maxExecutors', '-')}); "
        f"autoscaling {auto.get('mode', '-')}",
    ]
    if recommendation:
        lines.append(f"  DS2 recommends {recommendation.get('executors')}: {recommendation.get('reason', '')}")
    last = status.get("lastScalingDecision")
    if last:
        lines.append(f"  last scaling decision {last.get('time')}: {last.get('fromExecutors')} -> "
                     f"{last.get('toExecutors')} ({last.get('bound') or 'rates'}): {last.get('reason', '')}")
    scaling = [e for e in events if e.get("reason") in ("Autoscaled", "Scaling", "IneffectiveScaling", "Overloaded")]
    if scaling:
        lines.append("recent scaling events:")
        lines += [f"  {e.get('lastTimestamp') or e.get('eventTime') or ''} {e.get('reason')}: {e.get('message', '')}"
                  for e in scaling[-10:]]
    if status.get("message"):
        lines.append(f"  message: {status['message']}")
    return "\n".join([*lines, "conditions:", *_conditions(status)])


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    ms = float(value)
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _events(name: str, namespace: str | None) -> list[dict[str, Any]]:
    args = ["get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"]
    proc = _kubectl(*args, *(["-n", namespace] if namespace else ["-A"]), check=False)
    if proc.returncode != 0:
        return []
    items: list[dict[str, Any]] = json.loads(proc.stdout).get("items") or []
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sluice-streaming", prog_name="kubectl sluice")
def plugin() -> None:
    """kubectl sluice: Sluice's StreamingQueries and StreamingPools at a glance."""


@plugin.command()
@click.argument("name")
@click.option("-n", "--namespace", help="The query's namespace (default: kubectl's current one).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the resource's kind, name, spec and status (and a pool's events) as JSON instead of the text.")
def status(name: str, namespace: str | None, as_json: bool) -> None:
    """SLA, latency, attainment, bottleneck and conditions of a query (NAME or sq/NAME), or of a pool
    (sp/NAME, or NAME when no query has it) with its executors and recent scaling decisions."""
    kind, _, bare = name.rpartition("/")
    if kind not in ("", "sq", "sp", "streamingquery", "streamingpool"):
        raise click.UsageError(f"{name!r}: write NAME, sq/NAME or sp/NAME.")
    if kind in ("", "sq", "streamingquery"):
        body = _get("streamingquery", bare, namespace)
        if body is not None:
            click.echo(json.dumps(_document(body)) if as_json else query_text(body))
            return
        if kind:
            raise KubectlError(f"no StreamingQuery {bare!r}{f' in namespace {namespace}' if namespace else ''}.")
    pool = _get("streamingpool", bare, None)
    if pool is None:
        raise KubectlError(f"no StreamingQuery or StreamingPool named {bare!r}; `kubectl get sq -A` and "
                           "`kubectl get sp` list them.")
    events = _events(bare, None)
    click.echo(json.dumps(_document(pool, events)) if as_json else pool_text(pool, events))


def _document(body: dict[str, Any], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What `status --json` prints: the resource's identity, spec and status, and a pool's events."""
    meta = body.get("metadata") or {}
    document = {"kind": body.get("kind"), "name": meta.get("name"), "namespace": meta.get("namespace"),
                "spec": body.get("spec") or {}, "status": body.get("status") or {}}
    if events is not None:
        document["events"] = [{"type": e.get("type"), "reason": e.get("reason"), "message": e.get("message"),
                               "time": e.get("lastTimestamp") or e.get("eventTime")} for e in events]
    return document


@plugin.command()
@click.argument("pool")
@click.option("--out", "output", type=click.Path(dir_okay=False),
              help="The tarball (default: sluice-report-POOL-TIME.tar.gz).")
@click.option("-o", "--output", "old_output", type=click.Path(dir_okay=False), hidden=True,
              help="Old form of --out (kubectl's -o is the output format); kept for one release.")
@click.option("--system-namespace", default="sluice-system", show_default=True,
              help="Where the operator runs and creates the pool's objects.")
def report(pool: str, output: str | None, old_output: str | None, system_namespace: str) -> None:
    """A support bundle of POOL: the pool, its queries, the objects it owns, events, and log tails."""
    if old_output is not None:
        click.echo("kubectl sluice report: -o/--output FILE is deprecated and goes in the next release; write "
                   "--out FILE (kubectl's -o is the output format).", err=True)
        output = output or old_output
    body = _get("streamingpool", pool, None)
    if body is None:
        raise KubectlError(f"no StreamingPool named {pool!r}; `kubectl get sp` lists them.")
    target = Path(output or f"sluice-report-{pool}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz")
    files: dict[str, str] = {"pool.json": json.dumps(body, indent=2)}
    queries = json.loads(_kubectl("get", "streamingqueries", "-A", "-o", "json").stdout).get("items") or []
    mine = [q for q in queries if (q.get("spec") or {}).get("pool") == pool]
    files["queries.json"] = json.dumps(mine, indent=2)
    files["status.txt"] = "\n\n".join([pool_text(body, _events(pool, None)), *(query_text(q) for q in mine)]) + "\n"
    selector = f"sluice.dev/pool={pool}"
    owned = _kubectl("get", "deployments,services,configmaps,networkpolicies,serviceaccounts,roles,rolebindings,pods",
                     "-n", system_namespace, "-l", selector, "-o", "json", check=False)
    files["objects.json"] = owned.stdout if owned.returncode == 0 else json.dumps({"error": owned.stderr.strip()})
    events = _kubectl("get", "events", "-n", system_namespace, "-o", "json", check=False)
    files["events.json"] = events.stdout if events.returncode == 0 else "{}"
    pods = json.loads(owned.stdout).get("items", []) if owned.returncode == 0 else []
    for item in pods:
        if item.get("kind") != "Pod":
            continue
        for container in (item.get("spec") or {}).get("containers") or []:
            pod, name = item["metadata"]["name"], container["name"]
            logs = _kubectl("logs", pod, "-c", name, "-n", system_namespace, f"--tail={LOG_TAIL}", check=False)
            files[f"logs/{pod}/{name}.log"] = logs.stdout if logs.returncode == 0 else logs.stderr
    with tarfile.open(target, "w:gz") as tar:
        for path, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"sluice-report-{pool}/{path}")
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    click.echo(f"wrote {target}: the pool, {len(mine)} queries, {sum(1 for p in files if p.startswith('logs/'))} "
               f"log tails, objects and events.")


def main() -> None:
    plugin(prog_name="kubectl sluice")


if __name__ == "__main__":
    main()

"""The `sluice` command line: validate manifests, print CRDs; later run, demo, bench, simulate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sluice.api.manifest import ManifestError, parse_text


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sluice-streaming")
def main() -> None:
    """Sluice: many tenants' Spark streaming queries on Kubernetes, with latency SLAs."""


@main.command()
@click.option(
    "-f", "--filename", "files", multiple=True, required=True,
    help="Manifest file (multi-document YAML allowed; '-' reads stdin). Repeat for more.",
)
@click.argument("more", nargs=-1)
def validate(files: tuple[str, ...], more: tuple[str, ...]) -> None:
    """Check StreamingQuery and StreamingPool manifests without a cluster.

    Prints one line per valid manifest; exits 1 with one sentence per error otherwise.
    `sluice validate -f examples/*.yaml` works: the shell's extra files are taken too.
    """
    errors: list[ManifestError] = []
    for name in (*files, *more):
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as error:
            errors.append(ManifestError(name, "", f"cannot be read ({error.strerror or error}); check the path."))
            continue
        except UnicodeDecodeError:
            errors.append(ManifestError(name, "", "is not UTF-8 text; save the manifest as UTF-8."))
            continue
        parsed, problems = parse_text(text, "<stdin>" if name == "-" else name)
        for item in parsed:
            meta = item.resource.metadata
            where = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
            click.echo(f"{item.source}: {item.resource.kind} {where} is valid")
        errors.extend(problems)
    for problem in errors:
        click.echo(str(problem), err=True)
    if errors:
        sys.exit(1)


@main.command()
def crds() -> None:
    """Print the CustomResourceDefinitions generated from the models (what crds/ holds)."""
    from sluice.api.crd import crds_yaml

    click.echo(crds_yaml(), nl=False)


@main.command()
@click.option("--examples", "folder", default="examples", show_default=True, help="Folder of manifests.")
def demo(folder: str) -> None:
    """Show what Sluice would run: validate the example manifests and summarise each query."""
    from sluice.api.query import StreamingQuery

    paths = sorted(Path(folder).glob("*.yaml"))
    if not paths:
        click.echo(f"No manifests in '{folder}'; pass --examples with a folder of YAML files.", err=True)
        sys.exit(1)
    failed = False
    for path in paths:
        parsed, problems = parse_text(path.read_text(encoding="utf-8"), str(path))
        for problem in problems:
            failed = True
            click.echo(str(problem), err=True)
        for item in parsed:
            resource = item.resource
            if isinstance(resource, StreamingQuery):
                spec = resource.spec
                steps = " -> ".join(step.kind for step in spec.pipeline)
                click.echo(
                    f"{resource.key:34} pool={spec.pool:8} SLA {spec.sla.latencyTarget.ms:>7.0f} ms  "
                    f"{spec.source.type} -> {steps} -> {spec.sink.type}"
                    + ("  [stateful]" if spec.stateful else "")
                )
            else:
                click.echo(
                    f"pool {resource.metadata.name:29} policy={resource.spec.policy} "
                    f"executors {resource.spec.minExecutors}..{resource.spec.maxExecutors}"
                )
    sys.exit(1 if failed else 0)


@main.group()
def bench() -> None:
    """Benchmarks (each prints a table; --json for scripts)."""


@bench.command("scheduler")
@click.option("--clients", type=click.IntRange(1, 256), default=8, show_default=True, help="Concurrent client processes.")
@click.option("--seconds", type=click.FloatRange(0.5, 3600), default=5.0, show_default=True, help="Measured duration.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of a table.")
@click.option("--core-queries", type=click.IntRange(1, 1_000_000), default=10_000, show_default=True,
              help="Registered queries for the pure-core decision timing.")
@click.option("--out", type=click.Path(file_okay=False), help="Also write scheduler.json and scheduler.png here.")
def bench_scheduler(clients: int, seconds: float, as_json: bool, core_queries: int, out: str | None) -> None:
    """Grants/s and round-trip latency of the real sidecar on loopback, and one core decision."""
    import json

    from sluice.scheduler import bench as scheduler_bench

    click.echo(f"running {clients} client(s) for {seconds:g}s against a real sidecar on loopback ...", err=True)
    try:
        result = scheduler_bench.run(clients, seconds, core_queries)
    except RuntimeError as error:
        click.echo(f"benchmark failed: {error}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(result.json()))
    else:
        click.echo(scheduler_bench.table([result]))
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "scheduler.json").write_text(json.dumps(result.json(), indent=2) + "\n")
        click.echo(f"wrote {folder / 'scheduler.json'}", err=True)


if __name__ == "__main__":
    main()

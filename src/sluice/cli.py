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


if __name__ == "__main__":
    main()

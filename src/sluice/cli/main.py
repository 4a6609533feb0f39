"""The `sluice` command line: one module a command group (run, demo, what-if, dev, bench); this one
holds the group and the commands that check and print what the project generates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sluice.api.manifest import ManifestError, parse_text
from sluice.cli import bench, demo, dev, run, whatif_commands
from sluice.cli.common import EXIT_ERROR, json_option


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 done; 1 bad input or a failed run (one sentence says which); 2 a command line "
                    "that cannot be parsed; 3 SLAs missed (sluice size).")
@click.version_option(package_name="sluice-streaming")
def main() -> None:
    """Sluice: many tenants' Spark streaming queries on Kubernetes, with latency SLAs."""


@main.command()
@click.option(
    "-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False, allow_dash=True),
    help="Manifest file (multi-document YAML allowed; '-' reads stdin). Repeat for more.",
)
@click.argument("more", nargs=-1)
@json_option
def validate(files: tuple[str, ...], more: tuple[str, ...], as_json: bool) -> None:
    """Check StreamingQuery and StreamingPool manifests without a cluster.

    Prints one line per valid manifest; exits 1 with one sentence per error otherwise.
    `sluice validate -f examples/*.yaml` works: the shell's extra files are taken too.
    """
    errors: list[ManifestError] = []
    valid: list[dict[str, str | None]] = []
    for name in (*files, *more):
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as error:
            errors.append(ManifestError(name, "", f"cannot be read ({error.strerror or error}); check the path."))
            continue
        except UnicodeDecodeError:
            errors.append(ManifestError(name, "", "is not UTF-8 text; save the manifest as UTF-8."))
            continue
        source = "<stdin>" if name == "-" else name
        rates = _rates_file(text, source)
        if rates is not None:  # `sluice simulate --rates` input, kept beside the manifests it describes
            if isinstance(rates, ManifestError):
                errors.append(rates)
            else:
                valid.append({"source": source, "kind": "RatesFile", "namespace": None, "name": None})
            continue
        parsed, problems = parse_text(text, source)
        valid += [{"source": item.source, "kind": item.resource.kind, "namespace": item.resource.metadata.namespace,
                   "name": item.resource.metadata.name} for item in parsed]
        errors.extend(problems)
    if as_json:
        click.echo(json.dumps({"valid": valid, "errors": [{"source": e.source, "field": e.path, "message": e.message}
                                                           for e in errors]}))
    else:
        for found in valid:
            if found["kind"] == "RatesFile":
                click.echo(f"{found['source']}: a what-if rates file (sluice simulate --rates) is valid; not a manifest")
                continue
            where = f"{found['namespace']}/{found['name']}" if found["namespace"] else found["name"]
            click.echo(f"{found['source']}: {found['kind']} {where} is valid")
        for problem in errors:
            click.echo(str(problem), err=True)
    if errors:
        sys.exit(EXIT_ERROR)


def _rates_file(text: str, source: str) -> ManifestError | bool | None:
    """A what-if rates file (one YAML mapping with `queries` and no `kind`): True if it is valid, its
    first problem if not; None when the text is no rates file (a manifest, or not YAML at all)."""
    import yaml
    from pydantic import ValidationError

    from sluice.cli.whatif import RatesFile

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None
    if len(documents) != 1 or not isinstance(documents[0], dict) or "kind" in documents[0] \
            or "queries" not in documents[0]:
        return None
    try:
        RatesFile.model_validate(documents[0])
    except ValidationError as error:
        first = error.errors()[0]
        return ManifestError(source, ".".join(str(p) for p in first["loc"]), f"{first['msg']}.")
    return True


@main.command()
def crds() -> None:
    """Print the CustomResourceDefinitions generated from the models (what crds/ holds)."""
    from sluice.api.crd import crds_yaml

    click.echo(crds_yaml(), nl=False)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (commands, options and file paths).

    bash: `eval "$(sluice completion bash)"` in ~/.bashrc; zsh: the same in ~/.zshrc;
    fish: `sluice completion fish > ~/.config/fish/completions/sluice.fish`.
    """
    from click.shell_completion import get_completion_class

    found = get_completion_class(shell)
    assert found is not None  # click ships all three
    click.echo(found(main, {}, "sluice", "_SLUICE_COMPLETE").source())


@main.command()
def reference() -> None:
    """Print the reference page (docs/reference.md): every field, condition and reason."""
    from sluice.api.reference import reference_markdown

    click.echo(reference_markdown(), nl=False)


@main.command("cli-reference")
def cli_reference() -> None:
    """Print the command-line reference (docs/cli.md): every command and option of sluice and kubectl sluice."""
    from sluice.cli.kubectl_plugin import plugin
    from sluice.cli.reference_page import cli_markdown

    click.echo(cli_markdown([("sluice", main), ("kubectl sluice", plugin)]), nl=False)


@main.command("values-schema")
def values_schema() -> None:
    """Print the chart's values.schema.json, generated from its values model."""
    from sluice.api.chart_values import values_schema_json

    click.echo(values_schema_json(), nl=False)


for _command in (run.run, run.load, run.kafka_broker, demo.demo, demo.demo_policy, demo.demo_measure, whatif_commands.simulate,
                 whatif_commands.size, dev.dev, bench.bench):
    main.add_command(_command)


if __name__ == "__main__":
    main()

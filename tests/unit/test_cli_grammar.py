"""One grammar across every command: DURATION for every duration, `--json` where a table is
printed, exit codes by name, the generated CLI reference, and modules small enough to read."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sluice.cli.common import DurationParam
from sluice.cli.kubectl_plugin import plugin
from sluice.cli.main import main
from sluice.cli.reference_page import cli_markdown

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "src" / "sluice" / "cli"
DURATION_WORDS = re.compile(r"duration|warmup|drain|window|phase|steady|after|grace|sla|trigger|timeout|interval|"
                            r"max-time|seconds|minutes|wait|delay")
NO_TABLE = {"sluice crds", "sluice completion", "sluice reference", "sluice values-schema", "sluice cli-reference",
            "sluice kafka", "sluice load", "sluice dev cluster up", "sluice dev cluster down",
            "sluice dev cluster status", "kubectl sluice report"}
"""Commands that print no table: generated files, a broker, a load's one JSON line, a cluster's
exports, a tarball."""


def commands() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{path} {name}")
        elif not command.hidden:
            yield path, command

    yield from walk(main, "sluice")
    yield from walk(plugin, "kubectl sluice")


def test_every_duration_option_takes_the_duration_type() -> None:
    loose = [f"{path} {param.opts[-1]}" for path, command in commands() for param in command.params
             if isinstance(param, click.Option) and not param.hidden and DURATION_WORDS.search(param.opts[-1])
             and not isinstance(param.type, DurationParam)]
    assert loose == []
    assert len([1 for _, c in commands() for p in c.params if isinstance(p.type, DurationParam)]) >= 20


def test_an_old_spelling_is_kept_as_a_hidden_alias_that_says_the_new_one() -> None:
    result = CliRunner().invoke(main, ["bench", "capacity", "--scenario", "no-such.yaml", "--max-minutes", "5",
                                       "--no-calibrate"])
    assert "--max-minutes 5 is now --max-time 5m." in result.output
    refused = CliRunner().invoke(main, ["run", "-f", "x.yaml", "--duration", "soon"])
    assert refused.exit_code == 2 and "--duration" in refused.output


def test_every_command_that_prints_a_table_takes_json() -> None:
    missing = [path for path, command in commands() if path not in NO_TABLE
               and "--json" not in {o for p in command.params for o in getattr(p, "opts", [])}]
    assert missing == []


def test_exit_codes_only_through_the_named_constants() -> None:
    literal = [f"{path.name}:{n}" for path in sorted(CLI.glob("*.py"))
               for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\bexit\(\s*\d", line)]
    assert literal == []


def test_no_cli_module_is_over_400_lines() -> None:
    long = {p.name: n for p in CLI.glob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_the_cli_reference_is_what_the_commands_generate() -> None:
    generated = cli_markdown([("sluice", main), ("kubectl sluice", plugin)])
    assert (ROOT / "docs" / "cli.md").read_text() == generated, "run `make crds` (sluice cli-reference > docs/cli.md)"
    assert "## `sluice bench capacity`" in generated and "`--max-time` | DURATION | `25m`" in generated
    assert "--max-minutes" not in generated  # hidden aliases stay out of the page


def test_validate_prints_json_for_scripts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: sluice.dev/v1alpha1\nkind: StreamingQuery\nmetadata: {name: q, namespace: t}\n"
                   "spec: {pool: p}\n")
    result = CliRunner().invoke(main, ["validate", "-f", str(ROOT / "examples" / "demo" / "latency-critical.yaml"),
                                       "-f", str(bad), "--json"])
    document = json.loads(result.stdout)
    assert result.exit_code == 1
    assert document["valid"] == [{"source": str(ROOT / "examples" / "demo" / "latency-critical.yaml"),
                                  "kind": "StreamingQuery", "namespace": "payments", "name": "alerts"}]
    assert document["errors"] and all(e["source"].startswith(str(bad)) for e in document["errors"])


def test_kubectl_sluice_says_its_version_and_prints_status_as_json_shape() -> None:
    from sluice.cli.kubectl_plugin import _document

    result = CliRunner().invoke(plugin, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("kubectl sluice, version ")
    body = {"kind": "StreamingPool", "metadata": {"name": "shared"}, "spec": {"policy": "cameo"},
            "status": {"phase": "Running"}}
    event = {"type": "Normal", "reason": "Scaled", "message": "2 executors", "lastTimestamp": "t"}
    assert _document(body, [event]) == {
        "kind": "StreamingPool", "name": "shared", "namespace": None, "spec": {"policy": "cameo"},
        "status": {"phase": "Running"},
        "events": [{"type": "Normal", "reason": "Scaled", "message": "2 executors", "time": "t"}]}


@pytest.mark.parametrize("flag", ["-o", "--output"])
def test_report_s_old_output_flag_is_a_hidden_alias_with_a_deprecation_line(flag: str, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import sluice.cli.kubectl_plugin as kubectl_plugin

    monkeypatch.setattr(kubectl_plugin, "KUBECTL", str(tmp_path / "no-kubectl"))  # no cluster: it stops after the line
    result = CliRunner().invoke(plugin, ["report", "shared", flag, str(tmp_path / "b.tar.gz")])
    assert "deprecated" in result.output and "--out FILE" in result.output
    assert "-o, --output" not in CliRunner().invoke(plugin, ["report", "--help"]).output

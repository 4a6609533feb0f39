"""The CLI's shell completion: commands, options and file paths for `-f`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import main

SLUICE = str(Path(sys.executable).parent / "sluice")


def complete(words: str, shell: str = "bash") -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
           "_SLUICE_COMPLETE": f"{shell}_complete"}
    return subprocess.run([SLUICE], env=env, capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(shell: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0 and f"_SLUICE_COMPLETE={shell}_complete" in result.output


def test_completion_refuses_an_unknown_shell_in_one_sentence() -> None:
    result = CliRunner().invoke(main, ["completion", "tcsh"])
    assert result.exit_code == 2 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.output


def test_commands_and_file_paths_complete() -> None:
    assert "plain,validate" in complete("sluice val")
    assert complete("sluice validate -f exa") == ["file,exa"]  # the shell lists the files
    assert "plain,simulate" in complete("sluice bench si")


def test_durations_take_a_unit_and_old_bare_second_flags_still_work() -> None:
    """One duration format for every flag: `60s`, `500ms`; a bare number is refused in one sentence,
    except where a flag took bare seconds before (read as seconds, with one line naming the new form)."""
    runner = CliRunner()
    refused = runner.invoke(main, ["demo", "--duration", "45"])
    assert refused.exit_code == 2 and "Invalid value for '--duration'" in refused.output and "'45'" in refused.output
    assert "Traceback" not in refused.output
    outside = runner.invoke(main, ["demo", "--duration", "2h"])
    assert outside.exit_code == 2 and "2h is outside 10s to 3600s" in outside.output
    legacy = runner.invoke(main, ["bench", "density", "--warmup", "15", "--counts", "x"])
    assert "--warmup 15: write 15s; a bare number is still read as seconds." in legacy.output
    aliased = runner.invoke(main, ["bench", "overhead", "--seconds", "30", "--trigger", "fast"])
    assert "--seconds 30 is now --duration 30s." in aliased.output
    for command in (["bench", "cameo"], ["bench", "overhead"], ["bench", "density"], ["bench", "capacity"],
                    ["bench", "rescale"], ["bench", "ds2"], ["bench", "simulate"], ["bench", "scheduler"]):
        assert "--json" in runner.invoke(main, [*command, "--help"]).output, command


def test_validate_takes_every_example_including_the_what_if_rates_file(tmp_path: Path) -> None:
    """`sluice validate -f examples/*.yaml examples/*/*.yaml` passes: a what-if rates file beside the
    manifests is checked as one; a wrong rates file gets one sentence naming its field."""
    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(str(p) for p in (*root.glob("*.yaml"), *root.glob("*/*.yaml")))
    result = CliRunner().invoke(main, ["validate", *(a for f in files for a in ("-f", f))])
    assert result.exit_code == 0, result.output
    assert "whatif/rates.yaml: a what-if rates file (sluice simulate --rates) is valid" in result.output
    bad = tmp_path / "rates.yaml"
    bad.write_text("queries:\n  a/b: {rate: -1}\n")
    refused = CliRunner().invoke(main, ["validate", "-f", str(bad)])
    assert refused.exit_code == 1 and "queries.a/b.rate: Input should be greater than 0." in refused.output


def test_the_demos_counter_counts_from_the_queries_start_and_stops_at_its_duration(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`sluice demo` printed "51/45s": its clock started before Spark did. It starts at the first
    tick (every query started) and never passes the duration."""
    import time

    from sluice.api.wire import QueryStatus
    from sluice.cli.demo import demo_progress

    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    tick = demo_progress("cameo", 45, every=10)
    status = {"payments/alerts": QueryStatus(phase="Running", sla_ms=1000.0, p99_ms=120.0, attainment=0.99)}
    for elapsed in (0, 10, 20, 30, 40, 50, 60):  # the first tick comes 30 s after this process started
        now[0] = 1030.0 + elapsed
        tick(status)
    lines = capsys.readouterr().err.splitlines()
    # 50 and 60 s after the start read as 45 s: less than a step after the last line, so no line
    assert [line.split(":")[0] for line in lines] == ["[cameo] 10/45s", "[cameo] 20/45s", "[cameo] 30/45s",
                                                      "[cameo] 40/45s"]

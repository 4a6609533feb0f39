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

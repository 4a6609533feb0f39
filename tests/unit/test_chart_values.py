"""values.schema.json is generated from the chart's values model; values.yaml holds its defaults."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from sluice.api.chart_values import ChartValues, values_schema_json
from sluice.api.constants import RUNTIME_IMAGE
from sluice.cli.main import main
from sluice.operator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_schema_equals_generated() -> None:
    checked_in = (ROOT / "values.schema.json").read_text()
    assert checked_in == values_schema_json(), "values.schema.json is stale: run `sluice values-schema > values.schema.json`"
    assert CliRunner().invoke(main, ["values-schema"]).output == checked_in
    assert json.loads(checked_in)["additionalProperties"] is False  # a misspelt key is an error


def test_values_yaml_is_the_models_defaults() -> None:
    values = yaml.safe_load((ROOT / "values.yaml").read_text())
    assert ChartValues.model_validate(values).model_dump() == ChartValues().model_dump() == values
    assert values["runtimeImage"] == RUNTIME_IMAGE == Settings().runtime_image


def test_the_platform_guide_lists_every_value() -> None:
    guide = (ROOT / "docs" / "platform-guide.md").read_text()
    missing = [key for key in ChartValues.model_fields if f"`{key}" not in guide]
    assert missing == [], f"docs/platform-guide.md's values table lacks {missing}"
    assert (ROOT / "docs" / "tenant-guide.md").is_file()


def test_decimals_set_on_the_command_line_are_checked_as_text_too() -> None:
    """helm --set keeps 0.5 as the text '0.5', so the schema takes numbers and numeric text alike."""
    import pydantic
    import pytest

    assert ChartValues.model_validate({"alerts": {"objective": "0.95"}}).alerts.objective == "0.95"
    for bad in ("1.5", "0", "abc", 2):
        with pytest.raises(pydantic.ValidationError):
            ChartValues.model_validate({"alerts": {"objective": bad}})

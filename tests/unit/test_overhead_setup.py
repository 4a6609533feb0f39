"""`sluice bench overhead` compares like with like: every mode but the lane's on one Spark setup."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sluice.bench import overhead
from sluice.cli.main import main


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_plain_ungated_and_cameo_share_master_slots_and_parallelism(cores: int) -> None:
    plain, ungated, cameo = (overhead.spark_setup(m, cores) for m in ("plain", "ungated", "cameo"))
    assert plain.master == ungated.master == cameo.master == f"local[{cores}]"
    assert not (plain.urgent_lane or ungated.urgent_lane or cameo.urgent_lane)
    assert plain.bulk_tasks == ungated.bulk_tasks == cameo.bulk_tasks == 0
    assert (plain.scheduling, ungated.scheduling, cameo.scheduling) == ("FIFO", "FIFO", "FAIR")
    for delivery in ("atLeastOnce", "exactlyOnce"):  # --sink kafka's gated modes: the same setup
        assert overhead.spark_setup(delivery, cores) == cameo


def test_the_lane_is_a_mode_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sluice.runtime.session.urgent_lane", lambda: True)
    urgent = overhead.spark_setup("cameo+urgent", 2)
    assert urgent.urgent_lane and urgent.bulk_tasks == 2 and urgent.master == "local[16]"
    monkeypatch.setattr("sluice.runtime.session.urgent_lane", lambda: False)  # SLUICE_URGENT_LANE=0
    assert overhead.spark_setup("cameo+urgent", 2) == overhead.spark_setup("cameo", 2)


def test_modes_default_to_the_sink_s_and_keep_their_order() -> None:
    assert overhead.Options().modes == ("plain", "ungated", "cameo", "cameo+urgent")
    assert overhead.Options(sink="kafka").modes == ("plain", "atLeastOnce", "exactlyOnce")
    assert overhead.Options(only=("cameo+urgent", "plain")).modes == ("plain", "cameo+urgent")


@pytest.mark.parametrize(("modes", "sink", "word"), [
    ("cameo", "noop", "plain"), ("plain,exactlyOnce", "noop", "exactlyOnce"), ("plain,cameo", "kafka", "cameo")])
def test_bad_modes_are_refused_in_one_sentence(modes: str, sink: str, word: str) -> None:
    result = CliRunner().invoke(main, ["bench", "overhead", "--modes", modes, "--sink", sink])
    assert result.exit_code == 2 and "--modes" in result.output and word in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_who_gets_the_urgent_lane() -> None:
    from sluice.runtime.session import lane_wanted

    assert lane_wanted("gated", True) and not lane_wanted("gated", False)
    assert lane_wanted("all", False) and lane_wanted("all", True)
    assert not lane_wanted("none", True)
    with pytest.raises(ValueError, match="gated, all, none"):
        lane_wanted("some", True)

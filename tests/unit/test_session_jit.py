"""The driver JVM's JIT choice (`runtime.session.driver_jit`): HotSpot's default unless the environment says otherwise."""

from __future__ import annotations

import pytest

from sluice.runtime.session import JIT_ENV, JIT_OPTIONS, driver_jit


def test_the_driver_keeps_hotspot_s_tiered_compilers_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JIT_ENV, raising=False)
    assert driver_jit() == "tiered"
    assert JIT_OPTIONS["tiered"] == ""  # HotSpot's default: no option
    assert JIT_OPTIONS["c1"] == "-XX:TieredStopAtLevel=1"


def test_the_environment_overrides_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JIT_ENV, " c1 ")
    assert driver_jit() == "c1"
    monkeypatch.setenv(JIT_ENV, "tiered")
    assert driver_jit() == "tiered"


def test_an_unknown_choice_is_one_sentence_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JIT_ENV, "c2")
    with pytest.raises(RuntimeError, match=r"^SLUICE_DRIVER_JIT='c2': use one of tiered, c1\.$"):
        driver_jit()

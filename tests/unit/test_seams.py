"""The seams between components: pure batch-path rules, names, settings, constants, the typed contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sluice.api.constants import API_VERSION, BANDS, GRID, GROUP, POLICIES, VERSION
from sluice.api.crd import crds
from sluice.api.wire import Completed, ExecutorTarget, QueryStatus, Registration, Suspend
from sluice.operator.settings import Settings, SettingsError
from sluice.runtime.batching import (
    expected_rows,
    gives_group_back,
    grid_quantiles,
    oldest_event,
    settled,
)
from sluice.runtime.pipeline import spark_name
from sluice.scheduler.core import Completion, Grant, covers
from sluice.scheduler.policies import IMPLEMENTATIONS
from sluice.scheduler.wire import completed_of, completion_of

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the batch path's pure rules

def test_expected_rows_is_the_rate_over_the_time_since_the_last_batch() -> None:
    assert expected_rows(1000.0, 100.0, 100.5) == 500
    assert expected_rows(1000.0, None, 100.5) == 0  # first batch: no rate yet
    assert expected_rows(0.0, 100.0, 101.0) == 0
    assert expected_rows(1000.0, 100.0, 99.0) == 0  # a clock step back never gives a negative count


def test_the_oldest_event_prefers_sparks_input_event_time() -> None:
    assert oldest_event(50.0, 40.0) == 50.0
    assert oldest_event(None, 40.0) == 40.0
    assert oldest_event(None, None) is None


def test_grid_quantiles_by_nearest_rank() -> None:
    values = [float(i) for i in range(101)]  # 0..100: quantile q is 100 q
    assert grid_quantiles(values) == [round(q * 100) for q in GRID]
    assert grid_quantiles([7.0]) == [7.0] * len(GRID)


def test_megaphone_waits_until_every_stateful_query_committed_since_the_last_kill() -> None:
    marks = {"a/x": 10, "b/y": 4}
    assert not settled(marks, {"a/x": 11, "b/y": 4})  # b/y has not committed since
    assert settled(marks, {"a/x": 11, "b/y": 5})
    assert settled(marks, {"a/x": 11})  # b/y stopped: it does not hold the drain back
    assert settled({}, {"a/x": 3})  # no kill yet


def test_a_group_grant_covers_its_k_batches_and_no_others() -> None:
    grant = Grant("t/q", 10, "band1", 3, 0.0, 0.0, 0.0)
    assert grant.last == 12
    assert [b for b in range(8, 15) if covers(grant.batch_id, grant.last, b)] == [10, 11, 12]
    assert covers(5, 5, 5) and not covers(5, 5, 6)


def test_a_group_is_given_back_only_where_a_trigger_wait_follows_a_batch_it_covers() -> None:
    # a group of batches 10..13, a 2 s interval; batch 11 reports, no later batch entered the gate
    assert gives_group_back(10, 13, 11, 800.0, 2.0, 11)  # 0.8 s of 2: a 1.2 s wait follows
    assert not gives_group_back(10, 13, 11, 2300.0, 2.0, 11)  # over its interval: the next starts at once
    assert not gives_group_back(10, 13, 11, 800.0, 2.0, 12)  # batch 12 already runs under the grant
    assert not gives_group_back(10, 13, 13, 800.0, 2.0, 13)  # the group's last frees the slot anyway
    assert not gives_group_back(10, 13, 9, 800.0, 2.0, 9)  # not the group's batch
    assert not gives_group_back(10, 13, 11, None, 2.0, 11)  # no duration reported: keep it
    assert not gives_group_back(10, 13, 11, 800.0, None, 11)  # no interval (as fast as it can): back to back
    assert not gives_group_back(10, 10, 10, 800.0, 2.0, 10)  # no group: one batch


def test_a_given_back_group_crosses_the_wire_and_back() -> None:
    done = Completion("t/q", 11, 0.25, rows=3, coordination=0.01, ends_group=True)
    body = completed_of(done)
    assert body.endsGroup is True
    assert completion_of(Completed.model_validate(body.model_dump()), "t/q") == done
    assert completion_of(Completed(batchId=11, durationMs=250.0), "t/q").ends_group is False


# ---------------------------------------------------------------- names

def test_spark_names_of_different_keys_differ() -> None:
    """`a--b/c` and `a/b--c` once both became `a__b__c`."""
    assert spark_name("a--b/c") != spark_name("a/b--c")
    assert spark_name("payments/fraud-filter") == "payments_2ffraud_2dfilter"


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_spark_name_is_injective_and_safe(a: str, b: str) -> None:
    assert re.fullmatch(r"[A-Za-z0-9_]+", spark_name(a))
    if a != b:
        assert spark_name(a) != spark_name(b)


# ---------------------------------------------------------------- settings, read once

def test_settings_read_the_environment_with_defaults() -> None:
    config = Settings.from_env({"SLUICE_NAMESPACE": "ops", "SLUICE_WATCH_NAMESPACES": "a, b,,",
                                "SLUICE_PEERING": "true", "SLUICE_POOL_SYNC_INTERVAL": "2"})
    assert config.namespace == "ops" and config.watch_namespaces == ("a", "b") and config.peering
    assert config.pool_sync_interval == 2 and config.status_interval == 10 and config.metrics_port == 8080
    assert Settings.from_env({}) == Settings()


@pytest.mark.parametrize(("name", "value", "words"), [
    ("SLUICE_STATUS_INTERVAL", "0", "above 0"),
    ("SLUICE_POOL_SYNC_INTERVAL", "often", "above 0"),
    ("SLUICE_METRICS_PORT", "http", "TCP port"),
    ("SLUICE_METRICS_PORT", "70000", "TCP port"),
    ("SLUICE_LOG_LEVEL", "loud", "debug, info"),
    ("SLUICE_PEERING_LIFETIME", "2", "whole seconds from 5"),
])
def test_a_bad_setting_is_one_sentence_naming_the_variable(name: str, value: str, words: str) -> None:
    with pytest.raises(SettingsError) as error:
        Settings.from_env({name: value})
    assert str(error.value).startswith(f"{name} is ") and words in str(error.value)


def test_only_the_settings_module_reads_the_operators_environment() -> None:
    readers = [p.name for p in (ROOT / "operator").glob("*.py") if "os.environ" in p.read_text()]
    assert readers == ["settings.py"]


# ---------------------------------------------------------------- constants, written once

def test_every_policy_name_has_one_implementation_and_one_crd_enum() -> None:
    assert set(IMPLEMENTATIONS) == set(POLICIES)
    pool = next(c for c in crds() if c["spec"]["names"]["kind"] == "StreamingPool")
    schema = pool["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["properties"]["policy"]["enum"] == list(POLICIES)
    assert f"{GROUP}/{VERSION}" == API_VERSION and BANDS >= 1


def test_no_module_writes_the_policy_list_or_the_api_version_again() -> None:
    sources = [p for folder in ("api", "operator", "scheduler", "runtime", "bench", "src/sluice/cli")
               for p in (ROOT / folder).glob("*.py")]
    for path in sources:
        if path.name == "constants.py":
            continue
        text = path.read_text()
        assert '"sluice.dev/v1alpha1"' not in text, path
        assert not re.search(r'"fifo",\s*"fair"', text), path


# ---------------------------------------------------------------- the operator <-> runtime contract

def _status(**extra: object) -> dict[str, object]:
    return {"phase": "Running", "sla_ms": 500.0, **extra}


def test_the_operator_reads_a_newer_runtimes_status_and_ignores_what_it_does_not_know() -> None:
    status = QueryStatus.model_validate(_status(load={"batches": 2, "rows": 10, "usefulSeconds": 0.5}, future="x"))
    assert status.load.rows == 10 and status.scheduler == "ungated"
    registration = Registration.model_validate({"query": "t/q", "phase": "Failed", "message": "no", "status": _status()})
    assert registration.phase == "Failed"  # registered, and Failed: the phase says so, not the HTTP status


def test_the_runtime_refuses_bodies_that_are_not_the_contract() -> None:
    for bad in ('{"target": -1}', '{"target": true}', '{"target": "2"}', '{"target": 2, "now": 1}', "{}"):
        with pytest.raises(ValidationError):
            ExecutorTarget.model_validate_json(bad)
    assert ExecutorTarget.model_validate_json('{"target": 2}').target == 2
    with pytest.raises(ValidationError):
        Suspend.model_validate_json('{"suspend": "yes"}')
    with pytest.raises(ValidationError):
        QueryStatus.model_validate(_status(phase="Exploded"))


def test_a_spark_error_becomes_its_meaningful_line() -> None:
    from sluice.runtime.spark_calls import one_line

    error = Exception("An error occurred while calling o225.start.\n: java.lang.IllegalArgumentException: "
                      "Cannot start query with name x as a query with that name is already active\n\tat org...")
    assert one_line(error).startswith("java.lang.IllegalArgumentException: Cannot start query with name x")
    assert one_line(ValueError("")) == "ValueError"


def test_a_lost_driver_is_told_from_a_call_that_failed_inside_a_live_one() -> None:
    from py4j.protocol import Py4JError, Py4JNetworkError

    from sluice.runtime.spark_calls import driver_gone

    assert driver_gone(Py4JNetworkError("Answer from Java side is empty"))
    assert driver_gone(ConnectionRefusedError(111, "Connection refused"))
    assert driver_gone(Py4JError("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext."))
    assert not driver_gone(Py4JError("java.lang.IllegalArgumentException: Cannot start query with name x"))
    assert not driver_gone(KeyError("tenant/q"))


def test_a_childs_return_code_in_words() -> None:
    from sluice.runtime.session import exit_text

    assert exit_text(0) == "exit code 0"
    assert exit_text(52) == "exit code 52"
    assert exit_text(-9) == "killed by SIGKILL"
    assert exit_text(-200) == "killed by signal 200"


def test_replicas_get_distinct_peering_priorities_from_their_pod_names() -> None:
    from sluice.operator.settings import Settings, SettingsError, peering_priority

    names = [f"sluice-operator-7d9c5b6f4-{suffix}" for suffix in ("x2k9p", "q8w3r", "m4n7t", "abcde")]
    priorities = [peering_priority(n) for n in names]
    assert len(set(priorities)) == len(names) and all(0 < p <= 1_000_000 for p in priorities)
    assert Settings.from_env({"HOSTNAME": names[0]}).peering_priority == priorities[0]  # stable per pod
    assert Settings.from_env({"SLUICE_PEERING_PRIORITY": "7"}).peering_priority == 7
    with pytest.raises(SettingsError, match="SLUICE_PEERING_PRIORITY"):
        Settings.from_env({"SLUICE_PEERING_PRIORITY": "high"})

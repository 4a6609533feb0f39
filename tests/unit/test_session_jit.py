"""The JVMs' options: the driver's and the executors' JIT choices (`driver_jit`, `executor_jit`), a gated pool's urgent lane (`lane_conf`) and the `local-cluster` master."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.api.constants import EXECUTOR_JIT_CONF, EXECUTOR_JITS
from sluice.cli.main import main
from sluice.runtime.priority import BULK_NICE
from sluice.runtime.session import (
    EXECUTOR_JIT_ENV,
    EXECUTOR_JIT_OPTIONS,
    JIT_ENV,
    JIT_OPTIONS,
    check_settings,
    driver_jit,
    executor_jit,
)

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_executors_keep_hotspot_s_compilers_unless_told_and_low_puts_them_at_the_bulk_tasks_nice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert tuple(EXECUTOR_JIT_OPTIONS) == EXECUTOR_JITS  # one option set for each choice the CRD allows
    monkeypatch.delenv(EXECUTOR_JIT_ENV, raising=False)
    assert executor_jit({}) == "tiered"
    assert EXECUTOR_JIT_OPTIONS["tiered"] == ""
    assert EXECUTOR_JIT_OPTIONS["c1"] == "-XX:TieredStopAtLevel=1"
    assert EXECUTOR_JIT_OPTIONS["low"].split() == ["-XX:ThreadPriorityPolicy=1", f"-XX:CompilerThreadPriority={BULK_NICE}"]
    monkeypatch.setenv(EXECUTOR_JIT_ENV, "low")
    assert executor_jit({}) == "low"
    assert executor_jit({EXECUTOR_JIT_CONF: "c1"}) == "c1"  # the pool's setting wins over the variable


def test_an_unknown_executor_jit_is_refused_in_one_sentence_before_spark_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXECUTOR_JIT_ENV, "c2")
    with pytest.raises(ValueError, match=r"^SLUICE_EXECUTOR_JIT='c2': use one of tiered, c1, low\.$"):
        executor_jit({})
    with pytest.raises(ValueError, match=r"^--conf spark\.sluice\.executor\.jit='C1': use one of tiered, c1, low\.$"):
        check_settings({EXECUTOR_JIT_CONF: "C1"})
    refused = CliRunner().invoke(main, ["run", "-f", str(ROOT / "examples" / "fraud-filter.yaml"), "--duration", "5s"])
    assert (refused.exit_code, refused.output.strip()) == (1, "SLUICE_EXECUTOR_JIT='c2': use one of tiered, c1, low.")


def test_the_urgent_lane_names_the_urgent_and_the_bulk_bands_and_the_knob_turns_it_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`lane_conf`: the plugin, exactly the urgent bands (slack under 2 s) of the ladder, and the
    others as the bulk bands that take turns."""
    from sluice.runtime import jvm_sink
    from sluice.runtime.session import LANE_ENV, Lane, lane_conf, lane_for, urgent_lane

    monkeypatch.delenv(LANE_ENV, raising=False)
    if jvm_sink.jar() is None:
        pytest.fail("Sluice's sink jar could not be built here (it needs a JDK's javac)")
    assert urgent_lane()
    assert lane_conf(8, 0) == {"spark.plugins": "dev.sluice.sink.UrgentLane",
                               "spark.sluice.urgentPools": "band0,band1,band2,band3,band4,band5"}
    assert lane_conf(8, 2) == lane_conf(8, 0) | {"spark.sluice.bulkTasks": "2", "spark.sluice.bulkPools": "band6,band7",
                                                 "spark.default.parallelism": "2"}
    # gated on a local master: 8 slots a core, bulk tasks one a core; on executors priorities only
    assert lane_for(True, True, 2) == Lane(True, 2, 16)
    assert lane_for(True, False, 2) == Lane(True, 0, 2)
    assert lane_for(False, True, 2) == Lane(False, 0, 2)  # fifo and fair: Spark alone
    monkeypatch.setenv(LANE_ENV, "0")
    assert not urgent_lane()
    assert lane_for(True, True, 2) == Lane(False, 0, 2)


def test_the_lane_sentence_says_which_priority_lever_is_in_force() -> None:
    from sluice.api.pool import PoolPriority
    from sluice.runtime.session import Lane, lane_sentence

    pods = Lane(on=True, bulk_tasks=0, slots=2)
    weight = PoolPriority(mechanism="podWeight", reason="no thread may raise its priority")
    assert lane_sentence(pods, True, weight) == (
        "on: urgent bands only, no bulk turns (turns need a local master or executor pods); "
        "no thread priorities (no thread may raise its priority)")
    assert lane_sentence(Lane(on=True, bulk_tasks=2, slots=16), True, PoolPriority(mechanism="threadNice")) == (
        "on: bulk tasks take turns, one a core; urgent threads at nice -5 ()")
    assert lane_sentence(pods, True, PoolPriority(mechanism="bulkNice", reason="r")).endswith(
        "bulk threads at nice 4 while they run (r)")
    held = Lane(on=True, bulk_tasks=2, slots=16, reserve=1)
    assert lane_sentence(held, True, weight).startswith(
        "on: bulk tasks take turns, one a core, 1 fewer in an executor while urgent tasks run there; ")
    assert "fewer" not in lane_sentence(held, True, PoolPriority(mechanism="threadNice"))  # priorities do it
    assert lane_sentence(Lane(on=True, bulk_tasks=4, slots=16), True, weight).startswith(
        "on: bulk tasks take turns, 4 at once in each executor of 2 cores; no thread priorities")  # bulkTasks 4
    assert lane_sentence(pods, False, weight).startswith("off: the policy has no gate")
    assert lane_sentence(Lane(on=False, bulk_tasks=0, slots=2), True, weight).startswith("off: SLUICE_URGENT_LANE=0")


def test_on_executor_pods_each_executor_gets_the_lanes_slots_and_turns_and_asks_for_its_cores(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`executor_lane`: a gated pool of 2-core executors runs 16 slots and 2 bulk turns in each
    executor JVM; the pod's CPU request stays the pool's (cpuRequest, else its cores), and RDDs split
    by the pool's cores, not by its slots."""
    from sluice.api.constants import BULK_TASKS_CONF, URGENT_RESERVE_CONF
    from sluice.runtime import jvm_sink
    from sluice.runtime.session import LANE_ENV, Lane, executor_lane

    monkeypatch.delenv(LANE_ENV, raising=False)
    if jvm_sink.jar() is None:
        pytest.fail("Sluice's sink jar could not be built here (it needs a JDK's javac)")
    conf = {"spark.executor.cores": "2", "spark.executor.instances": "3"}
    assert executor_lane(True, conf) == (Lane(True, 2, 16), {
        "spark.executor.cores": "16", "spark.kubernetes.executor.request.cores": "2",
        "spark.default.parallelism": "6"})
    lane, changed = executor_lane(True, conf | {"spark.kubernetes.executor.request.cores": "500m"})
    assert changed["spark.kubernetes.executor.request.cores"] == "500m" and lane.bulk_tasks == 2
    # the turns held back while urgent tasks run: at most all but one of an executor's
    assert executor_lane(True, conf | {URGENT_RESERVE_CONF: "1"})[0] == Lane(True, 2, 16, 1)
    assert executor_lane(True, conf | {URGENT_RESERVE_CONF: "5"})[0].reserve == 1
    # the pool's bulkTasks in place of the cores, the slots unchanged; a reserve below it
    assert executor_lane(True, conf | {BULK_TASKS_CONF: "4"})[0] == Lane(True, 4, 16)
    assert executor_lane(True, conf | {BULK_TASKS_CONF: "4", URGENT_RESERVE_CONF: "9"})[0].reserve == 3
    for wrong in ("0", "9", "two"):
        with pytest.raises(ValueError, match=rf"^--conf {BULK_TASKS_CONF}='{wrong}': give a whole number of bulk "
                                             r"turns from 1 to 8 \(4 a core\)\.$"):
            executor_lane(True, conf | {BULK_TASKS_CONF: wrong})
    with pytest.raises(ValueError, match=rf"^--conf {URGENT_RESERVE_CONF}='-1': give a whole number"):
        executor_lane(True, conf | {URGENT_RESERVE_CONF: "-1"})
    # fifo and fair (no gate) and the knob: Spark's own slots, nothing changed
    assert executor_lane(False, conf) == (Lane(False, 0, 2), {})
    monkeypatch.setenv(LANE_ENV, "0")
    assert executor_lane(True, conf) == (Lane(False, 0, 2), {})
    # a count that is not one names the setting
    with pytest.raises(ValueError, match=r"spark\.executor\.cores=.two."):
        executor_lane(True, {"spark.executor.cores": "two"})


def test_the_rocksdb_state_store_keeps_hadoop_s_local_filesystem_and_the_rest_stays_raw() -> None:
    from sluice.runtime.session import PROVIDER, RAW_LOCAL_FILES, ROCKSDB, local_files

    assert local_files({}) == RAW_LOCAL_FILES
    assert local_files({PROVIDER: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"}) == RAW_LOCAL_FILES
    rocksdb = local_files({PROVIDER: ROCKSDB})
    # set to Hadoop's own, not left out: an earlier session's raw one would be the default
    assert rocksdb["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.LocalFileSystem"
    assert {k: v for k, v in rocksdb.items() if k != "spark.hadoop.fs.file.impl"} == \
        {k: v for k, v in RAW_LOCAL_FILES.items() if k != "spark.hadoop.fs.file.impl"}


def test_a_local_cluster_master_names_its_workers_cores_and_memory() -> None:
    from sluice.runtime.session import LOCAL_CLUSTER_MB, local_cluster

    assert local_cluster(3) == f"local-cluster[3,1,{LOCAL_CLUSTER_MB}]"
    assert local_cluster(4, 1, 1536) == "local-cluster[4,1,1536]"  # the rescale benchmark's larger workers
    with pytest.raises(ValueError, match="at least 1 executor of 1 core"):
        local_cluster(0)


def test_a_warm_up_setting_that_is_not_seconds_is_one_sentence_naming_it() -> None:
    from sluice.api.constants import WARMUP_CONF
    from sluice.runtime.session import _seconds

    assert _seconds("30") == 30.0 and _seconds("0") == 0.0
    for bad in ("abc", "-5", "nan"):
        with pytest.raises(ValueError, match=rf"^--conf {WARMUP_CONF}='{bad}': give seconds, 0 or more"):
            _seconds(bad)


def test_the_start_warm_up_is_off_unless_set_and_a_bad_value_is_refused_before_spark_starts() -> None:
    from sluice.api.constants import START_WARMUP_CONF
    from sluice.runtime.session import start_warmup_seconds

    assert start_warmup_seconds({}) == 0.0  # `sluice run` and local runtimes: no warm-up
    assert start_warmup_seconds({START_WARMUP_CONF: "45"}) == 45.0
    with pytest.raises(ValueError) as refused:
        check_settings({START_WARMUP_CONF: "45s"})
    assert str(refused.value) == f"--conf {START_WARMUP_CONF}='45s': give seconds, 0 or more (0: no warm-up)."


def test_the_driver_s_collector_is_parallel_unless_the_runtime_s_setting_says_g1() -> None:
    from sluice.runtime.session import DRIVER_GC_CONF, DRIVER_GC_OPTIONS, driver_gc

    assert driver_gc({}) == "parallel" and DRIVER_GC_OPTIONS["parallel"] == "-XX:+UseParallelGC"
    assert driver_gc({DRIVER_GC_CONF: " g1 "}) == "g1" and DRIVER_GC_OPTIONS["g1"] == "-XX:+UseG1GC"
    with pytest.raises(ValueError) as refused:
        check_settings({DRIVER_GC_CONF: "zgc"})
    assert str(refused.value) == f"--conf {DRIVER_GC_CONF}='zgc': use one of parallel, g1."

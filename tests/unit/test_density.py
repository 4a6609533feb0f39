"""The density benchmark's pure parts: its query mix and a step's verdict."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sluice.api.manifest import load_query
from sluice.api.wire import QueryStatus
from sluice.bench import density as density_bench
from sluice.bench import procfs
from sluice.bench.density import (
    is_critical,
    manifest,
    rate,
    step_attainment,
    summarize_step,
)
from sluice.cli.main import main


def test_the_mix_is_valid_and_as_described() -> None:
    queries = [load_query(manifest(i, "127.0.0.1:9092", f"t{i}")) for i in range(200)]
    critical = [q for i, q in enumerate(queries) if is_critical(i)]
    assert len(critical) == 20  # 10%
    assert all(q.spec.sla.latencyTarget.ms == 2000 for q in critical)
    bulk = [q for i, q in enumerate(queries) if not is_critical(i)]
    windowed = [q for q in bulk if q.spec.stateful]
    assert 0.4 <= len(windowed) / len(bulk) <= 0.6  # half of the bulk queries aggregate
    assert all(30_000 <= q.spec.sla.latencyTarget.ms <= 300_000 for q in bulk)
    assert all(q.spec.trigger is None for q in queries)  # intervals come from the SLAs
    assert all(10 <= rate(i) <= 50 for i in range(400))
    assert len({q.key for q in queries}) == 200 and len({q.tenant for q in queries}) == 20


def status(phase: str, measured: float, within: float, batches: int, p99: float | None = None) -> QueryStatus:
    return QueryStatus(phase=phase, sla_ms=1000, measured_rows=measured, rows_within=within, batches=batches,  # type: ignore[arg-type]
                       p99_ms=p99)


def test_a_step_is_judged_on_the_rows_output_between_two_readings() -> None:
    # before the step: the critical query had missed everything, which the step does not inherit
    before = {"a/crit": status("Running", 100, 0, 10), "b/bulk": status("Running", 50, 50, 5),
              "c/bulk": status("Running", 0, 0, 2)}
    after = {"a/crit": status("Running", 300, 199, 30, 1500.0), "b/bulk": status("Running", 150, 146, 9, 20_000.0),
             "c/bulk": status("Running", 100, 100, 4, 9_000.0)}
    assert step_attainment(before["a/crit"], after["a/crit"]) == 199 / 200
    step = summarize_step(before, after, {"a/crit"})
    assert step == {"worst_critical_attainment": 0.995, "worst_bulk_attainment": 0.96,
                    "critical_p99_ms": 1500.0, "bulk_p99_ms": 20_000.0, "held": True, "unjudged": [],
                    "unjudged_classes": []}
    after["a/crit"] = status("Running", 300, 197, 30, 2500.0)  # 98.5%: enough for bulk, not for critical
    assert not summarize_step(before, after, {"a/crit"})["held"]


def test_a_query_with_nothing_to_judge_is_left_out_and_a_stuck_one_fails_its_class() -> None:
    before = {"a/crit": status("Running", 10, 10, 10), "c/bulk": status("Running", 7, 7, 3)}
    # c ran batches but output nothing measured (a window not yet closed): not judged
    after = {"a/crit": status("Running", 20, 20, 20), "c/bulk": status("Running", 7, 7, 5)}
    step = summarize_step(before, after, {"a/crit"})
    assert step["worst_bulk_attainment"] is None and step["unjudged"] == ["c/bulk"] and step["held"] is False
    assert step["unjudged_classes"] == ["bulk"]  # the bulk class's only query judged nothing: not held
    # with a second bulk query judged, the unjudged one is left out and the step holds
    before["d/bulk"], after["d/bulk"] = status("Running", 0, 0, 1), status("Running", 50, 50, 4)
    step = summarize_step(before, after, {"a/crit"})
    assert step["worst_bulk_attainment"] == 1.0 and step["unjudged"] == ["c/bulk"] and step["held"]
    del before["d/bulk"], after["d/bulk"]
    # c ran no batch at all in the step: stuck, which counts as nothing kept
    after["c/bulk"] = status("Running", 7, 7, 3)
    step = summarize_step(before, after, {"a/crit"})
    assert step["worst_bulk_attainment"] == 0.0 and not step["held"]
    # a query added during the step has no earlier reading: judged from its start
    assert step_attainment(None, status("Running", 4, 3, 2)) == 0.75
    after["c/bulk"] = status("Failed", 9, 9, 6)
    assert not summarize_step(before, after, {"a/crit"})["held"]


def test_bad_counts_get_one_sentence() -> None:
    for bad in ("10,1", "0,5", "a,b", ""):
        result = CliRunner().invoke(main, ["bench", "density", "--counts", bad])
        assert result.exit_code == 1 and "--counts" in result.output and "Traceback" not in result.output


def test_a_run_whose_first_step_broke_while_filling_still_gets_its_plot(tmp_path: Path) -> None:
    # the 76th of 100 queries at once got no answer: no step measured, no application run
    result = {"shared": [{"queries": 100, "stopped": "query 76 could not be added", "held": False}],
              "per_app": [], "capacity_queries": 0}
    density_bench.plot(result, tmp_path)
    assert (tmp_path / "density.png").stat().st_size > 0


def test_a_scheduler_capacity_besides_the_default_is_named_in_the_summary() -> None:
    result = {"shared": [], "per_app": [], "capacity_queries": 0, "options": {"conf": [], "capacity": 100}}
    assert "scheduler capacity: 100 batches at once (default 4)" in density_bench.render(result)
    result["options"]["capacity"] = 4
    assert "scheduler capacity" not in density_bench.render(result)
    refused = CliRunner().invoke(main, ["bench", "density", "--capacity", "0"])
    assert refused.exit_code == 2 and "--capacity" in refused.output and "Traceback" not in refused.output


def test_the_critical_queries_path_is_averaged_and_its_lead_named_at_the_break() -> None:
    path = density_bench.class_path([{"stage start": 0.4, "driver": 0.6}, {"stage start": 0.8, "gate wait": 0.2}, {}])
    assert path == {"stage start": 0.6, "driver": 0.3, "gate wait": 0.1}  # the query with no path left out
    assert list(path) == ["stage start", "driver", "gate wait"]
    row = {"queries": 100, "held": False, "critical_path_critical": path}
    assert density_bench.leading(row) == "N=100: the critical queries' path led by stage start 60%, driver 30%, gate wait 10%"
    assert density_bench.leading({"queries": 50, "critical_path_critical": {}}) == ""


def test_vitals_count_a_process_group_s_threads_and_open_files_by_program(tmp_path: Path) -> None:
    import subprocess
    import sys

    # a real child: Python holding 5 threads (itself and 4 sleepers) and 3 more files open
    code = ("import threading, time, os\n"
            "fs = [open(os.devnull) for _ in range(3)]\n"
            "[threading.Thread(target=time.sleep, args=(60,), daemon=True).start() for _ in range(4)]\n"
            "print('ready', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        held = procfs.vitals(child.pid)
        assert list(held["threads"].values()) == [5]  # one program (its name is the interpreter's)
        assert next(iter(held["fds"].values())) >= 3 + 3  # stdin, stdout, stderr and the three files
        assert held["machine_threads"] >= 5 and held["threads_max"] > 0
    finally:
        child.kill()
        child.wait()


def test_a_runtime_that_died_is_said_with_its_signal_and_its_driver_s_last_word(tmp_path: Path) -> None:
    import signal
    import subprocess
    from types import SimpleNamespace

    (tmp_path / "runtime-1.log").write_text(
        "INFO starting\nERROR the Spark driver exited (killed by SIGKILL); every query of this runtime has stopped, "
        "so the runtime must restart\nINFO bye\n")
    proc = subprocess.Popen(["sleep", "60"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # a stand-in for `RuntimeProcess` (its process and work directory are all `_fate` reads)
    said = density_bench._fate(SimpleNamespace(proc=proc, workdir=tmp_path))
    assert said.startswith("the runtime exited (killed by SIGKILL); its log: ERROR the Spark driver exited")
    running = subprocess.Popen(["sleep", "60"])
    try:
        assert density_bench._fate(SimpleNamespace(proc=running, workdir=tmp_path / "none")) == \
            "the runtime is still running"
    finally:
        running.kill()
        running.wait()


def test_bad_batch_cost_levers_get_one_sentence() -> None:
    for args, flag in ((["--lever", "ui=false"], "--lever"), (["--lever", " , "], "--lever"),
                       (["--lever", "spark.a=1", "--lever", "spark.a=1"], "--lever"), (["--conf", "x"], "--conf")):
        result = CliRunner().invoke(main, ["bench", "batch-cost", *args, "--no-calibrate"])
        assert result.exit_code == 1 and flag in result.output and "Traceback" not in result.output, result.output


def test_batch_cost_levers_are_sides_on_top_of_sluice_s_settings() -> None:
    from sluice.bench import batch_cost

    options = batch_cost.Options(conf=("spark.x=1",), levers=("spark.a=1", "spark.a=1, spark.b=2"))
    assert batch_cost.sides(options) == ("spark-defaults", "sluice", "sluice+spark.a=1", "sluice+spark.a=1, spark.b=2")
    assert batch_cost.side_conf("sluice+spark.a=1, spark.b=2", options) == ("spark.x=1", "spark.a=1", "spark.b=2")
    assert batch_cost.side_conf("sluice", options) == ("spark.x=1",)
    assert "spark.x=1" not in batch_cost.side_conf("spark-defaults", options)


def test_batch_cost_without_defaults_names_the_side_it_left_out_and_no_ratio(tmp_path: Path) -> None:
    from sluice.bench import batch_cost

    row = {"conf": [], "queries": 2, "batches": 40, "batches_per_s": 2.0, "cores": 0.5, "cpu_ms_per_batch": 250.0,
           "codegen_compiles_per_min_per_query": 0.5, "threads_ms_per_batch": {kind: 10.0 for kind in batch_cost.THREAD_KINDS}}
    result = {"sides": {"spark-defaults": {"conf": [], "left_out": "--without-defaults"}, "sluice": row,
                        "sluice+spark.a=1": row | {"ratio_to_sluice": 1.0}},
              "ratio": None, "options": {"queries": 2, "master": "local[2]", "window": 10.0}}
    summary = batch_cost.render(result)
    assert "spark-defaults  left out (--without-defaults)" in summary
    assert "sluice / spark-defaults" not in summary and "lever 1: spark.a=1" in summary
    batch_cost.plot(result, tmp_path)  # the left-out side has no bar to draw
    assert (tmp_path / "batch-cost.png").stat().st_size > 5_000


def test_each_query_of_the_mix_has_its_own_literals_unless_same_shapes() -> None:
    bodies = [density_bench.manifest(i, "localhost:9092", f"t{i}") for i in range(200)]
    for body in bodies:
        load_query(body)  # each a valid query
    pipelines = [json.dumps(b["spec"]["pipeline"]) for b in bodies]
    assert len(set(pipelines)) >= 190  # nearly every query a pipeline text of its own
    assert pipelines == [json.dumps(density_bench.manifest(i, "h", f"t{i}")["spec"]["pipeline"]) for i in range(200)]
    same = {json.dumps(density_bench.manifest(i, "h", "t", same_shapes=True)["spec"]["pipeline"]) for i in range(200)}
    assert len(same) == 3  # today's mix: a critical filter, a bulk filter, a windowed count
    thresholds = [density_bench.literals(i).critical_threshold for i in range(200)]
    assert min(thresholds) >= 880 and max(thresholds) <= 920  # selectivity stays near the shared mix's


def test_cpu_seconds_counts_a_child_that_ended_before_any_reading() -> None:
    import os
    import subprocess
    import sys

    before = procfs.cpu_seconds(os.getpid())
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"],
                   check=True)
    assert procfs.cpu_seconds(os.getpid()) - before >= 0.45  # the child's CPU, reaped: its parent's cutime


def test_batch_cost_ratios_are_also_given_less_the_jit_compilers() -> None:
    from sluice.bench import batch_cost

    kinds = {kind: 5.0 for kind in batch_cost.THREAD_KINDS}
    row = {"conf": [], "queries": 2, "batches": 40, "batches_per_s": 2.0, "cores": 0.5,
           "codegen_compiles_per_min_per_query": 0.5, "threads_ms_per_batch": kinds}
    ours = row | {"cpu_ms_per_batch": 100.0, batch_cost.WITHOUT_JIT: 80.0}
    lever = row | {"cpu_ms_per_batch": 90.0, batch_cost.WITHOUT_JIT: 86.0}
    assert batch_cost.ratio(lever, ours, "cpu_ms_per_batch") == 0.9  # cheaper with the compilers
    assert batch_cost.ratio(lever, ours, batch_cost.WITHOUT_JIT) == 1.075  # dearer without them
    assert batch_cost.ratio(lever, {"left_out": "--without-defaults"}, batch_cost.WITHOUT_JIT) is None
    older = row | {"cpu_ms_per_batch": 90.0}  # a results.json from before the figure: no column
    assert batch_cost.ratio(older, ours, batch_cost.WITHOUT_JIT) is None
    result = {"sides": {"spark-defaults": ours | {"cpu_ms_per_batch": 200.0, batch_cost.WITHOUT_JIT: 120.0},
                        "sluice": ours, "sluice+spark.a=1": lever | {"ratio_to_sluice": 0.9, "ratio_to_sluice_without_jit": 1.075},
                        "sluice+spark.b=1": older | {"ratio_to_sluice": 0.9, "ratio_to_sluice_without_jit": None}},
              "ratio": 0.5, "ratio_without_jit": 0.667, "options": {"queries": 2, "master": "local[2]", "window": 10.0}}
    lines = batch_cost.render(result).splitlines()
    assert lines[4].split()[:7] == ["lever", "1", "2.00", "0.50", "90.0", "0.90x", "86.0"] and "1.07x" in lines[4]
    assert lines[5].split()[:7] == ["lever", "2", "2.00", "0.50", "90.0", "0.90x", "-"]
    assert "0.50x CPU per batch (0.67x less the JIT compilers)" in "\n".join(lines)

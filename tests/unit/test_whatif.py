"""`sluice simulate` and `sluice size` from the command line: inputs, answers, and bad input in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FRAUD = str(ROOT / "examples" / "fraud-filter.yaml")
CLICKS = str(ROOT / "examples" / "kafka-clicks.yaml")
SCENARIO = str(ROOT / "bench" / "scenarios" / "multi-tenant.yaml")

COSTS = """
queries:
  payments/card-fraud: {rate: 150, trigger: 500ms, fixed: 150ms, perRow: 2.0e-5, critical: true}
  security/login-anomalies: {rate: 150, trigger: 500ms, fixed: 150ms, perRow: 2.0e-5, critical: true}
  web/checkout-funnel: {rate: 200, trigger: 2s, fixed: 200ms, perRow: 2.0e-5}
  analytics/merchant-stats: {rate: 1000, trigger: 5s, keys: 3000, fixed: 600ms, perRow: 1.0e-4}
  analytics/regional-revenue: {rate: 1000, trigger: 5s, keys: 3000, fixed: 600ms, perRow: 1.0e-4}
  supply/inventory-rollup: {rate: 600, trigger: 5s, keys: 1000, fixed: 600ms, perRow: 1.0e-4}
"""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_simulate_prints_each_query_and_writes_its_files(tmp_path: Path) -> None:
    rates = tmp_path / "rates.yaml"
    rates.write_text("queries:\n  payments/fraud-filter: {rate: 200, fixed: 150ms, perRow: 2.0e-5}\n")
    code, out, err = invoke("simulate", "-f", FRAUD, "--rates", str(rates), "--executors", "1", "--duration", "2m",
                            "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "payments/fraud-filter" in out and "every SLA kept at 1 executor(s)." in out
    body = json.loads((tmp_path / "out" / "simulate.json").read_text())
    query = body["queries"]["payments/fraud-filter"]
    assert query["batches"] > 100 and query["attainment"] == 1.0  # 200 ms trigger, 154 ms batches, 500 ms SLA
    assert (tmp_path / "out" / "simulate.png").stat().st_size > 10_000
    assert (body["seconds"], body["warmup_seconds"]) == (120.0, 30.0)  # --duration; the default warm-up


def test_a_scenario_sets_the_simulated_span_as_the_benchmark_runs_it(tmp_path: Path) -> None:
    rates = tmp_path / "rates.yaml"
    rates.write_text(COSTS)
    code, _, err = invoke("simulate", "--scenario", SCENARIO, "--rates", str(rates), "--executors", "4",
                          "--out", str(tmp_path / "out"))
    assert code == 0, err
    body = json.loads((tmp_path / "out" / "simulate.json").read_text())
    assert (body["seconds"], body["warmup_seconds"]) == (80.0, 20.0)  # multi-tenant: 60 s measured after 20 s


def test_size_reports_the_sla_count_beside_ds2_s_and_which_decides(tmp_path: Path) -> None:
    rates = tmp_path / "rates.yaml"
    rates.write_text(COSTS)
    code, out, err = invoke("size", "--scenario", SCENARIO, "--rates", str(rates), "--duration", "5m")
    assert code == 0, err
    # DS2 sums 1.33 cores of work (2 executors at 70%). Spark's triggers fire on their interval's
    # grid, so the three aggregations' 1.1 s batches start together every 5 s, and the critical
    # filters' 500 ms ticks fall on them: a filter waits for a slot until there is one for every
    # batch that can run at once (3 aggregations and 2 filters: 5)
    assert "DS2 (sustains the rates): 2 executor(s)" in out
    assert "SLAs (keeps every SLA, simulated under cameo): 5 executor(s)." in out
    assert "The SLAs decide: 5 executors, 3 more than DS2's 2" in out
    assert "4 executor(s): misses" in err


def test_costs_come_from_a_recorded_run_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": {
        "fixed_ms": 120.0, "per_row_us": 15.0, "commit_ms": 30.0, "input_rate": 400.0}}}}))
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "1m")
    assert code == 0, err
    assert "payments/fraud-filter" in out
    assert "rec p99" not in out  # the report measured no latency: nothing to set beside the prediction


def test_a_recording_s_measured_figures_stand_beside_the_prediction(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"cores": 2, "queries": {"payments/fraud-filter": {
        "p99_ms": 640.0, "attainment": 0.9, "costs": {
            "fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0}}}}))
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "2m",
                            "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "1 executor(s) x 2 core(s)" in out  # the recording's cores, as no pool or flag gave them
    row = next(line for line in out.splitlines() if line.startswith("payments/fraud-filter"))
    assert row.split()[-2:] == ["640", "90.0%"]
    measured = json.loads((tmp_path / "out" / "simulate.json").read_text())["measured"]["payments/fraud-filter"]
    predicted = measured["predicted_p99_ms"]
    # the manifest's 200 ms trigger and 154 ms batches on a free slot: a row waits at most 354 ms
    assert 300 < predicted <= 355
    assert measured["p99_error"] == predicted / 640.0 - 1
    assert measured["attainment_points"] == (measured["predicted_attainment"] - 0.9) * 100


def test_bad_input_gets_one_sentence_and_no_traceback(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"queries": {"someone/else": {"costs": {
        "fixed_ms": 1, "per_row_us": 1, "commit_ms": 1, "input_rate": 1}}}}))
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": {
        "fixed_ms": -5, "per_row_us": 1, "commit_ms": 1, "queueing_ms": 0, "input_rate": 1, "batches": 9}}}}))
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": {"fixed_ms": 5}}}}))
    rates = tmp_path / "rates.yaml"
    rates.write_text("queries:\n  payments/fraud-filter: {rate: 10, perRow: -1}\n")
    bad_manifest = tmp_path / "bad.yaml"
    bad_manifest.write_text(Path(FRAUD).read_text().replace("500ms", "soon"))
    cases = [
        (["-f", FRAUD, "--costs", str(report)], "query someone/else is in the costs but in no manifest given"),
        (["-f", FRAUD, "--costs", str(negative)], "queries.payments/fraud-filter.costs has a negative or non-finite figure"),
        (["-f", FRAUD, "--costs", str(partial)], "queries.payments/fraud-filter.costs.per_row_us: field required"),
        (["-f", FRAUD, "--rates", str(rates)], "queries.payments/fraud-filter.perRow"),
        (["-f", CLICKS], "query analytics/checkout-clicks has no input rate"),
        (["-f", FRAUD], "query payments/fraud-filter has no batch costs"),  # its rate source's rowsPerSecond is its rate
        (["-f", str(bad_manifest)], "spec.sla.latencyTarget"),
        ([], "either with -f MANIFEST... or with --scenario FILE"),
        (["--scenario", str(tmp_path / "missing.yaml")], "cannot be read"),
    ]
    for args, expected in cases:
        code, out, err = invoke("simulate", *args, "--executors", "1")
        assert code == 1, (args, out, err)
        assert expected in err, (args, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    declared = tmp_path / "declared.yaml"
    declared.write_text("queries:\n  payments/fraud-filter: {rate: 10}\n")
    code, _, err = invoke("simulate", "-f", FRAUD, "--rates", str(declared), "--executors", "1")
    assert code == 1 and "has no batch costs" in err


def test_the_readme_s_examples_answer_as_shown() -> None:
    files = [str(ROOT / "examples" / name) for name in ("pool.yaml", "fraud-filter.yaml", "hourly-revenue.yaml")]
    args = [a for f in files for a in ("-f", f)] + ["--rates", str(ROOT / "examples" / "whatif" / "rates.yaml")]
    code, out, err = invoke("simulate", *args, "--executors", "1")
    assert code == 0, err
    assert out.splitlines()[0] == "1 executor(s) x 2 core(s), cameo" and "every SLA kept at 1 executor(s)." in out
    code, out, err = invoke("size", *args, "--cores-per-executor", "1")
    assert code == 0, err
    assert "1 executor(s): misses; worst payments/fraud-filter" in err
    assert "DS2 (sustains the rates): 2 executor(s) of 1 core(s)" in out
    assert "SLAs (keeps every SLA, simulated under cameo): 2 executor(s)." in out and "Both bounds agree" in out


def test_size_exits_3_when_no_pool_keeps_every_sla() -> None:
    """A script tells "SLAs missed" (3) from bad input (1) and a command line click refused (2)."""
    files = [str(ROOT / "examples" / name) for name in ("pool.yaml", "fraud-filter.yaml", "hourly-revenue.yaml")]
    args = [a for f in files for a in ("-f", f)] + ["--rates", str(ROOT / "examples" / "whatif" / "rates.yaml")]
    code, out, _ = invoke("size", *args, "--cores-per-executor", "1", "--max-executors", "1")
    assert code == 3 and "SLAs: not kept even at 1 executor(s)" in out


def test_size_out_writes_the_answer_for_scripts(tmp_path: Path) -> None:
    files = [str(ROOT / "examples" / name) for name in ("pool.yaml", "fraud-filter.yaml", "hourly-revenue.yaml")]
    args = [a for f in files for a in ("-f", f)] + ["--rates", str(ROOT / "examples" / "whatif" / "rates.yaml")]
    code, _, err = invoke("size", *args, "--cores-per-executor", "1", "--out", str(tmp_path / "a"))
    assert code == 0, err
    body = json.loads((tmp_path / "a" / "size.json").read_text())
    assert (body["sla_executors"], body["ds2_executors"], body["cores_per_executor"]) == (2, 2, 1)
    assert [(s["executors"], s["kept"]) for s in body["steps"]] == [(1, False), (2, True)]
    assert body["steps"][0]["worst_query"] == "payments/fraud-filter"
    code, _, _ = invoke("size", *args, "--cores-per-executor", "1", "--max-executors", "1", "--out", str(tmp_path / "b"))
    assert code == 3 and json.loads((tmp_path / "b" / "size.json").read_text())["sla_executors"] is None
    code, _, err = invoke("size", *args, "--no-such-option")
    assert code == 2 and "No such option" in err


def test_bench_simulate_times_each_step_and_the_operator_s_sizing(tmp_path: Path) -> None:
    code, out, err = invoke("bench", "simulate", "--counts", "20,40", "--duration", "1m", "--sizing", "30",
                            "--out", str(tmp_path), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert [s["queries"] for s in result["steps"]] == [20, 40]
    assert all(s["batches"] > 0 and s["decisions"] > 0 for s in result["steps"])
    sizing = result["sizing"]
    assert sizing["queries"] == 30 and sizing["simulations"] >= 2 and sizing["simulated_s"] == 120.0
    assert json.loads((tmp_path / "results.json").read_text()) == result
    assert "SLA-aware sizing of 30 queries" in (tmp_path / "summary.txt").read_text()


def test_a_recording_s_work_and_spark_setup_drive_the_shared_cores(tmp_path: Path) -> None:
    from sluice.cli.whatif import Setup, off_cpu, read_costs, recorded_setup

    report = tmp_path / "report.json"
    costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0}
    work = {"driver_ms": 80.0, "task_cpu_ms": 10.0, "task_cpu_per_row_us": 50.0, "tasks": 2, "task_run_ratio": 2.0,
            "fit": "12 batches: ..."}
    report.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "spark": {"master": "local[16]"},
                                  "queries": {"payments/fraud-filter": {"costs": {**costs, **work}}}}))
    assert recorded_setup(report) == Setup(2, 4, 16, True)
    assert read_costs(report, ["payments/fraud-filter"])["payments/fraud-filter"].work == (0.08, 0.01, 5e-5, 2, 2.0)
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "1m")
    assert code == 0, err
    assert "1 executor(s) x 2 core(s)" in out
    # a 200 ms trigger reads 40 rows: 80 ms on the driver, then 12 ms of task CPU over 2 tasks (6 ms
    # on two free cores): a row waits at most 200 + 86 ms; with the tasks' run time twice their CPU
    # (--model cores-run) 200 + 92 ms
    # and --model cores-wait: the run time beyond what 2 tasks on 2 cores explain (2.0 - 1) is a wait
    # after the tasks, 6 ms: 200 + 92 ms too (the two differ only where batches share the cores)
    # and --model cores-hold: the same wait inside the tasks' slots (alone, as long: 200 + 92 ms)
    for model, longest in (("cores", 286), ("cores-run", 292), ("cores-wait", 292), ("cores-hold", 292)):
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "1m",
                              "--model", model, "--out", str(tmp_path / model))
        assert code == 0, err
        p99 = json.loads((tmp_path / model / "simulate.json").read_text())["queries"]["payments/fraud-filter"]["p99_ms"]
        assert longest - 12 < p99 <= longest * 1.02
    # --model cores-cpu: the driver's CPU (`driver_cpu_ms`, 30 ms) on the shared cores, the rest of
    # its 80 ms a wait without a core: alone, a batch takes as long as under cores (200 + 86 ms)
    timed = tmp_path / "timed.json"
    timed.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "spark": {"master": "local[16]"},
                                 "queries": {"payments/fraud-filter": {"costs": {**costs, **work, "driver_cpu_ms": 30.0}}}}))
    assert read_costs(timed, ["payments/fraud-filter"])["payments/fraud-filter"].driver_cpu == 0.03
    for recording, longest in ((timed, 286), (report, 286)):
        out_dir = tmp_path / f"cpu-{recording.stem}"
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(recording), "--executors", "1", "--duration", "1m",
                              "--model", "cores-cpu", "--out", str(out_dir))
        assert code == 0, err
        p99 = json.loads((out_dir / "simulate.json").read_text())["queries"]["payments/fraud-filter"]["p99_ms"]
        assert longest - 12 < p99 <= longest * 1.02
    from sluice.cli.whatif_commands import _whatif_inputs

    split = _whatif_inputs((FRAUD,), None, str(timed), None, None, None, 60.0, None, model="cores-cpu").queries[0]
    assert (split.driver, split.driver_wait) == pytest.approx((0.03, 0.05))  # 30 ms on the cores, 50 ms waited
    assert split.alone(40) == pytest.approx(0.03 + 0.05 + (0.01 + 40 * 5e-5) / 2)  # 86 ms, as under cores
    assert split.waits(40) == pytest.approx(0.05)  # after its tasks, no core taken
    assert off_cpu(2.0, 2, Setup(2, 4, 16, True)) == 1.0  # 2 tasks on 2 cores: none shares its batch's cores
    assert off_cpu(9.0, 8, Setup(2, 4, 16, True)) == 5.0  # 8 tasks on 2 cores: 4x from its own batch
    assert off_cpu(9.0, 8, Setup(2, 4, 2, True)) == 8.0  # 2 slots: its tasks run 2 at a time
    assert off_cpu(3.0, 8, Setup(2, 4, 16, True)) == 0.0  # a ratio sharing explains whole: no time off the CPU
    assert off_cpu(3.0, 8, Setup(2)) == 2.0  # slots unknown: one a core, its tasks 2 at a time
    # run times without the waits for a bulk turn (2 turns): 8 tasks ran 2 at a time on the 2 cores
    assert off_cpu(3.0, 8, Setup(2, 4, 16, True, bulk_tasks=2, turns_measured=True)) == 2.0
    assert off_cpu(3.0, 8, Setup(2, 4, 16, True, bulk_tasks=2)) == 0.0  # waits in them: 8 at once, as before
    sample = [15000, 0.1, 0.3, 0.9, 8, 0.05, 0.5]  # rows, driver, CPU, run, tasks, driver CPU, turn wait
    report.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "spark": {"master": "local[16]", "bulk_tasks": 2},
                                  "queries": {"payments/fraud-filter": {"costs": {**costs, **work},
                                                                        "work_samples": {"recent": [sample]}}}}))
    assert recorded_setup(report) == Setup(2, 4, 16, True, bulk_tasks=2, turns_measured=True)
    report.write_text(report.read_text().replace(", 0.5]", ", null]"))  # a batch whose waits the driver did not see
    assert recorded_setup(report) == Setup(2, 4, 16, True, bulk_tasks=2)
    # the cores the rest of the machine took beside the recorded load (`sluice bench cameo`'s `machine`)
    busy = tmp_path / "busy.json"
    busy.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "spark": {"master": "local[16]"},
                                "machine": {"other_cores": 0.75},
                                "queries": {"payments/fraud-filter": {"costs": {**costs, **work}}}}))
    assert recorded_setup(busy) == Setup(2, 4, 16, True, 0.75)
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(busy), "--executors", "1", "--duration", "1m")
    assert code == 0 and "1 executor(s) x 2 core(s), cameo, 0.75 core(s) taken by other processes" in out, err
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(busy), "--executors", "1", "--duration", "1m",
                            "--other-cores", "0")
    assert code == 0 and "taken by other processes" not in out, err
    old = tmp_path / "old.json"  # a report from before the work figures: the slot model as before
    old.write_text(json.dumps({"cores": 2, "queries": {"payments/fraud-filter": {"costs": costs}}}))
    assert recorded_setup(old) == Setup(2, None, None, False)
    laned = tmp_path / "laned.json"  # a recording since the critical lane (2026-12-02) carries it
    laned.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "critical_lane": 1, "spark": {"master": "local[16]"},
                                 "queries": {"payments/fraud-filter": {"costs": costs}}}))
    assert recorded_setup(laned) == Setup(2, 4, 16, True, lane=1)
    assert read_costs(old, ["payments/fraud-filter"])["payments/fraud-filter"].work is None



def test_a_local_cluster_recording_sizes_executors_on_its_machine_s_cores(tmp_path: Path) -> None:
    """`sluice bench cameo --executors N`: one-core executor JVMs and the driver on one machine's
    cores, the runtime's gate sized from the machine, the lane's raised priorities (root)."""
    from sluice.cli.whatif import Setup, recorded_setup

    report = tmp_path / "report.json"
    costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0}
    work = {"driver_ms": 80.0, "task_cpu_ms": 10.0, "task_cpu_per_row_us": 50.0, "tasks": 2, "task_run_ratio": 2.0}
    report.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "machine": {"other_cores": 0.4},
                                  "spark": {"master": "local-cluster[3,1,1024]", "lane_on": True, "priorities": True},
                                  "queries": {"payments/fraud-filter": {"costs": {**costs, **work}}}}))
    assert recorded_setup(report) == Setup(1, 4, None, True, 0.4, 2.0, True)
    for given in ((), ("--cores-per-executor", "1")):
        code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "3", "--duration", "1m",
                                *given)
        assert code == 0, err
        assert ("3 executor(s) x 1 core(s), all on one machine's 2 cores, cameo, 0.4 core(s) taken by other "
                "processes, urgent threads weigh more on the cores (raised priorities)") in out
    from sluice.cli.whatif_commands import _whatif_inputs

    pool = _whatif_inputs((FRAUD,), None, str(report), None, 1, None, None, None).pool(3)
    cores = pool.cores()  # 3 slots, the gate the recording had, the machine's 2 cores less 0.4 taken
    assert (pool.gate, cores.task_slots, cores.cores, cores.driver_shares, cores.priority) == (4, 3, 1.6, True, True)
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "3", "--duration", "1m",
                            "--host-cores", "8")
    assert code == 0 and "all on one machine's 8 cores" in out, err
    local = tmp_path / "local.json"  # a local master with the lane's bulk turns: 2 bulk tasks a time an executor
    local.write_text(json.dumps({"cores": 2, "gate_capacity": 4, "spark": {"master": "local[16]", "lane_on": True,
                                                                          "bulk_tasks": 2, "priorities": True},
                                 "queries": {"payments/fraud-filter": {"costs": {**costs, **work}}}}))
    assert recorded_setup(local) == Setup(2, 4, 16, True, 0.0, None, True, 2)
    scaled = _whatif_inputs((FRAUD,), None, str(local), None, None, None, None, None).pool(3)
    assert (scaled.bulk_slots, scaled.task_slots, scaled.priority, scaled.host_cores) == (6, 48, True, None)
    report.write_text(report.read_text().replace('"priorities": true', '"priorities": false'))
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "3", "--duration", "1m")
    assert code == 0 and "raised priorities" not in out, err  # the lane on, but no CAP_SYS_NICE


def test_a_node_target_recording_sizes_executor_pods_on_the_node_s_cores(tmp_path: Path) -> None:
    """`sluice bench cameo --target node`: executor pods of 2 cores whose runtime told 16 task
    slots and 2 bulk tasks each, the driver and every executor on the node's 2 cores, the
    sidecar's gate of 2 cores x 2 executors at most, the rest of the node (control plane, broker)
    taking 0.6 cores, no CAP_SYS_NICE in the pods."""
    from sluice.cli.whatif import Setup, recorded_setup

    report = tmp_path / "report.json"
    costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0}
    work = {"driver_ms": 80.0, "task_cpu_ms": 10.0, "task_cpu_per_row_us": 50.0, "tasks": 2, "task_run_ratio": 2.0}
    report.write_text(json.dumps({
        "target": "node", "cores": 2, "gate_capacity": 4, "critical_lane": 1, "machine": {"other_cores": 0.6},
        "spark": {"master": "k8s", "executor_cores": 2, "host_cores": 2, "task_slots": 16, "bulk_tasks": 2,
                  "priorities": False, "lane_on": True},
        "queries": {"payments/fraud-filter": {"costs": {**costs, **work}, "cold_ms": [900.0]}}}))
    assert recorded_setup(report) == Setup(2, 4, 16, True, 0.6, 2.0, False, 2, 1)
    from sluice.cli.whatif_commands import _whatif_inputs

    inputs = _whatif_inputs((FRAUD,), None, str(report), None, None, None, None, None)
    pool = inputs.pool(2)  # two pods: their slots and turns twice over, on the one node's cores
    assert pool.busy == ()  # no JVM series in this recording
    raw = json.loads(report.read_text())
    raw["machine"]["series"] = {"jit": [[10.0, 6.0], [20.0, 8.0]], "gc": [[10.0, 1.0], [20.0, 1.0]]}
    timed = tmp_path / "timed.json"
    timed.write_text(json.dumps(raw))
    assert _whatif_inputs((FRAUD,), None, str(timed), None, None, None, None, None).pool(2).busy == ((0.0, 0.7),
                                                                                                  (10.0, 0.2))
    # --no-cold: steady costs, and no JVM warming up either
    assert _whatif_inputs((FRAUD,), None, str(timed), None, None, None, None, None, cold=False).pool(2).busy == ()
    assert (pool.executors, pool.cores_per_executor, pool.task_slots, pool.bulk_slots, pool.host_cores, pool.gate,
            pool.priority) == (2, 2, 32, 4, 2.0, 4, False)
    assert inputs.queries[0].cold == (0.9,)
    cores = pool.cores()  # 2 pods x 2 cores, but the node has 2, less the 0.6 the rest took
    assert (cores.cores, cores.driver_shares) == (pytest.approx(1.4), True)
    code, out, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "2", "--duration", "1m")
    assert code == 0, err
    assert "2 executor(s) x 2 core(s), all on one machine's 2 cores, cameo, 0.6 core(s) taken by other processes\n" in out
    report.write_text(report.read_text().replace('"task_slots": 16, "bulk_tasks": 2', '"bulk_tasks": null'))
    assert recorded_setup(report) == Setup(2, 4, 2, True, 0.6, 2.0, False, None, 1)  # the lane off: a slot a core


def test_a_node_recording_s_jvm_cores_become_steps_of_ten_seconds_or_more() -> None:
    from sluice.cli.whatif import jvm_busy

    # JIT and GC CPU seconds since the load started, read every 2 s and again at each 10 s listing
    # (10.0 and 10.2); the two kinds summed: 8 s by 10.0 (0.8 cores), 10 s by 20.2 (0.2 over
    # 10.2 s), 12 by 30.4 and the last read (0.2 cores)
    jit = [[2.0, 1.5], [10.0, 7.5], [10.2, 7.6], [20.2, 9.5], [30.4, 11.4]]
    gc = [[2.0, 0.1], [10.0, 0.5], [10.2, 0.5], [20.2, 0.5], [30.4, 0.6]]
    steps = jvm_busy({"jit": jit, "gc": gc, "machine": [[2.0, 3.0]]})
    assert [t for t, _ in steps] == [0.0, 10.0, 20.2]
    assert [c for _, c in steps] == pytest.approx([0.8, 2.0 / 10.2, 2.0 / 10.2], abs=1e-4)
    assert jvm_busy({"jit": [[5.0, 3.0]], "gc": [[5.0, 1.0]]}) == ((0.0, 0.8),)  # one read: its rate to the end
    # a last read 0.1 s after one kept joins its step (no rate from a tenth of a second to the end)
    tail = jvm_busy({"jit": [[10.0, 8.0], [20.0, 10.0], [20.1, 10.0]], "gc": [[10.0, 0.0], [20.0, 0.0], [20.1, 0.0]]})
    assert tail == ((0.0, 0.8), (10.0, round(2.0 / 10.1, 4)))
    assert jvm_busy(None) == () and jvm_busy({"machine": []}) == ()  # no JVM series recorded (local runs)
    assert jvm_busy({"jit": [[5.0, "x"]], "gc": [[5.0, 1.0]]}) == ()  # a bad read is left out


def test_a_recording_s_source_lag_is_simulated(tmp_path: Path) -> None:
    from sluice.cli.whatif import read_costs

    report = tmp_path / "report.json"
    figures = {}
    for lag_ms in (0.0, 400.0):
        costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0, "lag_ms": lag_ms}
        report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": costs}}}))
        assert read_costs(report, ["payments/fraud-filter"])["payments/fraud-filter"].lag == lag_ms / 1000
        assert read_costs(report, ["payments/fraud-filter"])["payments/fraud-filter"].spread == 1.0  # not recorded
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "20s",
                              "--warmup", "2s", "--out", str(tmp_path / str(lag_ms)))
        assert code == 0, err
        figures[lag_ms] = json.loads((tmp_path / str(lag_ms) / "simulate.json").read_text())["queries"]["payments/fraud-filter"]
    # the 200 ms trigger's batches take 154 ms: rows 154-354 ms late, and 400 ms later with the lag
    # (past the 500 ms SLA for most of them)
    assert figures[0.0]["attainment"] == 1.0 and figures[400.0]["attainment"] < 0.5
    # each quantile is reported up to 2% high (its bin): 2% of 654 ms and of 254 ms is at most 18 ms
    assert figures[400.0]["p50_ms"] - figures[0.0]["p50_ms"] == pytest.approx(400, abs=18)


def test_a_recording_s_spread_is_simulated_unless_no_spread_says_otherwise(tmp_path: Path) -> None:
    from sluice.cli.whatif import read_costs

    report = tmp_path / "report.json"
    costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0, "spread": 3.0}
    report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": costs}}}))
    assert read_costs(report, ["payments/fraud-filter"])["payments/fraud-filter"].spread == 3.0
    figures = {}
    for flag in ("--spread", "--no-spread"):
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "60s",
                              "--warmup", "2s", flag, "--out", str(tmp_path / flag))
        assert code == 0, err
        figures[flag] = json.loads((tmp_path / flag / "simulate.json").read_text())["queries"]["payments/fraud-filter"]
    # steady, each 154 ms batch of the 200 ms trigger keeps up; one batch in ten above 3x that does not
    assert figures["--spread"]["p99_ms"] > figures["--no-spread"]["p99_ms"] + 150
    costs["spread"] = 0.5
    report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": costs}}}))
    code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1")
    assert code == 1 and "queries.payments/fraud-filter.costs.spread must be a number of at least 1" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_recording_s_cold_start_is_simulated_unless_no_cold_says_otherwise(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    costs = {"fixed_ms": 150.0, "per_row_us": 20.0, "commit_ms": 0.0, "input_rate": 200.0}
    report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": costs, "cold_ms": [2000.0, 900.0]}}}))
    from sluice.cli.whatif import read_costs

    assert read_costs(report, ["payments/fraud-filter"])["payments/fraud-filter"].cold == (2.0, 0.9)
    figures = {}
    for flag in ("--cold", "--no-cold"):
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1", "--duration", "20s",
                              "--warmup", "0s", flag, "--out", str(tmp_path / flag))
        assert code == 0, err
        figures[flag] = json.loads((tmp_path / flag / "simulate.json").read_text())["queries"]["payments/fraud-filter"]
    # warm, every batch of the 200 ms trigger takes 154 ms: all rows within the 500 ms SLA; cold,
    # the first batch's 2 s and the second's 0.9 s make their rows and the backlog after them late
    assert figures["--no-cold"]["attainment"] == 1.0 and figures["--cold"]["attainment"] < 0.95
    assert figures["--cold"]["p99_ms"] > 2000 > figures["--no-cold"]["p99_ms"]
    for bad in ([-1.0], "2000", [None]):
        report.write_text(json.dumps({"queries": {"payments/fraud-filter": {"costs": costs, "cold_ms": bad}}}))
        code, _, err = invoke("simulate", "-f", FRAUD, "--costs", str(report), "--executors", "1")
        assert code == 1 and "queries.payments/fraud-filter.cold_ms must be a list of milliseconds" in err, err
        assert len(err.strip().splitlines()) == 1

"""The density benchmark's pure parts: its query mix and a step's verdict."""

from __future__ import annotations

from click.testing import CliRunner

from sluice.api.manifest import load_query
from sluice.api.runtime import QueryStatus
from sluice.cli import main
from sluice.runtime.density_bench import is_critical, manifest, rate, summarize_step


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


def status(phase: str, attainment: float | None, p99: float | None) -> QueryStatus:
    return QueryStatus(phase=phase, sla_ms=1000, attainment=attainment, p99_ms=p99)  # type: ignore[arg-type]


def test_a_step_holds_only_when_both_classes_keep_their_share() -> None:
    statuses = {"a/crit": status("Running", 0.995, 1500.0), "b/bulk": status("Running", 0.96, 20_000.0),
                "c/bulk": status("Running", 1.0, 9_000.0)}
    step = summarize_step(statuses, {"a/crit"})
    assert step == {"worst_critical_attainment": 0.995, "worst_bulk_attainment": 0.96,
                    "critical_p99_ms": 1500.0, "bulk_p99_ms": 20_000.0, "held": True}
    statuses["a/crit"] = status("Running", 0.985, 2500.0)  # enough for bulk, not for critical
    assert not summarize_step(statuses, {"a/crit"})["held"]
    statuses["a/crit"] = status("Running", 1.0, 900.0)
    statuses["c/bulk"] = status("Running", None, None)  # nothing measured: nothing kept
    step = summarize_step(statuses, {"a/crit"})
    assert step["worst_bulk_attainment"] == 0.0 and not step["held"]
    statuses["c/bulk"] = status("Failed", 1.0, 10.0)
    assert not summarize_step(statuses, {"a/crit"})["held"]


def test_bad_counts_get_one_sentence() -> None:
    for bad in ("10,1", "0,5", "a,b", ""):
        result = CliRunner().invoke(main, ["bench", "density", "--counts", bad])
        assert result.exit_code == 1 and "--counts" in result.output and "Traceback" not in result.output

"""A real Prometheus server for tests: built from the Go module proxy (`build_binaries`), given
scrape targets and rule groups, queried through its HTTP API."""

from __future__ import annotations

import contextlib
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from . import processes
from .controlplane import build_binaries, free_port
from .waiting import wait_for


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of `promql` now (raises if Prometheus refuses the query)."""
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus refused {promql!r}: {body}")
        return list(body["data"]["result"])


@contextlib.contextmanager
def running(workdir: Path, targets: Mapping[str, str], rules: Mapping[str, Any] | None = None) -> Iterator[Prometheus]:
    """Prometheus scraping each job's `host:port` every second, evaluating `rules` (rule groups)."""
    prometheus = build_binaries()[2] / "prometheus"
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]} for job, target in targets.items()],
    }
    if rules is not None:
        (workdir / "rules.yaml").write_text(yaml.safe_dump(dict(rules)))
        config["rule_files"] = [str(workdir / "rules.yaml")]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = workdir / "prometheus.log"
    proc = processes.spawn("prometheus", [
        str(prometheus), f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ], log)

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text(errors='replace')[-500:]}")
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, timeout=60, what="Prometheus ready")
        yield Prometheus(base)
    finally:
        processes.stop("prometheus", proc)

"""`python -m sluice.runtime`: a pool's runtime (Spark driver + control API), as the pool pod runs it."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from sluice.api.constants import CONTROL_PORT, CRITICAL_LANE, DEFAULT_POLICY, POLICIES
from sluice.scheduler.client import SchedulerClient
from sluice.scheduler.core import Scheduler
from sluice.scheduler.local import LocalScheduler
from sluice.scheduler.server import ServerThread, reserve

from . import priority, start_warmup
from .control import make_control_app, make_metrics_app
from .executors import ExecutorScaler
from .gate import Gatekeeper
from .host import QueryHost
from .policy import mode_of
from .session import (
    EXECUTOR_REQUEST,
    SessionConfig,
    build_session,
    check_settings,
    executor_lane,
    lane_for,
    lane_sentence,
    start_warmup_seconds,
)
from .spark_calls import one_line

START_EXECUTOR_S = 90.0
"""How long the start's warm-up waits for the pool's first executor pod to register (its image is
on the node: 10-30 s here); past it the runtime serves unwarmed."""


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            return Path(args.token_file).read_text().strip()
        except OSError as error:
            sys.exit(f"--token-file {args.token_file} cannot be read ({error.strerror}); mount the pool's token Secret there.")
    token = os.environ.get("SLUICE_CONTROL_TOKEN", "")
    if not token:
        sys.exit("No control token: pass --token-file or set SLUICE_CONTROL_TOKEN (the operator mounts one from a Secret).")
    return token


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sluice.runtime", description=__doc__)
    parser.add_argument("--master", default=os.environ.get("SLUICE_SPARK_MASTER", "local[*]"))
    parser.add_argument("--host", default="0.0.0.0", help="control API address")
    parser.add_argument("--port", type=int, default=CONTROL_PORT, help="control API port")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="also serve /metrics and /healthz alone on this port (the pool pod's, open to Prometheus)")
    parser.add_argument("--token-file", default=os.environ.get("SLUICE_CONTROL_TOKEN_FILE"))
    parser.add_argument("--scheduler", default=os.environ.get("SLUICE_SCHEDULER_URL", "inprocess"),
                        help="sidecar URL (http://127.0.0.1:8470 or unix:/path) or 'inprocess'")
    parser.add_argument("--policy", default=os.environ.get("SLUICE_POLICY", DEFAULT_POLICY), choices=POLICIES,
                        help="for the in-process scheduler")
    parser.add_argument("--capacity", type=int, default=int(os.environ.get("SLUICE_CAPACITY", "2")))
    parser.add_argument("--critical-lane", type=int, default=CRITICAL_LANE, metavar="SLOTS",
                        help="for the in-process scheduler: slots beyond --capacity, per latency-critical query, only their batches take")
    parser.add_argument("--workdir", default=os.environ.get("SLUICE_WORKDIR", "/tmp/sluice"))
    parser.add_argument("--executor-grace", type=float, default=float(os.environ.get("SLUICE_EXECUTOR_GRACE", "30")),
                        metavar="SECONDS", help="how long a surplus executor may finish its tasks before it is killed by force")
    parser.add_argument("--kafka", action=argparse.BooleanOptionalAction, default=True,
                        help="load Spark's Kafka connector (baked into the runtime image; else resolved from Maven Central)")
    parser.add_argument("--files-root", default=os.environ.get("SLUICE_FILES_ROOT"), metavar="DIR",
                        help="confine each namespace's files sources and sinks to DIR/<namespace> (the pool's spec.filesRoot)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    args = parser.parse_args(argv)
    if args.critical_lane < 0:
        parser.error(f"--critical-lane {args.critical_lane}: give 0 or more slots")
    if not args.executor_grace >= 0:
        parser.error(f"--executor-grace {args.executor_grace}: give 0 or more seconds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every call from the JVM at INFO
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # probes and the operator's polls
    token = _token(args)
    extra = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--conf {item!r}: write KEY=VALUE")
        extra[key] = value
    workdir = Path(args.workdir)
    # the API's ports are reserved (bound) before Spark starts: Spark and py4j take ephemeral ports
    # while they start, and one of them could be the port asked for; a port in use is told at once
    try:
        control_sock = reserve(args.host, args.port)
        metrics_sock = reserve(args.host, args.metrics_port) if args.metrics_port is not None else None
    except OSError as error:
        parser.error(f"{error.strerror}: give --port/--metrics-port a free port, or stop what holds it")
    mode = mode_of(args.policy)  # fifo and fair: Spark alone, as in `sluice run`
    # as in `sluice run`: on local[*] urgent tasks find a free slot at once and bulk ones take turns
    lane = lane_for(mode.gated, args.master == "local[*]", os.cpu_count() or 2)
    if args.master.startswith("k8s://"):  # on executor pods: the same slots and turns in every executor
        try:
            lane, pods = executor_lane(mode.gated, extra)
        except ValueError as error:
            parser.error(str(error))
        extra |= pods
    master = f"local[{lane.slots}]" if args.master == "local[*]" else args.master
    try:
        check_settings(extra)
    except ValueError as error:
        parser.error(str(error))
    spark = build_session(SessionConfig(master=master, workdir=workdir, scheduling=mode.scheduling,
                                       urgent_lane=lane.on, bulk_tasks=lane.bulk_tasks, kafka=args.kafka, extra=extra))
    gate: Gatekeeper | None = None
    if mode.gated:
        gate = (LocalScheduler(Scheduler(args.policy, capacity=args.capacity, lane=args.critical_lane)) if args.scheduler == "inprocess"
                else SchedulerClient(args.scheduler))
    host = QueryHost(spark, workdir / "checkpoints", gate, mode.fixed_pool, files_root=args.files_root)
    scaler = ExecutorScaler.for_host(host, grace=args.executor_grace)
    on_pods = args.master.startswith("k8s://")
    scaler.priority = priority.decide(mode.gated, lane.on, priority.probe(), on_pods, extra.get(EXECUTOR_REQUEST, ""))
    scaler.urgent_lane = lane_sentence(lane, mode.gated, scaler.priority)
    told = args.master == "local[*]" or on_pods  # else the master's own slots
    scaler.lane = (lane.slots if told else None, lane.bulk_tasks or None, scaler.priority.mechanism == "threadNice")
    warm = start_warmup_seconds(extra)
    if warm > 0:  # before the API answers: the pool stays Pending and no tenant's query meets it
        if on_pods and not start_warmup.wait_for_executor(scaler.executors, START_EXECUTOR_S):
            print(f"sluice runtime: no executor registered within {START_EXECUTOR_S:.0f} s; serving unwarmed.", flush=True)
        else:
            try:  # its sources split by Spark's task slots (on pods, the lane's in each executor)
                print(f"sluice runtime: {start_warmup.run(host, lane.slots, warm).sentence()}.", flush=True)
            except Exception as error:  # a warm-up that fails must not keep the pool from serving
                print(f"sluice runtime: the start's warm-up failed ({one_line(error)}); serving unwarmed.", flush=True)
    sidecar = f"{args.scheduler.rstrip('/')}/metrics" if args.scheduler.startswith("http") else None
    server = ServerThread(make_control_app(host, token, executors=scaler, scheduler_metrics=sidecar),
                          sock=control_sock).start()
    print(f"sluice runtime ({master}) control API on {server.url}", flush=True)
    open_server = None
    if metrics_sock is not None:
        open_server = ServerThread(make_metrics_app(host, scheduler_metrics=sidecar), sock=metrics_sock).start()
        print(f"sluice runtime metrics on {open_server.url}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    host.driver.on_broken.append(stop.set)
    stop.wait()  # the host itself retries Pending queries and notices failed ones
    if open_server is not None:
        open_server.stop()
    server.stop()
    if host.broken is not None:  # no driver to stop queries on: exit so the pod restarts, and the operator registers them again
        print(f"sluice runtime: {host.broken}.", file=sys.stderr, flush=True)
        os._exit(1)
    host.stop_all()
    spark.stop()


if __name__ == "__main__":
    main()

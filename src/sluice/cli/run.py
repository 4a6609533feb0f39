"""`sluice run`, `sluice load` and `sluice kafka`: queries on the embedded Spark, a load, a broker."""

from __future__ import annotations

from pathlib import Path

import click

from sluice.api.constants import DEFAULT_POLICY, GATES, POLICIES, URGENT_LANE_CHOICES
from sluice.api.wire import QueryStatus
from sluice.cli.common import DurationParam, fail, json_option, load_queries


@click.command()
@click.option("-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=False),
              help="Manifest file(s); a StreamingPool in them sets the policy and the tenants' quota weights.")
@click.argument("more", nargs=-1)
@click.option("--duration", type=DurationParam(0.001), help="Stop cleanly this long after every query has started, e.g. 60s (default: until Ctrl-C).")
@click.option("--report", type=click.Path(dir_okay=False), help="Write a JSON report here when the run ends.")
@click.option("--policy", type=click.Choice(POLICIES), help=f"Override the pool's policy (default {DEFAULT_POLICY}).")
@click.option("--workdir", type=click.Path(file_okay=False), help="Checkpoints and Spark files (default: a new temp dir). Reuse it to resume.")
@click.option("--warmup", type=DurationParam(), help="Leave batches of the first this-long (after every query has started) out of the latency figures, e.g. 15s.")
@click.option("--timeline", is_flag=True, help="Put every batch's latencies in the report (for plots), and each recent batch's grant: its band and the slack it was chosen from.")
@click.option("--ready-file", type=click.Path(dir_okay=False), help="Write this file once every query has started (a load generator can wait for it).")
@click.option("--urgent-lane", type=click.Choice(URGENT_LANE_CHOICES), default="gated", show_default=True,
              help="Who gets the urgent lane (more slots than cores, bulk turns, raised priorities): gated "
                   "policies, every policy (fifo and fair too, for like-for-like comparisons), or none.")
@click.option("--drain", type=DurationParam(), help="With --duration and --sent-file: go on up to this long after the duration until "
              "every query has read the rows the file names, e.g. 32s (a benchmark judging every row sent).")
@click.option("--sent-file", type=click.Path(dir_okay=False),
              help="JSON {\"namespace/name\": rows sent}, written by the load generator once its load stopped.")
@click.option("--gate", type=click.Choice(GATES), default="inprocess", show_default=True,
              help="Where a gated policy's scheduler runs: in this process, or as a pool pod runs it, a scheduler "
                   "sidecar process asked over HTTP on loopback.")
@click.option("--executors", type=click.IntRange(1, 64),
              help="Run on Spark's local-cluster: this many executor JVMs beside the driver, each of "
                   "--executor-cores task slots; of the urgent lane only the urgent bands' raised thread "
                   "priorities, as on executor pods, not its extra slots and bulk turns (default: local[*], one JVM).")
@click.option("--executor-cores", type=click.IntRange(1, 64), default=1, show_default=True,
              help="With --executors: task slots per executor.")
@json_option
def run(files: tuple[str, ...], more: tuple[str, ...], duration: float | None, report: str | None,
        policy: str | None, workdir: str | None, warmup: float | None, timeline: bool, ready_file: str | None,
        urgent_lane: str, drain: float | None, sent_file: str | None, gate: str, executors: int | None,
        executor_cores: int, as_json: bool) -> None:
    """Run StreamingQuery manifests locally on the embedded default (Spark local[*]).

    Shows a live table of every query; with --json, the report (as --report writes it) at the end instead."""
    import contextlib
    import json
    import threading

    from rich.live import Live

    from sluice.runtime import runner
    from sluice.runtime.session import executor_jit, local_cluster

    try:  # SLUICE_EXECUTOR_JIT, refused in one sentence before Spark starts
        executor_jit({})
    except ValueError as error:
        fail(str(error))
    queries, pool = load_queries((*files, *more))
    if executor_cores != 1 and not executors:
        fail("--executor-cores: it sets the slots of --executors' executor JVMs; give --executors N too, or "
             "leave it out.")
    stop = threading.Event()
    runner.install_interrupt(stop)
    chosen = policy or (pool.spec.policy if pool else None) or DEFAULT_POLICY
    master = local_cluster(executors, executor_cores) if executors else "local[*]"
    click.echo(f"starting Spark ({master}) with {len(queries)} quer{'y' if len(queries) == 1 else 'ies'} under {chosen} ...", err=True)
    with contextlib.nullcontext(None) if as_json else Live(auto_refresh=False, redirect_stderr=False) as live:
        def tick(statuses: dict[str, QueryStatus]) -> None:
            if live is not None:
                live.update(runner.live_table(statuses), refresh=True)

        options = runner.RunOptions(policy=chosen, duration=duration, stop=stop, on_tick=tick,
                                    workdir=Path(workdir) if workdir else None,
                                    warmup=warmup or 0.0, timeline=timeline,
                                    ready_file=Path(ready_file) if ready_file else None, urgent_lane=urgent_lane,
                                    drain=drain or 0.0,
                                    sent_file=Path(sent_file) if sent_file else None, gate=gate, master=master,
                                    weights={ns: q.weight for ns, q in pool.spec.quotas.items()} if pool else {})
        try:
            result = runner.run(queries, options)
        except RuntimeError as error:  # the driver JVM died under the run
            fail(str(error))
    if report:
        runner.write_report(result, Path(report))
        click.echo(f"wrote {report}", err=True)
    if as_json:
        click.echo(json.dumps(result))
    failed = [k for k, q in result["queries"].items() if q["phase"] == "Failed"]
    for key in failed:
        click.echo(f"{key} failed: {result['queries'][key]['message']}", err=True)

@click.command()
@click.option("--topic", required=True, help="Kafka topic to write.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), required=True, help="Events per second.")
@click.option("--duration", type=DurationParam(0.001), help="Stop after this long, e.g. 60s (default: until Ctrl-C).")
@click.option("--burst", "bursts", multiple=True, help="AT,FOR,FACTOR, e.g. 30s,10s,10: multiply the rate for a while.")
@click.option("--keys", type=click.IntRange(1, 10_000_000), default=100, show_default=True, help="Distinct keys.")
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True, help="Kafka bootstrap servers.")
def load(topic: str, rate: float, duration: float | None, bursts: tuple[str, ...], keys: int, bootstrap: str) -> None:
    """Write JSON events carrying their production time to a Kafka topic at a steady rate."""
    import json
    import threading

    from sluice.api.scenario import Burst
    from sluice.runtime.runner import install_interrupt
    from sluice.testing.load import LoadPlan, generate, main_progress

    try:
        plan = LoadPlan(topic, rate, duration, [Burst.parse(b) for b in bursts], keys)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--burst") from None
    stop = threading.Event()
    install_interrupt(stop)
    try:
        result = generate(plan, bootstrap, stop.is_set, main_progress)
    except RuntimeError as error:
        fail(str(error))
    click.echo(json.dumps(result))
    if result["failed"]:
        fail(f"{result['failed']} events were not delivered to {bootstrap}; is the broker up and the topic there?")


@click.command("kafka")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Broker data (default: a temp dir).")
@click.option("--topic", "topics", multiple=True, help="Create this topic once the broker is up.")
@click.option("--partitions", type=click.IntRange(1, 256), default=1, show_default=True)
def kafka_broker(workdir: str | None, topics: tuple[str, ...], partitions: int) -> None:
    """Start a single-node Kafka broker (KRaft) on loopback from Maven Central jars; Ctrl-C stops it."""
    import tempfile
    import threading

    from sluice.runtime.runner import install_interrupt
    from sluice.testing.kafka import KafkaBroker, KafkaUnavailable

    folder = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sluice-kafka-"))
    folder.mkdir(parents=True, exist_ok=True)
    click.echo("starting Kafka (the first run resolves its jars from Maven Central) ...", err=True)
    try:
        broker = KafkaBroker(folder).start()
    except KafkaUnavailable as error:
        fail(str(error))
    try:
        for topic in topics:
            broker.create_topic(topic, partitions)
        click.echo(f"kafka ready at {broker.bootstrap} in {broker.started_in:.1f}s", err=True)
        click.echo(broker.bootstrap, nl=True)
        stop = threading.Event()
        install_interrupt(stop)
        stop.wait()
    finally:
        broker.stop()


"""`sluice dev cluster up|down|status`: a real one-node Kubernetes on this machine."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sluice.cli.common import EXIT_ERROR, EXIT_OK, fail
from sluice.testing.node import NICE_LIMIT


@click.group()
def dev() -> None:
    """Development helpers that run real parts on this machine."""


@dev.group("cluster")
def dev_cluster() -> None:
    """A real single-node Kubernetes (kubelet, containerd) with Sluice's images imported; needs root."""


@dev_cluster.command("up")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="State of the cluster (default: ~/.cache/sluice/dev-cluster).")
@click.option("--nice-limit", type=click.IntRange(0, 40), default=NICE_LIMIT, show_default=True,
              help="RLIMIT_NICE of the node's containerd and so of every container (0: none): what lets "
                   "a pool's urgent threads take a higher priority without CAP_SYS_NICE.")
def dev_cluster_up(workdir: str | None, nice_limit: int) -> None:
    """Build (or reuse) the binaries and images, start the node, print its kubeconfig."""
    from sluice.testing.node import NodeError, dev_record, dev_up

    if dev_record() is not None:
        fail("A dev cluster is already running ('sluice dev cluster status' shows it).")
    folder = Path(workdir) if workdir else Path.home() / ".cache" / "sluice" / "dev-cluster"
    click.echo("starting a one-node Kubernetes (a cold machine builds its binaries and images first: ~10 min) ...", err=True)
    try:
        cluster = dev_up(folder, say=lambda message: click.echo(message, err=True), nice_limit=nice_limit)
    except NodeError as error:
        fail(str(error))
    click.echo(f"node Ready in {cluster.timings['up_s']:.0f} s (images {cluster.timings['images_s']:.0f} s); "
               f"images: {', '.join(tag for _, tag in cluster.images.values())}", err=True)
    click.echo(f"export KUBECONFIG={cluster.kubeconfig}")
    if cluster.plane is not None:  # its kubectl and helm, the versions the tests use
        click.echo(f"export PATH={cluster.plane.kube_bin}:{cluster.plane.helm_bin}:$PATH")


@dev_cluster.command("down")
def dev_cluster_down() -> None:
    """Delete its pods, stop every process and undo its host changes (bridge, iptables, mounts)."""
    from sluice.testing.node import dev_down

    click.echo("dev cluster stopped." if dev_down() else "No dev cluster is running.", err=True)


@dev_cluster.command("status")
def dev_cluster_status() -> None:
    """Whether a dev cluster runs, where its kubeconfig is, and its node's state."""
    import subprocess

    from sluice.testing.node import NODE_NAME, dev_record

    record = dev_record()
    if record is None:
        click.echo("No dev cluster is running.")
        sys.exit(EXIT_ERROR)
    proc = subprocess.run([record["kubectl"], "--kubeconfig", record["kubeconfig"], "get", "node", NODE_NAME, "-o",
                           "jsonpath={.status.conditions[?(@.type=='Ready')].status}"],
                          capture_output=True, text=True, timeout=30)
    ready = proc.stdout.strip() == "True"
    click.echo(f"node {NODE_NAME}: {'Ready' if ready else 'not Ready (' + (proc.stderr.strip() or 'unknown') + ')'}")
    click.echo(f"export KUBECONFIG={record['kubeconfig']}")
    sys.exit(EXIT_OK if ready else EXIT_ERROR)

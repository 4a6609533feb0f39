"""Session fixtures of the node tier: one real single-node Kubernetes (kubelet, containerd, runc,
kube-proxy, CoreDNS, controller-manager, scheduler on the cluster tier's apiserver) and a Kafka
broker on the node's address, so pods reach it. Torn down even when the session is interrupted."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.kafka import KafkaBroker, KafkaUnavailable
from sluice.testing.node import ExternalCluster, NodeCluster, NodeError
from sluice.testing.processes import running

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    external = os.environ.get("SLUICE_NODE_KUBECONFIG")
    if external:  # e2e/kind.sh: the same tests against a cluster it started
        host = os.environ.get("SLUICE_NODE_HOST_IP", "")
        if not host:
            pytest.fail("SLUICE_NODE_KUBECONFIG needs SLUICE_NODE_HOST_IP: the address pods reach this host at.",
                        pytrace=False)
        with running(ExternalCluster(tmp_path_factory.mktemp("external"), Path(external), host), NodeError) as cluster:
            yield cluster  # type: ignore[misc]
        return
    packages = subprocess.run([str(HERE / "host-packages.sh")], capture_output=True, text=True)
    if packages.returncode != 0:
        pytest.fail((packages.stderr.strip().splitlines() or ["host-packages.sh failed"])[-1], pytrace=False)
    with running(NodeCluster(tmp_path_factory.mktemp("node")), NodeError) as cluster:
        (cluster.workdir / "timings.json").write_text(json.dumps(cluster.timings))
        yield cluster


@pytest.fixture(scope="session")
def node_broker(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with running(KafkaBroker(tmp_path_factory.mktemp("node-kafka"), host=node.ip), KafkaUnavailable) as broker:
        yield broker

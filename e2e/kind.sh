#!/usr/bin/env bash
# The node tier's tests (tests/node/test_node.py) against a kind cluster, on a machine with Docker.
# Builds both images with Docker from images/*.Dockerfile (the node tier builds the same images
# without Docker), loads them into kind, and runs the tests with SLUICE_NODE_KUBECONFIG pointing at
# the kind cluster. The tests install the chart themselves. Not run on the project's own machine
# (no Docker engine there); `make test` runs the same file on a real kubelet it starts itself.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${CLUSTER:-sluice-e2e}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)"
kind create cluster --name "$cluster" --wait 120s
kubeconfig="$(mktemp)"
kind get kubeconfig --name "$cluster" > "$kubeconfig"
docker build -f images/operator.Dockerfile -t "ghcr.io/sluice-dev/sluice-operator:$version" .
docker build -f images/runtime.Dockerfile -t "ghcr.io/sluice-dev/sluice-runtime:$version" .
kind load docker-image --name "$cluster" "ghcr.io/sluice-dev/sluice-operator:$version" "ghcr.io/sluice-dev/sluice-runtime:$version"
# pods reach this host's Kafka broker through the kind network's gateway
host_ip="$(docker network inspect kind -f '{{(index .IPAM.Config 0).Gateway}}')"
make .venv/.installed >/dev/null
SLUICE_NODE_KUBECONFIG="$kubeconfig" SLUICE_NODE_HOST_IP="$host_ip" .venv/bin/pytest -m node tests/node/test_node.py "$@"
echo "e2e ok; delete with: kind delete cluster --name $cluster"

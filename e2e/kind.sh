#!/usr/bin/env bash
# End-to-end on kind (needs Docker; does not run on machines without a Docker engine).
# Builds both images, loads them into a kind cluster, installs the chart and applies the examples.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${CLUSTER:-sluice-e2e}"
kind create cluster --name "$cluster" --wait 120s
docker build -f images/operator.Dockerfile -t ghcr.io/sluice-dev/sluice-operator:0.1.0 .
docker build -f images/runtime.Dockerfile -t ghcr.io/sluice-dev/sluice-runtime:0.1.0 .
kind load docker-image --name "$cluster" ghcr.io/sluice-dev/sluice-operator:0.1.0 ghcr.io/sluice-dev/sluice-runtime:0.1.0
kubectl create namespace sluice-system --dry-run=client -o yaml | kubectl apply -f -
helm install sluice . --namespace sluice-system --wait --timeout 5m
for ns in payments analytics; do kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -; done
kubectl apply -f examples/pool.yaml -f examples/fraud-filter.yaml -f examples/hourly-revenue.yaml
kubectl wait --for=jsonpath='{.status.phase}'=Running sq/fraud-filter -n payments --timeout=300s
kubectl get sp,sq -A
echo "e2e ok; delete with: kind delete cluster --name $cluster"

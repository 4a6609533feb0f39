#!/usr/bin/env bash
# Builds (or reuses) the real Kubernetes binaries for the cluster and node test tiers:
# kube-apiserver, kubectl and etcd from this Go wrapper module, and helm by `go install`;
# with --node also kubelet, kube-controller-manager, kube-scheduler and kube-proxy (same module,
# same version) and CoreDNS (`go install`).
# Everything comes from the Go module proxy; nothing is downloaded from release pages.
#
# Binaries are cached outside the repo, keyed by version, so a warm run costs a few checks:
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/kube-<KUBE_VERSION>/{kube-apiserver,kubectl,etcd,kubelet,...}
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/helm-<HELM_VERSION>/helm
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/coredns-<COREDNS_VERSION>/coredns   (--node)
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/prometheus-<PROMETHEUS_MODULE>/{promtool,prometheus}
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/kstatus-<hash of kstatus/>/kstatus   (kstatus' own module)
# Prints the directories (kube, helm, prometheus, kstatus[, coredns]) on stdout, one per line;
# progress goes to stderr.
set -euo pipefail

KUBE_VERSION=v1.34.3   # keep in step with go.mod (require + replace v0.34.3)
HELM_VERSION=v3.19.0
COREDNS_VERSION=v1.12.3
PROMETHEUS_MODULE=v0.316.0   # Prometheus 3.16's Go module version: promtool and the server
node=false
[[ "${1:-}" == "--node" ]] && node=true

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/bin"
kube_dir="$cache/kube-$KUBE_VERSION"
helm_dir="$cache/helm-$HELM_VERSION"
coredns_dir="$cache/coredns-$COREDNS_VERSION"
prometheus_dir="$cache/prometheus-$PROMETHEUS_MODULE"
kstatus_dir="$cache/kstatus-$(cat "$here/kstatus/go.mod" "$here/kstatus/go.sum" "$here/kstatus/main.go" | sha256sum | cut -c1-12)"
# the node's components report their real version (kubelet's Node status, kubectl version)
major="${KUBE_VERSION#v}"; minor="${major#*.}"; major="${major%%.*}"; minor="${minor%%.*}"
version_flags="-s -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"

if ! command -v go >/dev/null 2>&1; then
  echo "The cluster test tier needs the Go toolchain (1.24 or newer) to build kube-apiserver, etcd and helm from the Go module proxy; install Go (https://go.dev/doc/install or 'apt-get install golang') and run 'make test' again." >&2
  exit 2
fi

build() {  # build <out-dir> <what> <command...>: build into a temp dir, then move into place atomically
  local out="$1" what="$2"; shift 2
  local tmp; tmp="$(mktemp -d "$cache/.build.XXXXXX")"
  echo "building $what into $out (cold build; later runs reuse it) ..." >&2
  local start=$SECONDS
  # "@OUT@" in the command stands for the temp dir (go build -o), GOBIN serves go install.
  if ! (cd "$here" && GOBIN="$tmp" "${@//@OUT@/$tmp}" >&2); then
    rm -rf "$tmp"
    echo "Could not build $what with Go: check that the Go module proxy ($(go env GOPROXY)) is reachable, then run 'make test' again." >&2
    exit 2
  fi
  mkdir -p "$out"
  mv "$tmp"/* "$out"/ && rm -rf "$tmp"
  echo "built $what in $((SECONDS - start)) s" >&2
}

mkdir -p "$cache"
# the apiserver reports its real version (helm checks the chart's kubeVersion against it); a
# binary built before it did is rebuilt once (the Go build cache makes that a relink)
if [[ ! -x "$kube_dir/kube-apiserver" || ! -x "$kube_dir/kubectl" || ! -x "$kube_dir/etcd" || ! -e "$kube_dir/.versioned" ]]; then
  build "$kube_dir" "kube-apiserver, kubectl and etcd $KUBE_VERSION" \
    go build -trimpath "-ldflags=$version_flags" -o @OUT@/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd
  touch "$kube_dir/.versioned"
fi
if [[ ! -x "$helm_dir/helm" ]]; then
  build "$helm_dir" "helm $HELM_VERSION" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if [[ ! -x "$prometheus_dir/promtool" || ! -x "$prometheus_dir/prometheus" ]]; then
  # the server without its web UI's assets (they need npm): the API, scraping and rules work
  build "$prometheus_dir" "promtool and prometheus $PROMETHEUS_MODULE" \
    go install -trimpath -ldflags=-s "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE"
fi
if [[ ! -x "$kstatus_dir/kstatus" ]]; then
  build "$kstatus_dir" "kstatus (sigs.k8s.io/cli-utils)" bash -c 'cd kstatus && go build -trimpath -ldflags=-s -o "$0/kstatus" .' @OUT@
fi
if $node; then
  node_bins=(kubelet kube-controller-manager kube-scheduler kube-proxy)
  for bin in "${node_bins[@]}"; do
    if [[ ! -x "$kube_dir/$bin" ]]; then
      build "$kube_dir" "kubelet, kube-controller-manager, kube-scheduler and kube-proxy $KUBE_VERSION" \
        go build -trimpath "-ldflags=$version_flags" -o @OUT@/ "${node_bins[@]/#/k8s.io/kubernetes/cmd/}"
      break
    fi
  done
  if [[ ! -x "$coredns_dir/coredns" ]]; then
    build "$coredns_dir" "CoreDNS $COREDNS_VERSION" go install -trimpath -ldflags=-s "github.com/coredns/coredns@$COREDNS_VERSION"
  fi
fi
echo "$kube_dir"
echo "$helm_dir"
echo "$prometheus_dir"
echo "$kstatus_dir"
if $node; then echo "$coredns_dir"; fi

#!/usr/bin/env bash
# Builds (or reuses) the real Kubernetes binaries for the cluster and node test tiers, all from the
# Go module proxy (nothing is downloaded from release pages):
#   - from this directory's wrapper module (go.mod holds every version), in one `go build` so the
#     packages they share compile once: kube-apiserver, kubectl, etcd and helm; with --node also
#     kubelet, kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS (the node tier's
#     plugins only, coredns/main.go);
#   - promtool and Prometheus (`go install`, static and file service discovery only: the tests
#     scrape static targets);
#   - the kstatus tool (kstatus/, a module of its own);
#   - with --node, the node's NetworkPolicy enforcer (netpol/, a module of its own: kube-network-policies'
#     controller run as a host process).
#
# Binaries are cached outside the repo, keyed by what they are built from, so a warm run costs a
# few checks:
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/kube-<version>-<hash of the wrapper module>/{kube-apiserver,kubectl,etcd,helm,kubelet,...,coredns}
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/prometheus-<PROMETHEUS_MODULE>-static/{promtool,prometheus}
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/kstatus-<hash of kstatus/>/kstatus
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/bin/netpol-<hash of netpol/>/kube-network-policies
# Prints the directories (kube, helm, prometheus, kstatus[, coredns, netpol]) on stdout, one per line
# (helm and CoreDNS sit in the kube directory); progress goes to stderr.
set -euo pipefail

PROMETHEUS_MODULE=v0.316.0   # Prometheus 3.16's Go module version: promtool and the server
node=false
[[ "${1:-}" == "--node" ]] && node=true

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/bin"
version_of() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$here/go.mod"; }
KUBE_VERSION="$(version_of k8s.io/kubernetes)"
HELM_VERSION="$(version_of helm.sh/helm/v3)"
hash_of() { cat "$@" | sha256sum | cut -c1-12; }
kube_dir="$cache/kube-$KUBE_VERSION-$(cd "$here" && hash_of go.mod go.sum tools.go etcd/main.go coredns/main.go)"
prometheus_dir="$cache/prometheus-$PROMETHEUS_MODULE-static"
kstatus_dir="$cache/kstatus-$(cd "$here/kstatus" && hash_of go.mod go.sum main.go)"
netpol_dir="$cache/netpol-$(cd "$here/netpol" && hash_of go.mod go.sum main.go)"
# the node's components report their real version (kubelet's Node status, kubectl version), and
# helm its own
major="${KUBE_VERSION#v}"; minor="${major#*.}"; major="${major%%.*}"; minor="${minor%%.*}"
version_flags="-s -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"

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
wanted=(kube-apiserver kubectl etcd helm)
$node && wanted+=(kubelet kube-controller-manager kube-scheduler kube-proxy coredns)
missing=() packages=()
for bin in "${wanted[@]}"; do
  [[ -x "$kube_dir/$bin" ]] && continue
  missing+=("$bin")
  case "$bin" in
    etcd | coredns) packages+=("./$bin") ;;
    helm) packages+=(helm.sh/helm/v3/cmd/helm) ;;
    *) packages+=("k8s.io/kubernetes/cmd/$bin") ;;
  esac
done
if ((${#missing[@]})); then
  build "$kube_dir" "${missing[*]} (Kubernetes $KUBE_VERSION, helm $HELM_VERSION)" \
    go build -trimpath "-ldflags=$version_flags" -o @OUT@/ "${packages[@]}"
fi
if [[ ! -x "$prometheus_dir/promtool" || ! -x "$prometheus_dir/prometheus" ]]; then
  # the server without its web UI's assets (they need npm) and without the service discoveries
  # of clouds and orchestrators (build tag remove_all_sd): the API, scraping and rules work
  build "$prometheus_dir" "promtool and prometheus $PROMETHEUS_MODULE" \
    go install -trimpath -ldflags=-s -tags remove_all_sd \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE"
fi
if [[ ! -x "$kstatus_dir/kstatus" ]]; then
  build "$kstatus_dir" "kstatus (sigs.k8s.io/cli-utils)" bash -c 'cd kstatus && go build -trimpath -ldflags=-s -o "$0/kstatus" .' @OUT@
fi
if $node && [[ ! -x "$netpol_dir/kube-network-policies" ]]; then
  build "$netpol_dir" "kube-network-policies (the node's NetworkPolicy enforcer)" \
    bash -c 'cd netpol && go build -trimpath -ldflags=-s -o "$0/kube-network-policies" .' @OUT@
fi
echo "$kube_dir"   # kube
echo "$kube_dir"   # helm
echo "$prometheus_dir"
echo "$kstatus_dir"
if $node; then echo "$kube_dir"; echo "$netpol_dir"; fi   # coredns, the enforcer

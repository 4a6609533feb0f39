#!/usr/bin/env bash
# Installs, where missing, the Debian packages the test tiers need: Maven (the Kafka broker's jars
# and Sluice's JVM sink), containerd and runc (the container runtime), the CNI plugins (pod
# networking), iptables and conntrack (kube-proxy), socat (port-forward), debootstrap, umoci and
# skopeo (images without a registry). Says what it installs; does nothing when all are present.
# `make test` runs it first.
set -euo pipefail

declare -A wanted=(
  [containerd]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [conntrack]=conntrack [socat]=socat [debootstrap]=debootstrap
  [umoci]=umoci [skopeo]=skopeo [mvn]=maven
)
missing=()
for what in "${!wanted[@]}"; do
  if [[ "$what" == /* ]]; then [[ -e "$what" ]] || missing+=("${wanted[$what]}")
  else command -v "$what" >/dev/null 2>&1 || missing+=("${wanted[$what]}"); fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "The node test tier needs these Debian packages and this machine has no apt-get: ${missing[*]}; install their equivalents and run 'make test' again." >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "The node test tier needs these packages and installing them needs root: sudo apt-get install ${missing[*]}" >&2
  exit 2
fi
echo "installing Debian packages for the node tier: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# Debian's containerd package starts a daemon through its service scripts where it can; the node
# tier runs its own containerd with its own config and state directories.

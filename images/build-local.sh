#!/usr/bin/env bash
# Builds Sluice's three images without Docker or a registry, for the node test tier and for
# `sluice dev cluster up`: the pod sandbox's pause image, the operator image and the runtime image
# (the pool's driver, its scheduler sidecar and its Spark executors). They describe the same
# images as images/*.Dockerfile: same base (Debian bookworm), entrypoints, users and paths.
#
# Route: debootstrap (Debian's packages) -> a root filesystem, Python packages installed from
# PyPI by the host's pip into it -> umoci (OCI layout, one layer per step) -> skopeo -> a
# docker-archive tarball that `ctr images import` loads into containerd.
#
# Each image is cached by a content hash of what goes into it, under
#   ${SLUICE_CACHE:-$HOME/.cache/sluice}/images/<name>-<hash>.tar
# The heavy base of each image (Debian + Java + third-party wheels) has its own hash, so a change
# to Sluice's code rebuilds only the small top layer. Prints "<name> <tarball> <tag>" per image on
# stdout; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${SLUICE_CACHE:-$HOME/.cache/sluice}/images"
mirror="${SLUICE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite=bookworm
PYTHON="${PYTHON:-python3}"   # a Python 3.11 with pip (and pyspark, for the list of jars it ships)
site=/usr/local/lib/python3.11/dist-packages   # Debian bookworm's python3 is 3.11; pip --target writes here
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml")"
PAUSE_TAG="registry.k8s.io/pause:3.10"
OPERATOR_TAG="ghcr.io/sluice-dev/sluice-operator:$version"
RUNTIME_TAG="ghcr.io/sluice-dev/sluice-runtime:$version"

say() { echo "images: $*" >&2; }
need() {
  local missing=()
  for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "Building images without a registry needs ${missing[*]}; run tests/node/host-packages.sh (as root) to install them." >&2
    exit 2
  fi
}
need debootstrap umoci skopeo gcc
[[ $(id -u) -eq 0 ]] || { echo "Building images with debootstrap needs root (it creates device nodes and chowns files)." >&2; exit 2; }
mkdir -p "$cache"
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# to_archive <oci-layout> <ref> <tag> <out.tar>: the OCI image as a docker-archive named <tag>
to_archive() {
  local tmp="$4.tmp"
  rm -f "$tmp"
  skopeo copy --quiet "oci:$1:$2" "docker-archive:$tmp:$3" >&2
  mv "$tmp" "$4"
}

# ------------------------------------------------------------------ pause
pause_key="$(hash_of "$root/images/pause.c" "${BASH_SOURCE[0]}")"
pause_tar="$cache/pause-$pause_key.tar"
if [[ ! -s "$pause_tar" ]]; then
  say "building the pause image ..."
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/fs"
  gcc -static -O2 -o "$work/fs/pause" "$root/images/pause.c"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:pause"
  umoci insert --image "$work/oci:pause" "$work/fs/pause" /pause >&2
  umoci config --image "$work/oci:pause" --config.entrypoint /pause --config.user 65535:65535 >&2
  to_archive "$work/oci" pause "$PAUSE_TAG" "$pause_tar"
  rm -rf "$work"; trap - EXIT
fi
echo "pause $pause_tar $PAUSE_TAG"

# ------------------------------------------------------------------ bases
# base <name> <apt packages> <pip extras>: an OCI layout holding Debian (+ packages) and the
# project's third-party Python dependencies for <pip extras>; cached by its inputs.
base() {
  local name="$1" packages="$2" extras="$3"
  local key; key="$(echo "$suite $packages $extras" | cat - "$root/pyproject.toml" "$root/images/entrypoint.sh" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
  local out="$cache/base-$name-$key"
  if [[ -d "$out/oci" ]]; then echo "$out"; return; fi
  say "building the $name base ($suite + $packages + Python packages for [$extras]); later runs reuse it ..."
  local start=$SECONDS work; work="$(mktemp -d "$cache/.base.XXXXXX")"
  debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    echo "debootstrap of $suite from $mirror failed (log: $work/debootstrap.log); check that Debian's mirror is reachable or set SLUICE_DEBIAN_MIRROR." >&2; exit 2; }
  chroot "$work/rootfs" sh -c 'apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log'
  # the users the images run as, with homes: Java and Hadoop need a name for the uid
  chroot "$work/rootfs" useradd --uid 185 --create-home --home-dir /home/spark --shell /bin/bash spark
  chroot "$work/rootfs" useradd --uid 10001 --create-home --home-dir /home/sluice --shell /bin/bash sluice
  mkdir -p "$work/site"
  # the project's third-party dependencies only (the project itself is the top layer)
  local deps; deps="$("$PYTHON" - "$root/pyproject.toml" "$extras" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
wanted = list(project["dependencies"])
for extra in sys.argv[2].split(","):
    wanted += project["optional-dependencies"][extra]
print("\n".join(dict.fromkeys(wanted)))
PY
)"
  mapfile -t deps_list <<<"$deps"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$work/site" "${deps_list[@]}" >&2
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:base"
  umoci insert --image "$work/oci:base" "$work/rootfs" / >&2
  umoci insert --image "$work/oci:base" "$work/site" "$site" >&2
  rm -rf "$work/rootfs" "$work/site"
  mv "$work" "$out"
  find "$cache" -maxdepth 1 -name "base-$name-*" ! -path "$out" -exec rm -rf {} +
  say "built the $name base in $((SECONDS - start)) s"
  echo "$out"
}

# ------------------------------------------------------------------ sluice on top
# app <name> <base dir> <tag> <config args...>: the base plus Sluice's own wheel (and for the
# runtime, the Kafka connector's jars), as a docker-archive tarball cached by content hash.
wheel_dir="$(mktemp -d)"
trap 'rm -rf "$wheel_dir"' EXIT
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w "$wheel_dir" "$root" >&2 2>/dev/null \
  || "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$wheel_dir" "$root" >&2
wheel="$(ls "$wheel_dir"/*.whl)"
app() {
  local name="$1" base_dir="$2" tag="$3"; shift 3
  local key; key="$( (echo "$base_dir $tag $*"; "$PYTHON" -c 'import sys, zipfile; w = zipfile.ZipFile(sys.argv[1]); [sys.stdout.buffer.write(w.read(n)) for n in sorted(w.namelist())]' "$wheel" | sha256sum; cat "$root/images/entrypoint.sh" "$root/images/kafka-connector-pom.xml" "$root"/runtime/java/pom.xml "$root"/runtime/java/dev/sluice/sink/*.java) | sha256sum | cut -c1-16)"
  local out="$cache/$name-$key.tar"
  if [[ -s "$out" ]]; then echo "$name $out $tag"; return; fi
  say "building the $name image ($tag) ..."
  local start=$SECONDS work; work="$(mktemp -d "$cache/.app.XXXXXX")"
  cp -a "$base_dir/oci" "$work/oci"
  mkdir -p "$work/site" "$work/opt"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$work/site" "$wheel" >&2
  rm -rf "$work/site/sluice/bench" "$work/site/sluice/testing"  # the benchmark lab and the test kit do not ship
  umoci insert --image "$work/oci:base" "$work/site" "$site" >&2
  install -m 0755 "$root/images/entrypoint.sh" "$work/opt/entrypoint.sh"
  umoci insert --image "$work/oci:base" "$work/opt/entrypoint.sh" /opt/sluice/entrypoint.sh >&2
  if [[ "$name" == runtime ]]; then
    # Spark's Kafka connector, resolved here once: pods start without reaching Maven Central
    kafka_jars "$work/jars"
    umoci insert --image "$work/oci:base" "$work/jars" /opt/sluice/jars >&2
    # Sluice's JVM sink (runtime/jvm_sink.py), compiled on this host: the image has no JDK
    mkdir -p "$work/sink"
    sink_jar="$("$PYTHON" -m sluice.runtime.jvm_sink)"
    cp "$sink_jar" "$work/sink/sluice-sink.jar"
    cp "${sink_jar%.jar}-eos.jar" "$work/sink/sluice-sink-eos.jar"  # the exactly-once writer (spark.jars)
    umoci insert --image "$work/oci:base" "$work/sink" /opt/sluice/sink >&2
  fi
  umoci config --image "$work/oci:base" "$@" >&2
  to_archive "$work/oci" base "$tag" "$out"
  rm -rf "$work"
  # keep one tarball per image: every code change makes a new one (~1 GB for the runtime)
  find "$cache" -maxdepth 1 -name "$name-*.tar" ! -path "$out" -delete
  say "built the $name image in $((SECONDS - start)) s ($(du -m "$out" | cut -f1) MB)"
  echo "$name $out $tag"
}

# kafka_jars <dir>: the connector's jars that pyspark does not ship (Maven, cached in ~/.m2)
kafka_jars() {
  need mvn
  local spark_version; spark_version="$(sed -n 's/.*"pyspark==\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")"
  mkdir -p "$1.all" "$1"
  mvn -q -B -f "$root/images/kafka-connector-pom.xml" "-Dspark.version=$spark_version" dependency:copy-dependencies \
    "-DoutputDirectory=$1.all" -DincludeScope=runtime >&2 || {
    echo "Maven could not resolve Spark's Kafka connector $spark_version from Maven Central; check that it is reachable." >&2; exit 2; }
  local pyspark_jars; pyspark_jars="$("$PYTHON" -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null || true)"
  for jar in "$1.all"/*.jar; do
    local artifact; artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[a-z]+)?\.jar$//')"
    if [[ -n "$pyspark_jars" ]] && compgen -G "$pyspark_jars/$artifact-[0-9]*.jar" >/dev/null; then continue; fi
    cp "$jar" "$1/"
  done
  rm -rf "$1.all" "$1.pyspark"
}
what="${1:-all}"
if [[ "$what" == all || "$what" == operator ]]; then
  b="$(base operator python3,python-is-python3 operator)"
  app operator "$b" "$OPERATOR_TAG" --config.user 10001 --config.workingdir /home/sluice \
    --config.env HOME=/home/sluice --config.env PYTHONUNBUFFERED=1 \
    --config.entrypoint /opt/sluice/entrypoint.sh --config.cmd operator
fi
if [[ "$what" == all || "$what" == runtime ]]; then
  b="$(base runtime python3,python-is-python3,openjdk-17-jre-headless,procps runtime,scheduler)"
  app runtime "$b" "$RUNTIME_TAG" --config.user 185 --config.workingdir /home/spark \
    --config.env HOME=/home/spark --config.env PYTHONUNBUFFERED=1 \
    --config.env SPARK_HOME="$site/pyspark" --config.env JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 --config.env SLUICE_KAFKA_JARS=/opt/sluice/jars \
    --config.env SLUICE_SINK_JAR=/opt/sluice/sink/sluice-sink.jar --config.entrypoint /opt/sluice/entrypoint.sh
fi

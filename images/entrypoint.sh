#!/bin/bash
# Entrypoint of Sluice's images (images/*.Dockerfile and images/build-local.sh build the same).
#   operator [ARGS]   the kopf operator (the operator image's default command)
#   executor          a Spark executor, as Spark on Kubernetes starts it: the driver creates the pod
#                     with this argument and SPARK_* variables (pyspark's wheel, unlike Spark's own
#                     images, ships no entrypoint for it)
#   anything else     run as given (the pool pod runs `python -m sluice.runtime ...`)
set -euo pipefail

case "${1:-}" in
  operator)
    shift
    exec python3 -m sluice.operator "$@"
    ;;
  executor)
    # Spark passes JVM options as SPARK_JAVA_OPT_0, _1, ... (in order)
    java_opts=()
    while IFS= read -r name; do java_opts+=("${!name}"); done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n)
    classpath="${SPARK_HOME:?SPARK_HOME must name the pyspark directory}/jars/*"
    [[ -n "${SPARK_CLASSPATH:-}" ]] && classpath="$SPARK_CLASSPATH:$classpath"
    [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]] && classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
    exec "${JAVA_HOME:-/usr}/bin/java" \
      "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" "${java_opts[@]}" \
      -cp "$classpath" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" --podName "${SPARK_EXECUTOR_POD_NAME:-}"
    ;;
  *)
    exec "$@"
    ;;
esac

# A pool's runtime (PySpark driver + control API) and its scheduler sidecar; also the executor image
# (entrypoint.sh starts a Spark executor when Spark on Kubernetes passes `executor`).
# Build from the repository root: docker build -f images/runtime.Dockerfile -t sluice-runtime .
# images/build-local.sh builds the same image without Docker (Debian bookworm, the same packages,
# users, paths and entrypoint) for the node test tier and `sluice dev cluster up`.
FROM maven:3-eclipse-temurin-17 AS kafka
COPY images/kafka-connector-pom.xml /pom.xml
# Spark's Kafka connector, resolved once: pods start without reaching Maven Central. pyspark's
# version is the one pinned in pyproject.toml (4.2.0); the jars pyspark already ships are dropped
# in the next stage.
RUN mvn -q -B -f /pom.xml -Dspark.version=4.2.0 dependency:copy-dependencies -DoutputDirectory=/jars -DincludeScope=runtime

# Sluice's JVM sink, built by its own build file (runtime/java/pom.xml), as runtime/jvm_sink.py
# builds it: the image has no JDK
FROM maven:3-eclipse-temurin-17 AS sink
COPY runtime/java /java
RUN mvn -q -B -f /java/pom.xml -Dsluice.build=/build -Dspark.version=4.2.0 package && cp /build/sluice-sink.jar /build/sluice-sink-eos.jar /

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python-is-python3 \
      openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 185 --create-home --home-dir /home/spark --shell /bin/bash spark \
    && useradd --uid 10001 --create-home --home-dir /home/sluice --shell /bin/bash sluice
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY api ./api
COPY operator ./operator
COPY scheduler ./scheduler
COPY runtime ./runtime
# the benchmark lab and the test kit are not part of the product: neither ships
RUN pip install --no-cache-dir --break-system-packages --target /usr/local/lib/python3.11/dist-packages '.[runtime,scheduler]' \
    && rm -rf /src /usr/local/lib/python3.11/dist-packages/sluice/bench /usr/local/lib/python3.11/dist-packages/sluice/testing
COPY --from=kafka /jars /tmp/jars
RUN mkdir -p /opt/sluice/jars && for jar in /tmp/jars/*.jar; do \
      artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[a-z]+)?\.jar$//')"; \
      ls /usr/local/lib/python3.11/dist-packages/pyspark/jars/"$artifact"-[0-9]*.jar >/dev/null 2>&1 || cp "$jar" /opt/sluice/jars/; \
    done && rm -rf /tmp/jars
COPY --from=sink /sluice-sink.jar /sluice-sink-eos.jar /opt/sluice/sink/
COPY images/entrypoint.sh /opt/sluice/entrypoint.sh
ENV HOME=/home/spark PYTHONUNBUFFERED=1 SPARK_HOME=/usr/local/lib/python3.11/dist-packages/pyspark \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 SLUICE_KAFKA_JARS=/opt/sluice/jars \
    SLUICE_SINK_JAR=/opt/sluice/sink/sluice-sink.jar
WORKDIR /home/spark
USER 185
ENTRYPOINT ["/opt/sluice/entrypoint.sh"]

# The Sluice operator: kopf + the Kubernetes client; no Spark.
# Build from the repository root: docker build -f images/operator.Dockerfile -t sluice-operator .
# images/build-local.sh builds the same image without Docker (Debian bookworm, the same packages,
# users, paths and entrypoint) for the node test tier and `sluice dev cluster up`.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python-is-python3 \
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
RUN pip install --no-cache-dir --break-system-packages --target /usr/local/lib/python3.11/dist-packages '.[operator]' \
    && rm -rf /src /usr/local/lib/python3.11/dist-packages/sluice/bench /usr/local/lib/python3.11/dist-packages/sluice/testing
COPY images/entrypoint.sh /opt/sluice/entrypoint.sh
ENV HOME=/home/sluice PYTHONUNBUFFERED=1
WORKDIR /home/sluice
USER 10001
ENTRYPOINT ["/opt/sluice/entrypoint.sh"]
CMD ["operator"]

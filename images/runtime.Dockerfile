# A pool's runtime (PySpark driver + control API) and its scheduler sidecar; also the executor image.
# Build from the repository root: docker build -f images/runtime.Dockerfile -t sluice-runtime .
FROM apache/spark:4.2.0-scala2.13-java17-python3-ubuntu
USER root
WORKDIR /opt/sluice
COPY pyproject.toml README.md ./
COPY src ./src
COPY api ./api
COPY operator ./operator
COPY scheduler ./scheduler
COPY runtime ./runtime
# pyspark comes from the wheel pinned in pyproject (it matches the image's Spark 4.2.0)
RUN pip install --no-cache-dir '.[runtime,scheduler]'
USER 185

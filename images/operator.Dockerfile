# The Sluice operator: kopf + the Kubernetes client; no Spark.
# Build from the repository root: docker build -f images/operator.Dockerfile -t sluice-operator .
FROM python:3.11-slim
WORKDIR /opt/sluice
COPY pyproject.toml README.md ./
COPY src ./src
COPY api ./api
COPY operator ./operator
COPY scheduler ./scheduler
COPY runtime ./runtime
RUN pip install --no-cache-dir '.[operator]'
USER 10001
ENTRYPOINT ["python", "-m", "sluice.operator"]

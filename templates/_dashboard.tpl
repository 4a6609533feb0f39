{{- /* Sluice's Grafana dashboard (one pool: latency quantiles against targets, attainment, batch
time and gate wait, the critical path's bottleneck, executors with DS2 decisions). Plain JSON:
Grafana's display names use ${__field.labels...}, never braces Helm would read. */ -}}
{{- define "sluice.dashboard" -}}
{
  "uid": "sluice-pool",
  "title": "Sluice: pool",
  "tags": [
    "sluice"
  ],
  "schemaVersion": 39,
  "version": 1,
  "time": {
    "from": "now-1h",
    "to": "now"
  },
  "refresh": "30s",
  "templating": {
    "list": [
      {
        "name": "datasource",
        "type": "datasource",
        "query": "prometheus"
      },
      {
        "name": "pool",
        "type": "query",
        "datasource": {
          "type": "prometheus",
          "uid": "${datasource}"
        },
        "query": "label_values(sluice_operator_pool_executors, pool)",
        "refresh": 2
      },
      {
        "name": "namespace",
        "type": "query",
        "datasource": {
          "type": "prometheus",
          "uid": "${datasource}"
        },
        "query": "label_values(sluice_query_latency_target_seconds, namespace)",
        "refresh": 2
      }
    ]
  },
  "annotations": {
    "list": [
      {
        "name": "DS2 decisions",
        "enable": true,
        "iconColor": "orange",
        "datasource": {
          "type": "prometheus",
          "uid": "${datasource}"
        },
        "expr": "changes(sluice_operator_pool_executors{pool=\"$pool\", state=\"target\"}[1m]) > 0",
        "titleFormat": "DS2 changed the executor target",
        "step": "60s"
      }
    ]
  },
  "panels": [
    {
      "id": 1,
      "type": "timeseries",
      "title": "Latency p99 and p50 against the target",
      "description": "Row latency from the histogram (A: p99, B: p50) and each query's target (C).",
      "gridPos": {
        "x": 0,
        "y": 0,
        "w": 12,
        "h": 8
      },
      "datasource": {
        "type": "prometheus",
        "uid": "${datasource}"
      },
      "fieldConfig": {
        "defaults": {
          "unit": "s",
          "displayName": "${__field.labels.tenant}/${__field.labels.query} ${__field.labels.part}${__field.labels.state}",
          "custom": {
            "stacking": {
              "mode": "none"
            }
          }
        },
        "overrides": []
      },
      "targets": [
        {
          "refId": "A",
          "expr": "histogram_quantile(0.99, sum by (le, tenant, query) (rate(sluice_query_latency_seconds_bucket{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"}[$__rate_interval])))",
          "legendFormat": "__auto"
        },
        {
          "refId": "B",
          "expr": "histogram_quantile(0.5, sum by (le, tenant, query) (rate(sluice_query_latency_seconds_bucket{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"}[$__rate_interval])))",
          "legendFormat": "__auto"
        },
        {
          "refId": "C",
          "expr": "max by (tenant, query) (sluice_query_latency_target_seconds{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"})",
          "legendFormat": "__auto"
        }
      ]
    },
    {
      "id": 2,
      "type": "timeseries",
      "title": "SLA attainment (rows within the target)",
      "description": "",
      "gridPos": {
        "x": 12,
        "y": 0,
        "w": 12,
        "h": 8
      },
      "datasource": {
        "type": "prometheus",
        "uid": "${datasource}"
      },
      "fieldConfig": {
        "defaults": {
          "unit": "percentunit",
          "displayName": "${__field.labels.tenant}/${__field.labels.query} ${__field.labels.part}${__field.labels.state}",
          "custom": {
            "stacking": {
              "mode": "none"
            }
          }
        },
        "overrides": []
      },
      "targets": [
        {
          "refId": "A",
          "expr": "sum by (tenant, query) (rate(sluice_query_rows_within_sla_total{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"}[$__rate_interval])) / sum by (tenant, query) (rate(sluice_query_rows_total{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"}[$__rate_interval]))",
          "legendFormat": "__auto"
        }
      ]
    },
    {
      "id": 3,
      "type": "timeseries",
      "title": "Batch time and gate wait",
      "description": "A: the last batch's action; B: how long it waited for the scheduler's grant.",
      "gridPos": {
        "x": 0,
        "y": 8,
        "w": 12,
        "h": 8
      },
      "datasource": {
        "type": "prometheus",
        "uid": "${datasource}"
      },
      "fieldConfig": {
        "defaults": {
          "unit": "s",
          "displayName": "${__field.labels.tenant}/${__field.labels.query} ${__field.labels.part}${__field.labels.state}",
          "custom": {
            "stacking": {
              "mode": "none"
            }
          }
        },
        "overrides": []
      },
      "targets": [
        {
          "refId": "A",
          "expr": "max by (tenant, query) (sluice_runtime_batch_seconds{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"})",
          "legendFormat": "__auto"
        },
        {
          "refId": "B",
          "expr": "max by (tenant, query) (sluice_runtime_gate_wait_seconds{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"})",
          "legendFormat": "__auto"
        }
      ]
    },
    {
      "id": 4,
      "type": "timeseries",
      "title": "Bottleneck: share of the critical path",
      "description": "SnailTrail's critical path over recent batches, by part; the largest part is the bottleneck.",
      "gridPos": {
        "x": 12,
        "y": 8,
        "w": 12,
        "h": 8
      },
      "datasource": {
        "type": "prometheus",
        "uid": "${datasource}"
      },
      "fieldConfig": {
        "defaults": {
          "unit": "percentunit",
          "displayName": "${__field.labels.tenant}/${__field.labels.query} ${__field.labels.part}${__field.labels.state}",
          "custom": {
            "stacking": {
              "mode": "normal"
            }
          }
        },
        "overrides": []
      },
      "targets": [
        {
          "refId": "A",
          "expr": "max by (tenant, query, part) (sluice_query_critical_path_share{namespace=\"$namespace\", pod=~\"sluice-pool-$pool-.*\"})",
          "legendFormat": "__auto"
        }
      ]
    },
    {
      "id": 5,
      "type": "timeseries",
      "title": "Executors (current and target)",
      "description": "DS2 decisions show as annotations.",
      "gridPos": {
        "x": 0,
        "y": 16,
        "w": 24,
        "h": 8
      },
      "datasource": {
        "type": "prometheus",
        "uid": "${datasource}"
      },
      "fieldConfig": {
        "defaults": {
          "unit": "short",
          "displayName": "${__field.labels.tenant}/${__field.labels.query} ${__field.labels.part}${__field.labels.state}",
          "custom": {
            "stacking": {
              "mode": "none"
            }
          }
        },
        "overrides": []
      },
      "targets": [
        {
          "refId": "A",
          "expr": "max by (state) (sluice_operator_pool_executors{pool=\"$pool\"})",
          "legendFormat": "__auto"
        }
      ]
    }
  ]
}
{{- end -}}

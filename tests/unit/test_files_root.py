"""Tenant isolation on disk (pure): each namespace's files under `<filesRoot>/<namespace>`, and
checkpoints named by the runtime, never by a manifest."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.api.files import FilesOutsideRoot, confine, confine_query
from sluice.api.manifest import ManifestErrors, load_query, parse_text
from sluice.api.pool import StreamingPool
from sluice.operator.admission import admit

ROOT = "/var/lib/sluice/files"


@pytest.mark.parametrize(("path", "resolved"), [
    ("out", f"{ROOT}/team-a/out"), ("./a/b/", f"{ROOT}/team-a/a/b"), (f"{ROOT}/team-a/x", f"{ROOT}/team-a/x"),
    (f"file://{ROOT}/team-a/y", f"{ROOT}/team-a/y"), ("a/../b", f"{ROOT}/team-a/b"), (".", f"{ROOT}/team-a"),
])
def test_a_path_inside_the_tenants_root_is_resolved(path: str, resolved: str) -> None:
    assert confine(path, "team-a", ROOT) == resolved


@pytest.mark.parametrize(("path", "words"), [
    ("../team-b/x", "outside the files root of namespace 'team-a'"), ("/etc/passwd", "outside"),
    (f"{ROOT}/team-b/x", "outside"), (f"{ROOT}/team-a-evil/x", "outside"), ("a/../../team-b", "outside"),
    (f"{ROOT}/team-a/../team-b", "outside"), ("s3a://bucket/x", "names the s3a filesystem"),
    ("hdfs://nn/x", "names the hdfs filesystem"), ("file:/etc", "outside"), ("x" * 500 + "/../../..", "outside"),
])
def test_a_path_outside_it_or_on_another_filesystem_is_refused_in_a_sentence(path: str, words: str) -> None:
    with pytest.raises(FilesOutsideRoot) as refused:
        confine(path, "team-a", ROOT)
    message = str(refused.value)
    assert words in message and "\n" not in message and len(message) < 300, message


def _query(namespace: str, sink_path: str) -> Any:
    return load_query({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": "q", "namespace": namespace},
        "spec": {"pool": "shared", "source": {"type": "rate", "rowsPerSecond": 5}, "pipeline": [{"filter": "value > 1"}],
                 "sink": {"type": "files", "format": "json", "path": sink_path}, "sla": {"latencyTarget": "5s"}},
    })


def test_admission_refuses_a_query_whose_files_leave_its_root() -> None:
    pool = StreamingPool.model_validate({"metadata": {"name": "shared"}, "spec": {"filesRoot": "/data/pools"}})
    assert admit(_query("team-a", "reports"), pool, 0).admitted
    refused = admit(_query("team-a", "/data/pools/team-b/reports"), pool, 0)
    assert not refused.admitted and not refused.retry and refused.reason == "FilesOutsideRoot"
    assert refused.message == ("spec.sink.path: '/data/pools/team-b/reports' is outside the files root of namespace "
                               "'team-a' (/data/pools/team-a); write a path under it (pool 'shared' sets the root: "
                               "spec.filesRoot).")
    assert confine_query(_query("team-a", "reports"), "/data/pools").spec.sink.path == "/data/pools/team-a/reports"  # type: ignore[union-attr]


@pytest.mark.parametrize("root", ["relative", "/a/../b", "/a/./b", "/", "/a//b", "/a/b/"])
def test_a_pool_files_root_must_be_an_absolute_normalized_directory(root: str) -> None:
    text = f"apiVersion: sluice.dev/v1alpha1\nkind: StreamingPool\nmetadata: {{name: p}}\nspec: {{filesRoot: '{root}'}}\n"
    _, errors = parse_text(text, "p.yaml")
    assert [e.path for e in errors] == ["spec.filesRoot"], errors


@pytest.mark.parametrize("name", ["../team-b", "a/b", "..", "Team-B"])
def test_a_query_name_cannot_reach_another_checkpoint(name: str) -> None:
    """The runtime keeps a query's checkpoint at `<workdir>/checkpoints/<namespace>/<name>`; both
    are DNS names, so no manifest can name a path into another tenant's checkpoints."""
    with pytest.raises(ManifestErrors):
        load_query({"apiVersion": "sluice.dev/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": name, "namespace": "team-a"},
                    "spec": {"pool": "p", "source": {"type": "rate"}, "pipeline": [{"filter": "value > 1"}],
                             "sink": {"type": "noop"}, "sla": {"latencyTarget": "5s"}}})

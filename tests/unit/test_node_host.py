"""The node tier's host check: on a machine without what a node needs, one sentence names it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.testing.node import NodeError, check_host


def test_a_machine_without_the_runtime_gets_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no containerd, runc, iptables ... on this PATH
    with pytest.raises(NodeError) as raised:
        check_host()
    message = str(raised.value)
    assert message.endswith(".") and "\n" not in message
    if os.geteuid() == 0:
        for package in ("containerd", "runc", "iptables", "conntrack"):
            assert package in message
        assert "tests/node/host-packages.sh" in message
    else:
        assert "needs root" in message

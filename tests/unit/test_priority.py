"""Which CPU priority lever a pool's threads have (`sluice.runtime.priority`): found by trying on
this kernel, under the node settings a pod may live with (RLIMIT_NICE 0, 20, 25; no CAP_SYS_NICE,
as every pool pod drops it), and the one in force decided from that."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from sluice.runtime.priority import Probe, decide

PROBE = ("import json; from sluice.runtime import priority as p; f = p.probe(); "
         "print(json.dumps([f.raise_ok, f.lower_ok, f.rlimit_nice, p.decide(True, True, f, True, '500m').mechanism]))")


def can_raise_limits() -> bool:
    return subprocess.run(["prlimit", "--nice=40:40", "--", "true"], capture_output=True, check=False).returncode == 0


def without_sys_nice(limit: int) -> list[str]:
    """A command prefix: RLIMIT_NICE `limit` (soft and hard), CAP_SYS_NICE gone from every set."""
    return ["prlimit", f"--nice={limit}:{limit}", "--",
            "setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]


@pytest.mark.parametrize(("limit", "raised", "lowered", "mechanism"), [
    (0, False, False, "podWeight"),   # the kernel's default: a lowered thread never comes back
    (20, False, True, "bulkNice"),    # back to 0 allowed, -5 not
    (25, True, True, "threadNice"),   # down to 20 - 25 = -5
])
def test_the_lever_found_is_the_one_the_kernel_allows(limit: int, raised: bool, lowered: bool, mechanism: str) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test sets RLIMIT_NICE and drops CAP_SYS_NICE: run it as root, as make test does")
    hard = resource.getrlimit(resource.RLIMIT_NICE)[1]
    if limit > hard != resource.RLIM_INFINITY and not can_raise_limits():
        pytest.skip(f"this machine's hard RLIMIT_NICE is {hard} and raising it needs CAP_SYS_RESOURCE, which "
                    f"it withholds: no process here can be given RLIMIT_NICE {limit}")
    proc = subprocess.run([*without_sys_nice(limit), sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [raised, lowered, limit, mechanism]


def test_with_the_capability_a_thread_rises_whatever_the_limit() -> None:
    if os.geteuid() != 0:
        pytest.fail("run as root, as make test does")
    proc = subprocess.run(["prlimit", "--nice=0:0", "--", sys.executable, "-c", PROBE], capture_output=True,
                          text=True, timeout=60, check=False)
    assert json.loads(proc.stdout)[3] == "threadNice"


def test_the_lever_in_force_follows_the_policy_the_lane_and_the_pods() -> None:
    both, lower, neither = Probe(True, True, 25), Probe(False, True, 20), Probe(False, False, 0)
    assert decide(True, True, both, on_pods=True).mechanism == "threadNice"
    assert decide(True, True, lower, on_pods=True).mechanism == "bulkNice"
    weight = decide(True, True, neither, on_pods=True, requests="500m")
    assert weight.mechanism == "podWeight"
    assert "RLIMIT_NICE 0" in weight.reason and "500m an executor" in weight.reason
    assert decide(True, True, neither, on_pods=False).mechanism == "none"
    # no urgent work: nothing to raise, whatever the node allows; pods still weigh by requests
    assert decide(False, True, both, on_pods=False).mechanism == "none"
    assert decide(False, True, both, on_pods=True).mechanism == "podWeight"
    assert decide(True, False, both, on_pods=False).reason == "the urgent lane is off"
    assert "unlimited" in decide(True, True, Probe(True, True, -1), on_pods=False).reason

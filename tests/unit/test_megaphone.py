"""The Megaphone shell's bookkeeping that needs no Spark: each measured step's reload cost
against what its budget allowed (`sluice bench rescale` reports both)."""

from __future__ import annotations

from sluice.runtime.megaphone import Reload, StatefulQuery, StateMover, Step
from sluice.runtime.placement import SLACK_SHARE, Move, Partition, locality_wait, pending

MB = 2**20


def test_a_steps_reload_is_measured_from_the_two_batches_after_it_and_kept_with_its_allowance() -> None:
    mover = StateMover(spark=None, queries=lambda: [])
    move = Move((0, 3), "1", "2", 8 * MB)
    mover._step["ns/q"] = Step(batch=5, bytes=8 * MB, before=(1.0, 1.0, 1.2), moves=(move,), allowed=4.0 * SLACK_SHARE)
    listed = [Partition((0, 3), "2", 8 * MB)]  # the move took: the unit runs on its target
    one_after = StatefulQuery("ns/q", None, batches=6, slack=4.0, recent=((5, 1.0), (6, 3.0)))
    assert mover._budget(one_after, listed) == 0 and mover.reloads == []  # one batch after it: not measured yet
    two_after = StatefulQuery("ns/q", None, batches=7, slack=4.0, recent=((5, 1.0), (6, 3.0), (7, 1.5)))
    mover._budget(two_after, listed)
    # the worst batch after (3.0 s) less the median before (1.0 s): 2 s for 8 MiB, within its 2 s
    assert mover.reloads == [Reload("ns/q", 5, 1, 8 * MB, 2.0, 2.0)]


def test_units_that_only_a_cold_executor_could_take_are_not_pending() -> None:
    # 8 units on the old executor "1"; "2" joined. Warm, 4 units are to balance onto it (the
    # locality wait is raised for them); cold, none can move yet, so none is pending
    units = [Partition((0, p), "1", MB) for p in range(8)]
    assert pending(units, ["1", "2"], frozenset()) == 4
    assert pending(units, ["1", "2"], frozenset(), cold=frozenset({"2"})) == 0
    assert locality_wait(pending(units, ["1", "2"], frozenset(), cold=frozenset({"2"})), [0.8]) is None
    assert locality_wait(pending(units, ["1", "2"], frozenset()), [0.8]) == 0.8 * SLACK_SHARE
    # a leaving executor's units still move to the warm ones while another is cold
    assert pending(units, ["1", "2", "3"], frozenset({"1"}), cold=frozenset({"2"})) == 8

"""The Megaphone shell's bookkeeping that needs no Spark: each measured step's reload cost
against what its budget allowed (`sluice bench rescale` reports both)."""

from __future__ import annotations

from sluice.runtime.megaphone import Reload, StatefulQuery, StateMover, Step
from sluice.runtime.placement import SLACK_SHARE, Move, Partition

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

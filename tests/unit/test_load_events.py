"""The load generator's event text: the bytes `json.dumps` wrote before, at less CPU."""

from __future__ import annotations

import json
import random

from sluice.testing.load import EventText, iso_ms


def test_event_text_is_json_dumps_bytes() -> None:
    text = EventText()
    rng = random.Random(3)
    millis = 1_796_633_535_000
    for seq in range(5000):
        millis += rng.choice((0, 0, 1, 7, 999, 1000, 86_400_000))  # same ms, next ms, next second, next day
        amount = round(rng.random() * 1000, 2)
        expected = {"key": f"k{seq % 97}", "seq": seq, "produced_at": iso_ms(millis / 1000 + 0.0002), "amount": amount}
        assert text.event(f"k{seq % 97}", seq, millis, amount) == json.dumps(expected).encode()


def test_stamp_rebuilds_the_second_when_it_changes() -> None:
    text = EventText()
    assert text.stamp(999) == "1970-01-01T00:00:00.999Z"
    assert text.stamp(1000) == "1970-01-01T00:00:01.000Z"
    assert text.stamp(1_700_000_000_042) == "2023-11-14T22:13:20.042Z"
    assert text.stamp(999) == "1970-01-01T00:00:00.999Z"  # going back rebuilds the second's text

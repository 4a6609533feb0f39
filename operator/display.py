"""Status figures with their units, for `kubectl get`'s printer columns (which cannot format)."""

from __future__ import annotations


def latency_text(ms: float) -> str:
    """812ms below a second, 1.5s below a minute, then 2m3s."""
    if ms < 1000:
        return f"{ms:.0f}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest}s"


def percent_text(share: float) -> str:
    """A share 0..1 as a percentage with one decimal: 0.975 -> 97.5%."""
    return f"{share * 100:.1f}%"

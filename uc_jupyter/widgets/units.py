"""Numbers as a person reads them at a glance: durations and byte counts with three significant digits.

Example:
    >>> format_seconds(0.0123), format_bytes(12_345_678), three_digits(3.14159)
    ('12.3 ms', '12.3 MB', '3.14')
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["format_bytes", "format_seconds", "shares_text", "three_digits"]


def format_seconds(seconds: float) -> str:
    """A duration with three significant digits and a unit.

    Example:
        >>> format_seconds(0.000_85), format_seconds(0.0123), format_seconds(2.5), format_seconds(0)
        ('850 us', '12.3 ms', '2.50 s', '0 s')
    """
    if seconds <= 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{three_digits(seconds / scale)} {unit}"
    return f"{three_digits(seconds / 1e-9)} ns"


def format_bytes(count: float) -> str:
    """A byte count in decimal units (as the rest of the project prints them).

    Example:
        >>> format_bytes(0), format_bytes(1234), format_bytes(12_345_678), format_bytes(3e12)
        ('0 B', '1.23 kB', '12.3 MB', '3.00 TB')
    """
    if count < 1000:
        return f"{int(count)} B"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000
        if count < 1000 or unit == "TB":
            return f"{three_digits(count)} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def three_digits(value: float) -> str:
    """``value`` with three significant digits (no more than the number needs left of the point)."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def shares_text(shares: Mapping[str, float]) -> str:
    """Shares of a whole, in their order, those that round to 0% left out.

    Example:
        >>> shares_text({"fetch": 0.7, "decode": 0.25, "collate": 0.049, "other": 0.001})
        'fetch 70%, decode 25%, collate 5%'
    """
    return ", ".join(f"{name} {share:.0%}" for name, share in shares.items() if share >= 0.005)

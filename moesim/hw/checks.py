"""The one check the components make of their sizes."""

from __future__ import annotations

__all__ = ["at_least_one"]


def at_least_one(name: str, value: int) -> int:
    """``value``, a count of something a component holds (banks, queue slots); a ValueError
    naming ``name`` when it is below 1.

    >>> at_least_one("banks", 0)
    Traceback (most recent call last):
    ...
    ValueError: banks must be >= 1, got 0
    """
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value

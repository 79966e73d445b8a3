"""Unit constants, conversions and the unit suffixes that profile field names carry.

Simulated time is integer nanoseconds everywhere (see docs/background/design.md).
Bandwidths in profiles are decimal (GB/s = 1e9 bytes/s), as storage and memory vendors
quote them; capacities are binary (GiB = 2**30 bytes), as operating systems report them.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "KiB", "MiB", "GiB", "KB", "MB", "GB", "TB",
    "NS_PER_US", "NS_PER_MS", "NS_PER_S",
    "FP32_B", "FP16_B", "UNIT_SUFFIXES", "unit_of", "ns", "s_to_ns", "transfer_ns",
]

KiB: Final = 1024
MiB: Final = 1024**2
GiB: Final = 1024**3
KB: Final = 1000
MB: Final = 1000**2
GB: Final = 1000**3
TB: Final = 1000**4

FP32_B: Final = 4   # bytes of one fp32 value
FP16_B: Final = 2   # bytes of one fp16 value

NS_PER_US: Final = 1_000
NS_PER_MS: Final = 1_000_000
NS_PER_S: Final = 1_000_000_000

#: Suffix -> meaning. A numeric field of a profile must end in one of these.
UNIT_SUFFIXES: Final[dict[str, str]] = {
    "_TBps": "terabytes per second (1e12 B/s)",
    "_GBps": "gigabytes per second (1e9 B/s)",
    "_MBps": "megabytes per second (1e6 B/s)",
    "_MTps": "mega-transfers per second",
    "_TFLOPS": "1e12 floating-point operations per second",
    "_GFLOPS": "1e9 floating-point operations per second",
    "_TOPS": "1e12 integer operations per second",
    "_GHz": "gigahertz",
    "_MHz": "megahertz",
    "_s": "seconds",
    "_ms": "milliseconds",
    "_us": "microseconds",
    "_ns": "nanoseconds",
    "_GiB": "gibibytes (2**30 B)",
    "_MiB": "mebibytes (2**20 B)",
    "_KiB": "kibibytes (2**10 B)",
    "_B": "bytes",
    "_bits": "bits",
    "_W": "watts",
    "_pJpB": "picojoules per byte moved",
    "_pct": "percent",
    "_ratio": "dimensionless ratio",
    "_count": "a count (unitless integer)",
}


def unit_of(field_name: str) -> str | None:
    """Return the unit suffix a field name ends with, or None.

    >>> unit_of("read_bw_GBps"), unit_of("read_bw")
    ('_GBps', None)
    """
    for suffix in sorted(UNIT_SUFFIXES, key=len, reverse=True):
        if field_name.endswith(suffix):
            return suffix
    return None


def ns(duration_ns: float) -> int:
    """A duration in ns as the integer the simulated clock advances by: rounded half up,
    never negative. The discrete-event simulation and the max-plus evaluator both round
    with this, so they agree to the nanosecond.

    >>> ns(2.5), ns(2.4999), ns(0.0)
    (3, 2, 0)
    """
    assert duration_ns >= 0, f"negative duration {duration_ns}"
    return int(duration_ns + 0.5)


def s_to_ns(seconds: float) -> int:
    """Seconds to integer nanoseconds, rounded as :func:`ns`."""
    return ns(seconds * NS_PER_S)


def transfer_ns(n_bytes: float, bw_GBps: float, latency_us: float = 0.0) -> int:
    """Time to move ``n_bytes`` at ``bw_GBps`` after a fixed ``latency_us``, in ns.

    >>> transfer_ns(4_300_000, 4.3)
    1000000
    """
    if bw_GBps <= 0:
        raise ValueError(f"bw_GBps must be > 0, got {bw_GBps}")
    return s_to_ns(latency_us * 1e-6 + n_bytes / (bw_GBps * GB))

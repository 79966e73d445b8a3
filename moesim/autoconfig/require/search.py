"""The least value meeting a target: a walk over a coarse log-spaced grid from the profile's value
until the target is bracketed, then bisection of the bracket (pure, no simulator).

``gap(value)`` says how far the value is from the target on a log scale: ``<= 0`` meets it,
``> 0`` misses it, None cannot run at all (misses, with no distance). Each bisection step splits
the bracket where the log-log line through its ends crosses the target (clipped to the middle
90% of the bracket; the plain geometric middle when an end cannot run or the previous split
removed less than half the bracket), then tries the value ``1 + rel_tol`` beyond the split on
the other side, which closes the bracket at once when the line was right. ``gap`` is assumed
monotone (more of the resource never hurts); the values tried are where a violation shows, and
:class:`Found` says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Found", "least_meeting", "least_integer", "round_up", "grid", "GRID_STEP", "REL_TOL"]

#: ratio between neighbouring points of the coarse grid
GRID_STEP = 8.0
#: the search stops when hi / lo <= 1 + REL_TOL: 0.1%, so 0.99x of the answer lies below ``lo`` (a failing value)
REL_TOL = 1e-3
_CLIP = 0.05

Gap = Callable[[float], float | None]


@dataclass(frozen=True, kw_only=True)
class Found:
    """The least value meeting the target (None: none in [low, high]), every value tried and
    whether the tried values were monotone (a larger value never failed where a smaller one met)."""

    value: float | None
    tried: dict[float, bool]
    monotone: bool
    at_low_end: bool = False


def grid(low: float, high: float) -> list[float]:
    """Log-spaced points from ``low`` to ``high``, at most :data:`GRID_STEP` apart."""
    n = max(1, math.ceil(math.log(high / low) / math.log(GRID_STEP) - 1e-9))
    return [low * (high / low) ** (i / n) for i in range(n + 1)]


def _monotone(tried: dict[float, bool]) -> bool:
    seen_meet = False
    for v in sorted(tried):
        if seen_meet and not tried[v]:
            return False
        seen_meet = seen_meet or tried[v]
    return True


def _split(lo: float, hi: float, g_lo: float | None, g_hi: float | None, bisect: bool) -> float:
    """Where to split [lo, hi]: the log-log line's crossing, or the geometric middle."""
    t = 0.5
    if not bisect and g_lo is not None and g_hi is not None and g_lo > g_hi:
        t = min(max(g_lo / (g_lo - g_hi), _CLIP), 1 - _CLIP)
    return float(lo * (hi / lo) ** t)


def _walk(gap: Gap, points: list[float], start: float, gaps: dict[float, float | None],
          ok: dict[float, bool]) -> None:
    """Try ``points`` from ``start`` towards the target: down while they meet, up while they miss."""
    i = points.index(start)
    step = -1 if _meets(gap, gaps, ok, start) else 1
    while 0 <= i + step < len(points) and _meets(gap, gaps, ok, points[i + step]) == (step < 0):
        i += step


def least_meeting(gap: Gap, low: float, high: float, rel_tol: float = REL_TOL, start: float | None = None,
                  full_grid: bool = False) -> Found:
    """The least value in [low, high] whose gap is <= 0, to ``rel_tol`` (the answer meets; a value
    at most ``1 + rel_tol`` below it was tried and failed, unless the answer is ``low``).

    The coarse grid is walked from ``start`` (default ``low``) until the target is bracketed;
    ``full_grid`` tries every grid point (for a plotted curve)."""
    assert 0 < low < high and rel_tol > 0
    start = low if start is None or not low < start < high else start
    points = sorted({*grid(low, start), *grid(start, high)}) if start > low else grid(low, high)
    gaps: dict[float, float | None] = {}
    ok: dict[float, bool] = {}
    for v in points if full_grid else ():
        _meets(gap, gaps, ok, v)
    _walk(gap, points, start, gaps, ok)
    met = [v for v in sorted(ok) if ok[v]]
    if not met or met[0] == low:
        return Found(value=met[0] if met else None, tried=ok, monotone=_monotone(ok), at_low_end=bool(met))
    hi = met[0]
    lo = max(v for v in ok if v < hi)
    bisect, limit = False, 1 + rel_tol * (1 + 1e-9)
    while hi / lo > limit:
        width = math.log(hi / lo)
        x = _split(lo, hi, gaps[lo], gaps[hi], bisect)
        if _meets(gap, gaps, ok, x):
            hi, y = x, x / (1 + rel_tol)
        else:
            lo, y = x, x * (1 + rel_tol)
        if lo < y < hi:
            lo, hi = (lo, y) if _meets(gap, gaps, ok, y) else (y, hi)
        bisect = math.log(hi / lo) > width / 2
    return Found(value=hi, tried=ok, monotone=_monotone(ok))


def _meets(gap: Gap, gaps: dict[float, float | None], ok: dict[float, bool], v: float) -> bool:
    if v not in gaps:
        g = gap(v)
        gaps[v], ok[v] = g, g is not None and g <= 0
    return ok[v]


def least_integer(meets: Callable[[int], bool], low: int, high: int) -> Found:
    """The least power of two in [low, high] with ``meets`` true (a tensor-parallel layout splits
    heads and hidden size evenly: 1, 2, 4, 8 ... GPUs); every one is tried (the curve may be
    non-monotone, e.g. GPU counts whose communication outgrows their bandwidth)."""
    counts = [2 ** i for i in range(high.bit_length()) if low <= 2 ** i <= high]
    tried = {float(n): meets(n) for n in counts}
    met = [v for v in sorted(tried) if tried[v]]
    return Found(value=met[0] if met else None, tried=tried, monotone=_monotone(tried),
                 at_low_end=bool(met) and met[0] == low)


def round_up(value: float, digits: int = 4) -> float:
    """``value`` rounded up to ``digits`` significant digits (what is printed is what was checked).

    >>> round_up(1.234012), round_up(0.0123456, 3)
    (1.235, 0.0124)
    """
    if value <= 0:
        return value
    scale = 10 ** (digits - 1 - math.floor(math.log10(value)))
    out = math.ceil(value * scale - 1e-9) / scale
    return float(f"{out:.{digits}g}")

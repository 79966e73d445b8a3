"""One ``require`` answer: search the fast evaluator, round, confirm at the answer and below it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from moesim.config.profiles import AnyProfile

from .evaluate import Confirmed, Metric
from .resources import Resource, physical_range, profile_value
from .search import Found, least_integer, least_meeting, round_up

__all__ = ["Workload", "Answer", "require", "meets_target", "BELOW"]

#: the value below the answer that must fail: 0.99x (a GPU count: the next smaller power of two)
BELOW = 0.99


class Workload(Protocol):
    metric: Metric

    @property
    def device(self) -> AnyProfile: ...

    def fast(self, res: Resource, value: float) -> float | None: ...

    def confirm(self, res: Resource, value: float) -> Confirmed: ...


def meets_target(metric: Metric, value: float | None, target: float) -> bool:
    """TTFT at most the target, tokens/s at least it; a run that does not fit meets nothing."""
    if value is None:
        return False
    return value <= target if metric == "ttft_s" else value >= target


@dataclass(frozen=True, kw_only=True)
class Answer:
    """The least value of ``resource`` meeting ``target`` (None: not reachable in ``span``)."""

    resource: Resource
    metric: Metric
    target: float
    profile_value: float
    span: tuple[float, float]
    threshold: float | None
    at_threshold: Confirmed | None        # the full model at the threshold
    below_value: float | None              # 0.99x the threshold (half the GPUs); None at the range's low end
    below: Confirmed | None                # the full model there
    monotone: bool                         # the values tried never met below a failing one
    curve: tuple[tuple[float, float | None], ...]   # every value tried by the search, its predicted metric
    best: tuple[float, float] | None      # the best reachable (value, metric) of the curve

    @property
    def confirmed(self) -> bool:
        """The full model meets the target at the threshold and misses it below."""
        if self.threshold is None or self.at_threshold is None:
            return False
        ok = meets_target(self.metric, self.at_threshold.metric, self.target)
        return ok and (self.below is None or not meets_target(self.metric, self.below.metric, self.target))


def _best(metric: Metric, curve: dict[float, float | None]) -> tuple[float, float] | None:
    ok = [(v, m) for v, m in sorted(curve.items()) if m is not None]
    if not ok:
        return None
    sign = 1.0 if metric == "ttft_s" else -1.0      # the least value reaching the best (to the 4 digits shown)
    return min(ok, key=lambda vm: (sign * float(f"{vm[1]:.4g}"), vm[0]))


def _search(work: Workload, res: Resource, target: float, span: tuple[float, float],
            curve: dict[float, float | None], full_grid: bool) -> Found:
    def gap(value: float) -> float | None:
        """log(metric / target), signed so that <= 0 meets it (None: the run does not fit)."""
        if value not in curve:
            curve[value] = work.fast(res, value)
        metric = curve[value]
        if metric is None:
            return None
        return math.log(metric / target) if work.metric == "ttft_s" else math.log(target / metric)

    if res.integer:
        def meets(n: int) -> bool:
            g = gap(float(n))
            return g is not None and g <= 0

        return least_integer(meets, int(span[0]), int(span[1]))
    return least_meeting(gap, *span, start=profile_value(res, work.device), full_grid=full_grid)


def _rounded(found: Found, span: tuple[float, float], integer: bool) -> float:
    assert found.value is not None
    if integer or found.at_low_end:
        return found.value
    out = round_up(found.value)
    return out if out <= span[1] else found.value


def require(work: Workload, res: Resource, target: float, full_grid: bool = False) -> Answer:
    """The least value of ``res`` at which ``work`` meets ``target`` (module doc); ``full_grid``
    also prices every point of the coarse grid (a curve to plot)."""
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"target must be a positive finite number, got {target}")
    span = physical_range(res, work.device)
    curve: dict[float, float | None] = {}
    found = _search(work, res, target, span, curve, full_grid)
    value = below_value = None
    at = below = None
    if found.value is not None:
        value = _rounded(found, span, res.integer)
        below_value = None if found.at_low_end else (value / 2 if res.integer else value * BELOW)
        at = work.confirm(res, value)
        below = None if below_value is None else work.confirm(res, below_value)
    return Answer(resource=res, metric=work.metric, target=target, profile_value=profile_value(res, work.device),
                  span=span, threshold=value, at_threshold=at, below_value=below_value, below=below,
                  monotone=found.monotone, curve=tuple(sorted(curve.items())), best=_best(work.metric, curve))

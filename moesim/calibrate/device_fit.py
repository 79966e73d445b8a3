"""Fit a phone profile's rates to the user's own measurements (``moesim calibrate device``).

Each group of figures (:mod:`moesim.calibrate.device_figures`) fits its fields by bounded least
squares on ``ln(predicted / measured)``, in log space of the fields, within physical bounds; the
groups run in :data:`~moesim.calibrate.device_figures.GROUPS` order, each on the profile the
previous ones produced. Figures named in ``hold_out`` are predicted, not fitted: their errors are
the honest test of the fit.

Intervals: with ``n`` fitted figures and ``p`` fields, the residual variance ``s^2 = sum r^2 / (n - p)``
and the Jacobian ``J`` of the log predictions give the fields' covariance ``s^2 (J^T J)^+``; a
figure's 90% prediction interval is ``predicted x exp(+-t(0.95, n - p) sqrt(g C g^T + s^2))`` with
``g`` its own gradient (held-out figures too), a field's ``exp(x +- t sqrt(C_jj))`` clipped to its
bounds. With ``n = p`` nothing is left to estimate the scatter: no interval (``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import t as student_t

from moesim.calibrate.device_figures import GROUPS, FieldSpec, Figure, group_fields
from moesim.config.device import MobileNPUProfile
from moesim.config.profiles import override_profile
from moesim.cost.uncertainty import COVERAGE
from moesim.errors import InputError

__all__ = ["FigureFit", "GroupFit", "DeviceFit", "fit_group", "fit_device", "with_fitted"]

_STEP = 1e-4          # central-difference step in log space for the gradients


@dataclass(frozen=True, kw_only=True)
class FigureFit:
    name: str
    group: str
    unit: str
    source: str
    measured: float
    predicted: float
    used: bool                                  # fitted (True) or held out (False)
    interval: tuple[float, float] | None

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


@dataclass(frozen=True, kw_only=True)
class GroupFit:
    group: str
    fields: tuple[FieldSpec, ...]
    values: dict[str, float]
    intervals: dict[str, tuple[float, float] | None]
    figures: tuple[FigureFit, ...]
    at_bound: tuple[str, ...]
    dof: int


@dataclass(frozen=True, kw_only=True)
class DeviceFit:
    groups: tuple[GroupFit, ...]
    profile: MobileNPUProfile                    # the base with every fitted value set

    @property
    def values(self) -> dict[str, float]:
        return {k: v for g in self.groups for k, v in g.values.items()}


def with_fitted(profile: MobileNPUProfile, values: dict[str, float]) -> MobileNPUProfile:
    out = override_profile(profile, values, note="trial value during calibrate device")
    assert isinstance(out, MobileNPUProfile)
    return out


def _start(profile: MobileNPUProfile, spec: FieldSpec) -> float:
    section, _, name = spec.field.partition(".")
    current = getattr(getattr(profile, section), name)
    value = float(current) if current else float(np.sqrt(spec.low * spec.high))
    return float(np.log(min(max(value, spec.low * 1.001), spec.high * 0.999)))


def _log_preds(profile: MobileNPUProfile, names: list[str], x: np.ndarray, figures: Sequence[Figure]) -> np.ndarray:
    trial = with_fitted(profile, dict(zip(names, np.exp(x).tolist())))
    return np.array([np.log(f.predict(trial)) for f in figures])


def fit_group(profile: MobileNPUProfile, group: str, figures: Sequence[Figure], hold_out: set[str],
              base: MobileNPUProfile | None = None) -> GroupFit:
    """Fit ``group``'s fields to its figures not in ``hold_out`` (module docstring)."""
    specs = group_fields(group, base or profile)
    names = [s.field for s in specs]
    used = [f for f in figures if f.name not in hold_out]
    if len(used) < len(specs):
        raise InputError(f"{group} figures", f"must number at least {len(specs)} to fit {', '.join(names)} "
                         f"(figures given: {', '.join(f.name for f in figures) or 'none'}; held out: "
                         f"{', '.join(sorted(hold_out & {f.name for f in figures})) or 'none'})", len(used))
    lo, hi = np.log([s.low for s in specs]), np.log([s.high for s in specs])
    measured = np.log([f.measured for f in used])

    def residuals(x: np.ndarray) -> np.ndarray:
        return _log_preds(profile, names, x, used) - measured

    x0 = np.array([_start(profile, s) for s in specs])
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-4, xtol=1e-12, ftol=1e-12, gtol=1e-12,
                        max_nfev=200)
    x = res.x
    dof = len(used) - len(specs)
    grads = _gradients(profile, names, x, figures)
    cov, quantile, s2 = _covariance(grads[[i for i, f in enumerate(figures) if f.name not in hold_out]],
                                    residuals(x), dof)
    fitted = with_fitted(profile, dict(zip(names, np.exp(x).tolist())))
    results = []
    for i, f in enumerate(figures):
        pred = f.predict(fitted)
        interval = None
        if cov is not None:
            half = quantile * float(np.sqrt(grads[i] @ cov @ grads[i] + s2))
            interval = (pred * float(np.exp(-half)), pred * float(np.exp(half)))
        results.append(FigureFit(name=f.name, group=group, unit=f.unit, source=f.source, measured=f.measured,
                                 predicted=pred, used=f.name not in hold_out, interval=interval))
    intervals: dict[str, tuple[float, float] | None] = {}
    for j, s in enumerate(specs):
        if cov is None:
            intervals[s.field] = None
            continue
        half = quantile * float(np.sqrt(max(cov[j, j], 0.0)))
        intervals[s.field] = (max(s.low, float(np.exp(x[j] - half))), min(s.high, float(np.exp(x[j] + half))))
    values = dict(zip(names, np.exp(x).tolist()))
    at_bound = tuple(s.field for s in specs if values[s.field] <= s.low * 1.01 or values[s.field] >= s.high * 0.99)
    return GroupFit(group=group, fields=specs, values=values, intervals=intervals, figures=tuple(results),
                    at_bound=at_bound, dof=dof)


def _gradients(profile: MobileNPUProfile, names: list[str], x: np.ndarray, figures: Sequence[Figure]) -> np.ndarray:
    """d ln(prediction) / d ln(field) of every figure (central differences)."""
    cols = []
    for j in range(len(x)):
        up, down = x.copy(), x.copy()
        up[j] += _STEP
        down[j] -= _STEP
        cols.append((_log_preds(profile, names, up, figures) - _log_preds(profile, names, down, figures))
                    / (2 * _STEP))
    return np.column_stack(cols)


def _covariance(jac: np.ndarray, resid: np.ndarray, dof: int) -> tuple[np.ndarray | None, float, float]:
    if dof <= 0:
        return None, 0.0, 0.0
    s2 = float(resid @ resid) / dof
    return s2 * np.linalg.pinv(jac.T @ jac), float(student_t.ppf(0.5 + COVERAGE / 2, dof)), s2


def fit_device(base: MobileNPUProfile, figures: Sequence[Figure], hold_out: Sequence[str] = ()) -> DeviceFit:
    """Fit every group that has figures, in :data:`GROUPS` order."""
    known = {f.name for f in figures}
    unknown = [h for h in hold_out if h not in known]
    if unknown:
        raise InputError("--hold-out", f"must name figures of the logs ({', '.join(sorted(known))})",
                         ",".join(unknown))
    held = set(hold_out)
    profile, groups = base, []
    for group in GROUPS:
        members = [f for f in figures if f.group == group]
        if not members:
            continue
        fit = fit_group(profile, group, members, held, base)
        profile = with_fitted(profile, fit.values)
        groups.append(fit)
    if not groups:
        raise InputError("logs", "hold no figure moesim can fit (give --llama-bench, --fio or --ttft files)",
                         show_value=False)
    return DeviceFit(groups=tuple(groups), profile=profile)

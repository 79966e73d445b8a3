"""Grid-wide checks, before any point runs: every value of every axis builds a valid run.

A value that no point could run with (an ``inf`` budget, a GPU profile in a prefill grid, a
predictor ``accuracy:7``, an unknown routing, a trace file that is not there) would write an
error row into every point that has it: it is refused instead, with the grid file, the axis
(or ``fixed``) and the value. Each value is checked once, with the other parameters at their
first value, so the check costs one run configuration per value, not per point; what only
a combination makes impossible (a budget below one model's minimum) stays a row of the table.

How big a grid is and how long it would take are here too: :func:`grid_size` counts the
points without expanding them; :func:`estimate_s` times one point.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moesim.config import schema
from moesim.config.schema import Param
from moesim.errors import InputError, format_value
from moesim.simulate import WORKLOADS, OptionRule
from moesim.sweep.params import GridValue, kind_of

__all__ = ["grid_size", "check_values", "check_policy_options", "policy_option_notes", "check_option_rules",
           "option_rule_notes", "estimate_s", "describe_s"]

#: error fields (as the run's checks name them) that are spelled otherwise in a grid
_ALIASES = {"draft_routing": "routing", "overrides": None}

#: a grid's fixed values (or one point's parameters) and its axes, as checked (:mod:`moesim.sweep.grid`)
Fixed = Mapping[str, GridValue]
Axes = Mapping[str, list[GridValue]]


def grid_size(axes: dict[str, list[Any]]) -> int:
    """The number of points: the product of the axes' lengths (1 for a grid without axes).

    >>> grid_size({"model": ["a", "b"], "tokens": [1, 2, 3]})
    6
    """
    return math.prod(len(v) for v in axes.values())


def _split(params: Mapping[str, GridValue]) -> tuple[dict[str, GridValue], dict[str, float]]:
    return ({k: v for k, v in params.items() if "." not in k},
            {k: float(v) for k, v in params.items() if "." in k})


def _where(name: str | None, fixed: Fixed, axes: Axes, params: Fixed, varied: str | None, message: str = ""
           ) -> tuple[str, GridValue | None]:
    """The grid entry to blame: the parameter the error names (as its field, or a profile number
    ``section.field`` quoted in its message), else the one being varied."""
    quoted = [k for k in (*axes, *fixed) if "." in k and k in message]
    for candidate in (name, *quoted, varied):
        if candidate is None:
            continue
        if candidate in axes:
            values = axes[candidate]
            i = next(i for i, v in enumerate(values) if v is params[candidate] or v == params[candidate])
            return f"axes.{candidate}[{i}]", values[i]
        if candidate in fixed:
            return f"fixed.{candidate}", fixed[candidate]
    return "fixed", None


def _field_name(field: str) -> str | None:
    """The run field an error names: its field, or the first word of a validator's sentence
    (``tokens must be <= 4,096 for ...``)."""
    words = field.split()
    name = (words[0] if words else "").lstrip("-").replace("-", "_").split(".")[0].split("[")[0]
    return _ALIASES.get(name, name)


def _check_one(workload: str, params: Fixed) -> None:
    from moesim.sweep.run_point import build_run

    trace = params.get("trace")
    if trace is not None and not Path(str(trace)).is_file():
        raise InputError("trace", "must name an existing trace file (.parquet)", trace)
    plain, overrides = _split(params)
    build_run(workload, plain, overrides)


def check_values(workload: str, fixed: Fixed, axes: Axes, source: str) -> None:
    """Refuse the grid if a fixed value, or any one value of an axis, cannot make a valid run."""
    base = {**fixed, **{name: values[0] for name, values in axes.items()}}
    trials: list[tuple[str | None, dict[str, GridValue]]] = [(None, base)]
    trials += [(name, {**base, name: value}) for name, values in axes.items() for value in values[1:]]
    for varied, params in trials:
        try:
            _check_one(workload, params)
        except InputError as exc:
            where, value = _where(_field_name(exc.field), fixed, axes, params, varied, str(exc))
            shown = "" if where == "fixed" else f" = {format_value(value)}"
            raise InputError(f"{where}{shown}", f"cannot run any point: {exc}", show_value=False,
                             source=source) from None


def _variant_options(workload: str, fixed: Fixed, axes: Axes
                     ) -> list[tuple[str, Param, list[Any], list[Any]]]:
    """Each option of a section's variants the grid sets (a policy's ``banks``, a routing's
    ``routing_window``) -> (its name, its parameter, the kinds of its section the grid runs, those
    that take it)."""
    flat = schema.params(WORKLOADS[workload].run_type)
    out = []
    for name in [*fixed, *axes]:
        param = flat.get(name)
        if param is None or param.kinds is None:
            continue
        kind = flat[param.field]
        given = axes.get(kind.name, [fixed.get(kind.name, kind.default)])
        kinds = list(dict.fromkeys(kind_of(kind, value) for value in given))
        out.append((name, param, kinds, [k for k in kinds if k in param.kinds]))
    return out


def _names(kinds: list[Any]) -> str:
    return ", ".join("none given" if k is None else str(k) for k in kinds)


def check_policy_options(workload: str, fixed: Fixed, axes: Axes, source: str) -> None:
    """An option of a section's variants that no variant of the grid takes (a policy option no policy
    of the grid takes) would be dropped from every point (an axis of it would run the same point
    several times): refused."""
    for name, param, kinds, users in _variant_options(workload, fixed, axes):
        if not users:
            where = f"axes.{name}" if name in axes else f"fixed.{name}"
            raise InputError(where, f"applies to {param.field} {', '.join(sorted(param.kinds or ()))}, and no "
                             f"{param.field} of the grid takes it", _names(kinds), source=source)


def policy_option_notes(workload: str, fixed: Fixed, axes: Axes) -> list[str]:
    """One line per option of a section's variants that some variants of the grid do not take (their
    points run without it: the documented rule, said once)."""
    notes = []
    for name, param, kinds, users in _variant_options(workload, fixed, axes):
        skip = [k for k in kinds if k not in users]
        if skip:
            notes.append(f"{name} applies to {param.field} {', '.join(sorted(param.kinds or ()))}; the points of "
                         f"{param.field} {_names(skip)} run without it")
    return notes


def _rule(workload: str) -> tuple[OptionRule, tuple[str, ...]] | None:
    """The workload's rule of which options a run reads, and the fields it looks at (the CLI's)."""
    entry = WORKLOADS[workload]
    return None if entry.ignored_option is None else (entry.ignored_option, entry.options_depend_on)


def _ignoring(workload: str, fixed: Fixed, axes: Axes
              ) -> list[tuple[str, list[tuple[dict[str, GridValue], str]], bool]]:
    """Each option the grid sets that some of its points do not read -> (the settings of those
    points that decide it, with the reason; whether no point reads it). The settings are the
    product of the deciding fields' values only, so a large grid costs no more than a small one."""
    found = _rule(workload)
    if found is None:
        return []
    why, depends = found
    controls = {c: axes[c] if c in axes else [fixed[c]] for c in depends if c in axes or c in fixed}
    combos = [dict(zip(controls, values)) for values in itertools.product(*controls.values())]
    out = []
    for name in [*fixed, *axes]:
        reasons = [(combo, reason) for combo in combos if (reason := why(name, combo)) is not None]
        if reasons:
            out.append((name, reasons, len(reasons) == len(combos)))
    return out


def check_option_rules(workload: str, fixed: Fixed, axes: Axes, source: str) -> None:
    """An option that no point of the grid reads (``gamma`` without a selector, ``pinned_share``
    with LRU) is refused, as the CLI refuses it: every value of it would run the same points."""
    for name, reasons, none in _ignoring(workload, fixed, axes):
        if none:
            where, value = (f"axes.{name}", axes[name]) if name in axes else (f"fixed.{name}", fixed[name])
            raise InputError(where, f"{reasons[0][1]}, and no point of the grid reads it (each value would run the "
                             "same points)", value, source=source)


def option_rule_notes(workload: str, fixed: Fixed, axes: Axes) -> list[str]:
    """One line per option that some points of the grid do not read (they run without it)."""
    notes = []
    for name, reasons, none in _ignoring(workload, fixed, axes):
        if not none:
            which = dict.fromkeys(", ".join(f"{k} {v}" for k, v in combo.items() if k in axes) for combo, _ in reasons)
            notes.append(f"{name} {reasons[0][1]}; the points of {'; '.join(w for w in which if w)} run without it")
    return notes


def estimate_s(workload: str, params: Fixed) -> float:
    """Seconds one point takes here, timed on ``params`` (a point whose inputs make it impossible
    ends early, so the estimate errs low for such a point and high when the first run also
    loads the routing that the others reuse)."""
    from moesim.sweep.run_point import run_point

    t0 = time.perf_counter()
    run_point({"workload": workload, "index": 0, "id": "estimate", "params": dict(params)})
    return time.perf_counter() - t0


def describe_s(seconds: float) -> str:
    """``90`` -> ``'1.5 min'``: a duration in the unit that reads best.

    >>> describe_s(42), describe_s(5400), describe_s(3 * 86400)
    ('42 s', '1.5 h', '3.0 days')
    """
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"

"""Grid files: ``[fixed]`` parameters and ``[axes]`` lists, validated, expanded into points.

A grid is the cartesian product of its axes, in the order they appear in the file (the
last axis varies fastest). Parameter names are the flat parameters of the workload's run model
(:mod:`moesim.sweep.params`, the workloads of :data:`moesim.simulate.WORKLOADS`); a dotted name
(``ufs.effective_read_bw_GBps``) overrides one number of the device profile.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict, create_model

from moesim.config.catalog import load_model
from moesim.config.loading import read_toml, validate_data
from moesim.config.profiles import load_profile, override_profile
from moesim.errors import InputError, deprecated
from moesim.simulate import WORKLOADS
from moesim.sweep.check import (
    check_option_rules,
    check_policy_options,
    check_values,
    grid_size,
    option_rule_notes,
    policy_option_notes,
)
from moesim.sweep.params import GridValue, axes_model, grid_params
from moesim.sweep.run_point import Task
from moesim.sweep.values import (
    check_duplicates,
    check_kinds,
    check_override_names,
    check_override_values,
    takes_switch,
)
from moesim.typing_ import TOMLValue

__all__ = ["Point", "Grid", "GridTooLarge", "parse_grid", "load_grid", "MAX_GRID_POINTS"]

#: the most points a grid may expand to: each point costs ~20 us and ~1 KB to expand (2,000,000:
#: ~40 s and ~2 GB before the first point runs), so a larger grid is refused before expanding
MAX_GRID_POINTS = 2_000_000

_WORKLOAD_NAMES = " or ".join(f'"{w}"' for w in WORKLOADS)


@dataclass(frozen=True)
class Point:
    """One run of the sweep: its position, a stable id and the parameters the grid gives."""

    index: int
    id: str
    params: dict[str, GridValue]

    def task(self, workload: str) -> Task:
        """Plain picklable data for a worker."""
        return {"workload": workload, "index": self.index, "id": self.id, "params": dict(self.params)}


@dataclass(frozen=True, kw_only=True)
class Grid:
    workload: str
    source: str
    fixed: dict[str, GridValue]
    axes: dict[str, list[GridValue]]
    points: tuple[Point, ...]
    hash: str

    @property
    def columns(self) -> list[str]:
        """Input columns of the results, in grid order."""
        return list(self.fixed) + list(self.axes)

    def ignored_options(self) -> list[str]:
        """One line per option of the grid that some of its points do not read: a policy option
        some policies do not take, a decode or specdecode option some settings ignore (those points
        run without it, as the CLI would refuse it): what the CLI prints once."""
        return (policy_option_notes(self.workload, self.fixed, self.axes)
                + option_rule_notes(self.workload, self.fixed, self.axes))


class GridTooLarge(InputError):
    """The grid has more points than the caller accepts (``max_points``): the CLI adds an estimate
    of the time and asks for ``--yes`` or ``--max-points``."""

    def __init__(self, points: int, limit: int, workload: str, first: dict[str, GridValue], source: str) -> None:
        self.points, self.limit, self.workload, self.first = points, limit, workload, first
        super().__init__("grid", f"has {points:,} points, more than {limit:,}", show_value=False, source=source)


def _flatten(table: dict[str, TOMLValue], prefix: str = "") -> dict[str, TOMLValue]:
    out: dict[str, TOMLValue] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _split(section: str, table: TOMLValue, source: str) -> tuple[dict[str, TOMLValue], dict[str, TOMLValue]]:
    """(plain parameters, dotted device overrides) of one section (the overrides' names and values
    are checked once the device is known: :mod:`moesim.sweep.values`)."""
    if not isinstance(table, dict):
        raise InputError(section, "must be a table", table, source=source)
    flat = _flatten(table)
    plain = {k: v for k, v in flat.items() if "." not in k}
    overrides = {k: v for k, v in flat.items() if "." in k}
    return plain, overrides


def _point_id(params: Mapping[str, GridValue]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


#: decode parameters renamed in this release (one word per meaning), old -> new; a grid that still
#: uses an old name runs, with a deprecation line
_DECODE_RENAMED = {"spec": "selector"}


def _renamed_decode(data: dict[str, TOMLValue], fixed: dict[str, TOMLValue], axes: dict[str, TOMLValue]
                    ) -> dict[str, TOMLValue]:
    """Rename old decode parameter names in place in ``fixed``/``axes`` and in the raw ``data``."""
    out: dict[str, TOMLValue] = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for table in (fixed, axes, out.get("fixed", {}), out.get("axes", {})):
        for old, new in _DECODE_RENAMED.items():
            if isinstance(table, dict) and old in table and new not in table:
                deprecated(f"grid parameter {old!r}", repr(new))
                table[new] = table.pop(old)
    return out


def _tables(data: dict[str, TOMLValue], source: str) -> tuple[str, dict[str, TOMLValue], dict[str, TOMLValue],
                                                              dict[str, list[TOMLValue]], dict[str, list[TOMLValue]],
                                                              dict[str, list[TOMLValue]]]:
    """(workload, plain fixed, fixed overrides, plain axes, axis overrides, every axis in the file's
    order with old names renamed)."""
    unknown = sorted(set(data) - {"fixed", "axes"})
    if unknown:
        raise InputError(unknown[0], "is not a known table (use [fixed] and [axes])", show_value=False, source=source)
    fixed, fixed_over = _split("fixed", data.get("fixed", {}), source)
    axes, axes_over = _split("axes", data.get("axes", {}), source)
    workload = fixed.pop("workload", None)
    if workload is None:
        raise InputError("fixed.workload", f"is required ({_WORKLOAD_NAMES})", show_value=False, source=source)
    if not isinstance(workload, str) or workload not in WORKLOADS:
        raise InputError("fixed.workload", f"must be {_WORKLOAD_NAMES}", workload, source=source)
    if workload == "decode":
        data = _renamed_decode(data, fixed, axes)
    lists: dict[str, list[TOMLValue]] = {}
    for name, values in {**axes, **axes_over}.items():
        if not isinstance(values, list):
            raise InputError(f"axes.{name}", "must be a list of values", values, source=source)
        if not values:
            raise InputError(f"axes.{name}", "must be a non-empty list", values, source=source)
        lists[name] = values
    table = data.get("axes", {})
    all_axes = {k: v for k, v in _flatten(table if isinstance(table, dict) else {}).items() if isinstance(v, list)}
    return workload, fixed, fixed_over, {k: lists[k] for k in axes}, {k: lists[k] for k in axes_over}, all_axes


def _checked(value: TOMLValue) -> GridValue:
    """A value the grid's checks let through: a number, a name or a switch (a parameter's kind or a
    profile override's number; never a table, a list or a date)."""
    assert isinstance(value, (str, int, float, bool)), value
    return value


def _check_grid(workload: str, fixed: dict[str, TOMLValue], fixed_over: dict[str, TOMLValue],
                axes: dict[str, list[TOMLValue]], axes_over: dict[str, list[TOMLValue]],
                all_axes: dict[str, list[TOMLValue]],
                source: str) -> tuple[dict[str, GridValue], dict[str, list[GridValue]]]:
    """Every check of the values, in the order a reader would fix them: each value's kind, the
    parameters' names and ranges, duplicates, the device overrides, one run built for every value,
    then options that no point reads (:mod:`moesim.sweep.values`, :mod:`moesim.sweep.check`).
    Returns every fixed value and every axis, as checked."""
    params_model = grid_params(workload)
    _no_booleans({n for n, f in params_model.model_fields.items() if takes_switch(f.annotation)}, fixed, axes, source)
    check_kinds(params_model, fixed, axes, source)
    both = sorted((set(fixed) | set(fixed_over)) & (set(axes) | set(axes_over)))
    if both:
        raise InputError(both[0], "is both in [fixed] and in [axes]", show_value=False, source=source)
    grid_model = create_model("Grid", __config__=ConfigDict(extra="forbid"), fixed=(params_model, ...),
                              axes=(axes_model(workload), ...))
    checked = validate_data(grid_model, {"fixed": fixed, "axes": axes}, source=source)
    normal = checked.model_dump()["axes"]
    check_duplicates(workload, {name: normal[name] for name in axes}, axes, source)
    raw_fixed = {**fixed, **fixed_over}
    _check_names(workload, raw_fixed, all_axes, source)
    check_override_values(fixed_over, axes_over, source)
    check_duplicates(workload, {k: [float(_checked(x)) for x in v] for k, v in axes_over.items()}, axes_over, source)
    all_fixed = {k: _checked(v) for k, v in raw_fixed.items()}
    every_axis = {k: [_checked(x) for x in v] for k, v in all_axes.items()}
    check_policy_options(workload, all_fixed, every_axis, source)
    check_values(workload, all_fixed, every_axis, source)
    check_option_rules(workload, all_fixed, every_axis, source)
    return all_fixed, every_axis


def parse_grid(data: dict[str, TOMLValue], source: str = "grid", max_points: int | None = None) -> Grid:
    """Validate grid data (a parsed TOML document) and expand it into points.

    Every value is checked before anything runs (:func:`_check_grid`); a grid of over
    :data:`MAX_GRID_POINTS` points is refused before it is expanded, and one of over
    ``max_points`` raises :class:`GridTooLarge`."""
    workload, fixed, fixed_over, axes, axes_over, raw_axes = _tables(data, source)
    all_fixed, all_axes = _check_grid(workload, fixed, fixed_over, axes, axes_over, raw_axes, source)
    size = grid_size(all_axes)
    if size > MAX_GRID_POINTS:
        raise InputError("grid", f"has {size:,} points, more than the {MAX_GRID_POINTS:,} a sweep can expand "
                         f"({' x '.join(str(len(v)) for v in all_axes.values())}); split it into several grids",
                         show_value=False, source=source)
    if max_points is not None and size > max_points:
        raise GridTooLarge(size, max_points, workload, {**all_fixed, **{k: v[0] for k, v in all_axes.items()}}, source)
    names = list(all_axes)
    points = []
    for index, combo in enumerate(itertools.product(*all_axes.values())):
        params = {**all_fixed, **dict(zip(names, combo))}
        points.append(Point(index, _point_id({"workload": workload, **params}), params))
    _check_overrides(workload, points, source)
    digest = json.dumps({"workload": workload, "points": [p.params for p in points]}, sort_keys=True)
    return Grid(workload=workload, source=source, fixed=all_fixed, axes=all_axes, points=tuple(points),
                hash=hashlib.sha256(digest.encode()).hexdigest()[:16])


def _no_booleans(switches: set[str], fixed: dict[str, TOMLValue], axes: dict[str, list[TOMLValue]], source: str
                 ) -> None:
    """TOML ``true`` is not a count: pydantic's lax mode would read it as 1 (``switches``: the
    parameters that do take true or false)."""
    for name, value in fixed.items():
        if isinstance(value, bool) and name not in switches:
            raise InputError(f"fixed.{name}", "must be a number or a name, not a boolean", value, source=source)
    for name, values in axes.items():
        for i, value in enumerate(values if isinstance(values, list) and name not in switches else []):
            if isinstance(value, bool):
                raise InputError(f"axes.{name}[{i}]", "must be a number or a name, not a boolean", value,
                                 source=source)


def _check_overrides(workload: str, points: list[Point], source: str) -> None:
    """Every point's device overrides must give a valid profile: checked before any point runs
    (an invalid combination used to abort a sweep half-way and leave its parts behind)."""
    default = grid_params(workload).model_fields["device"].default
    seen: set[str] = set()
    for point in points:
        overrides = {k: v for k, v in point.params.items() if "." in k}
        if not overrides:
            continue
        device = point.params.get("device", default)
        key = json.dumps([device, overrides], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        try:
            override_profile(load_profile(device), {k: float(v) for k, v in overrides.items()})
        except InputError as exc:
            raise InputError(f"point {point.index}", f"has device overrides that make an invalid profile ({exc})",
                             show_value=False, source=source) from None


def _values(name: str, fixed: Mapping[str, TOMLValue], axes: Mapping[str, list[TOMLValue]], default: str
            ) -> list[TOMLValue]:
    if name in axes:
        return list(axes[name])
    return [fixed.get(name, default)]


def _check_names(workload: str, fixed: Mapping[str, TOMLValue], axes: Mapping[str, list[TOMLValue]], source: str
                 ) -> None:
    """Models and devices must exist and overrides must name profile fields (fail before running)."""
    defaults = grid_params(workload).model_fields
    for i, model in enumerate(_values("model", fixed, axes, defaults["model"].default)):
        try:
            load_model(str(model))
        except InputError as exc:
            where = f"axes.model[{i}]" if "model" in axes else "fixed.model"
            raise InputError(where, f"is not a known model ({exc})", model, source=source) from None
    for device in _values("device", fixed, axes, defaults["device"].default):
        try:
            profile = load_profile(str(device))
        except InputError as exc:
            raise InputError("device", f"is not a known device ({exc})", device, source=source) from None
        check_override_names(profile, fixed, axes, source)


def load_grid(path: str | Path, max_points: int | None = None) -> Grid:
    """Read and validate a grid TOML file (``max_points``: see :func:`parse_grid`)."""
    return parse_grid(read_toml(Path(path), "GRID.toml"), source=str(path), max_points=max_points)

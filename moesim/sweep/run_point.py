"""One sweep point -> one flat row: inputs, every metric of the workload's ``--json``, provenance.

Importable by worker processes (local or Dask): the task is plain data and so is the row.
Nested metric dicts are flattened with dots (``memory_GiB.arena``); lists become JSON text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TypedDict

from moesim._version import __version__
from moesim.config.base import field_default
from moesim.config.decode import DecodeRun
from moesim.config.loading import validate_data
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import AnyProfile, load_profile, override_profile, profile_hash
from moesim.config.schema import unflatten
from moesim.config.specdecode import SpecDecodeRun
from moesim.errors import InputError
from moesim.results import flatten_metrics
from moesim.simulate import WORKLOADS
from moesim.sweep.params import GridValue
from moesim.typing_ import JSONValue, Scalar

__all__ = ["run_point", "build_run", "Task", "point_index"]


class Task(TypedDict):
    """One point as plain picklable data for a worker (:meth:`moesim.sweep.grid.Point.task`)."""

    workload: str
    index: int
    id: str
    params: dict[str, GridValue]


def _profile(device: str, overrides: dict[str, float]) -> AnyProfile:
    profile = load_profile(device)
    return override_profile(profile, overrides) if overrides else profile


Run = PrefillRun | SpecDecodeRun | DecodeRun


def build_run(workload: str, params: Mapping[str, GridValue], overrides: dict[str, float]) -> Run:
    """The validated run of one point (no simulation; its device profile is of the workload's kind):
    what a point runs, and what the grid checks for every value before any point runs. A parameter
    of a section applies to the kinds that take it and is ignored by the others (a policy option
    of a grid with several policies)."""
    entry = WORKLOADS[workload]
    run: Run = validate_data(entry.run_type, {**unflatten(entry.run_type, params, strict=False),
                                              "overrides": overrides})
    entry.profile(run.device, overrides)
    return run


def _simulate(workload: str, params: Mapping[str, GridValue], overrides: dict[str, float]) -> dict[str, JSONValue]:
    return WORKLOADS[workload].simulate(build_run(workload, params, overrides)).to_dict()


def run_point(task: Task) -> dict[str, Scalar]:
    """Simulate one point. A run the inputs make impossible (a budget below the minimum,
    a model that does not fit) is a result: ``status = "error"`` and the message."""
    params = task["params"]
    plain = {k: v for k, v in params.items() if "." not in k}
    overrides = {k: float(v) for k, v in params.items() if "." in k}
    row: dict[str, Scalar] = {**params, "workload": task["workload"], "point.index": task["index"],
                           "point.id": task["id"]}
    wall0 = time.perf_counter()
    try:
        metrics = _simulate(task["workload"], plain, overrides)
        row.update({"status": "ok", "error": None})
        row.update(flatten_metrics(metrics))
    except InputError as exc:
        try:
            digest: str | None = profile_hash(_profile(str(plain.get("device", _default_device(task))), overrides))
        except InputError:     # the overrides themselves are invalid: the row says why, no hash
            digest = None
        row.update({"status": "error", "error": str(exc), "config.moesim_version": __version__,
                    "config.profile_hash": digest})
    row["point.wall_s"] = time.perf_counter() - wall0
    return row


def point_index(row: Mapping[str, JSONValue]) -> int:
    """The index of the point a row (or a part read back) is of."""
    index = row["point.index"]
    assert isinstance(index, int), index
    return index


def _default_device(task: Task) -> str:
    device: str = field_default(WORKLOADS[task["workload"]].run_type, "device")
    return device

"""Validation of the simulator against the native streaming executor on this machine.

Each executor case gives four checks: makespan (relative, +-10%) and bubble share (absolute,
+-5 points) predicted from the profile alone, and the same two predicted with the disk rate
the runs themselves saw (which separates the pipeline model from this machine's erratic disk). Predictions use only the calibrated ``host`` profile (micro-benchmarks); the
measured medians come from validation/host_executor_runs.csv (``--remeasure`` redoes both).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import pandas as pd

from moesim.errors import MoesimError
from moesim.validation import Case

__all__ = ["host_cases", "remeasure_host"]


@cache
def _measured() -> dict[str, dict[str, Any]]:
    from moesim.calibrate.host_runs import RUNS_CSV

    if not RUNS_CSV.exists():
        raise MoesimError(f"{RUNS_CSV} not found: run moesim validate --only host/ --remeasure")
    return {str(r["case"]): dict(r) for r in pd.read_csv(RUNS_CSV).to_dict("records")}


@cache
def _predicted(name: str, given_io: bool = False) -> tuple[float, float]:
    from moesim.calibrate.host_runs import CASES, predict_case
    from moesim.spec.device import HostProfile
    from moesim.spec.profiles import load_profile

    profile = load_profile("host")
    assert isinstance(profile, HostProfile)
    case = next(c for c in CASES if c.name == name)
    return predict_case(profile, case, _reference(name, "read_GBps_median") if given_io else None)


def _reference(name: str, key: str) -> float:
    try:
        return float(_measured()[name][key])
    except KeyError:
        raise MoesimError(f"{name}: no measurement in validation/host_executor_runs.csv; use --remeasure") from None


def _pred(name: str, index: int, given_io: bool = False) -> Callable[[], float]:
    return lambda: _predicted(name, given_io)[index]


def _ref(name: str, key: str) -> Callable[[], float]:
    return lambda: _reference(name, key)


def _mape(given_io: bool) -> Callable[[], float]:
    """Mean absolute percentage error of the makespan over every executor case."""
    from moesim.calibrate.host_runs import CASES

    def run() -> float:
        errs = [abs(_predicted(c.name, given_io)[0] / _reference(c.name, "makespan_s_median") - 1.0) for c in CASES]
        return sum(errs) / len(errs)
    return run


def host_cases() -> list[Case]:
    from moesim.calibrate.host_runs import CASES

    src = f"mean |error| of the predicted makespan over the {len(CASES)} executor cases (issue acceptance: <= 10%)"
    out = [Case("host/makespan-mape", 0.0, src, 0.0, "range", _mape(False), fitted_to=False, unit="MAPE",
                low=0.0, high=0.10),
           Case("host/makespan-mape-given-io", 0.0, src + "; each case predicted with the disk rate its runs saw",
                0.0, "range", _mape(True), fitted_to=False, unit="MAPE", low=0.0, high=0.10)]
    for c in CASES:
        src = "native executor on this machine, median of repeats (validation/host_executor_runs.csv)"
        out.append(Case(f"{c.name}/makespan", 0.0, src, 0.10, "relative", _pred(c.name, 0), fitted_to=False,
                        unit="s", reference_fn=_ref(c.name, "makespan_s_median")))
        out.append(Case(f"{c.name}/bubble", 0.0, src, 0.05, "absolute", _pred(c.name, 1), fitted_to=False,
                        unit="share", reference_fn=_ref(c.name, "bubble_share_median")))
        given = src + "; predicted with the disk rate the runs themselves saw (checks the pipeline model, not the disk)"
        out.append(Case(f"{c.name}/makespan-given-io", 0.0, given, 0.10, "relative", _pred(c.name, 0, True),
                        fitted_to=False, unit="s", reference_fn=_ref(c.name, "makespan_s_median")))
        out.append(Case(f"{c.name}/bubble-given-io", 0.0, given, 0.05, "absolute", _pred(c.name, 1, True),
                        fitted_to=False, unit="share", reference_fn=_ref(c.name, "bubble_share_median")))
    return out


def remeasure_host(workdir: str = "/var/tmp/moesim-host") -> None:
    """Recalibrate the host profile and rerun the executor cases on this machine."""
    from pathlib import Path

    from moesim.calibrate.host import measure_and_fit, render_host_profile
    from moesim.calibrate.host_runs import RUNS_CSV, measure_cases
    from moesim.spec.profiles import load_profile, profile_dir

    fit, paths, fs, dev = measure_and_fit(RUNS_CSV.parent / "host", Path(workdir))
    target = profile_dir() / "host.toml"
    tmp = target.with_suffix(".toml.tmp")
    tmp.write_text(render_host_profile(fit, ", ".join(str(p) for p in paths.values()), fs, dev))
    load_profile(tmp)
    tmp.replace(target)
    measure_cases(Path(workdir))
    _measured.cache_clear()
    _predicted.cache_clear()

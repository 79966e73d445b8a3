"""Validation of the simulator against the native streaming executor on this machine.

Each executor case gives six checks, makespan (relative, +-10%) and bubble share (absolute,
+-5 points): medians of the runs predicted from the profile alone (its median disk rate);
the same predicted with the disk rate the runs themselves saw (separates the pipeline model
from this machine's erratic disk); and means of the runs against the mean prediction over the
profile's disk-rate deciles (the disk as a random variable: these virtual disks switch
between about 1.2 and 2.8 GB/s from run to run, and the median of a two-mode sample jumps
between the modes while its mean does not). Aggregate cases give the makespan MAPE of each
kind. Predictions use only the calibrated ``host`` profile (micro-benchmarks and a disk
probe of its own file); measurements come from validation/host_executor_runs.csv
(``--remeasure`` redoes calibration and runs together).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Literal

import pandas as pd

from moesim.errors import MoesimError
from moesim.validate.registry import Case, Expectation

__all__ = ["host_cases", "remeasure_host"]


@cache
def _measured() -> dict[str, dict[str, Any]]:
    from moesim.calibrate.host_runs import RUNS_CSV

    if not RUNS_CSV.exists():
        raise MoesimError(f"{RUNS_CSV} not found: run moesim validate --only host/ --remeasure")
    return {str(r["case"]): dict(r) for r in pd.read_csv(RUNS_CSV).to_dict("records")}


#: "median": the profile's median disk rate; "given-io": the runs' own rate; "mean": over the disk deciles
Mode = Literal["median", "given-io", "mean"]


@cache
def _predicted(name: str, mode: Mode = "median") -> tuple[float, float]:
    from moesim.calibrate.host_runs import CASES, predict_case, predict_case_expected
    from moesim.config.device import HostProfile
    from moesim.config.profiles import load_profile

    profile = load_profile("host")
    assert isinstance(profile, HostProfile)
    case = next(c for c in CASES if c.name == name)
    if mode == "mean":
        return predict_case_expected(profile, case)
    return predict_case(profile, case, _reference(name, "read_GBps_median") if mode == "given-io" else None)


def _reference(name: str, key: str) -> float:
    try:
        return float(_measured()[name][key])
    except KeyError:
        raise MoesimError(f"{name}: no measurement in validation/host_executor_runs.csv; use --remeasure") from None


def _pred(name: str, index: int, mode: Mode = "median") -> Callable[[], float]:
    return lambda: _predicted(name, mode)[index]


def _ref(name: str, key: str) -> Callable[[], float]:
    return lambda: _reference(name, key)


def _mape(mode: Mode) -> Callable[[], float]:
    """Mean absolute percentage error of the makespan over every executor case."""
    from moesim.calibrate.host_runs import CASES

    key = "makespan_s_mean" if mode == "mean" else "makespan_s_median"

    def run() -> float:
        errs = [abs(_predicted(c.name, mode)[0] / _reference(c.name, key) - 1.0) for c in CASES]
        return sum(errs) / len(errs)
    return run


def _where() -> str:
    """'<machine>, <date>' of the committed measurement, or 'this machine' before the first one."""
    from moesim.calibrate.host_runs import RUNS_CSV

    try:
        row = pd.read_csv(RUNS_CSV, nrows=1).iloc[0]
        return f"{row['machine']}, measured {row['measured_at']}"
    except (OSError, KeyError, IndexError, pd.errors.ParserError):
        return "this machine"


_DISK = "docs/native-cpu.md, 'The disk of these machines'"
#: the checks that miss on the committed measurement (validation/host_executor_runs.csv,
#: 2026-12-04, after issue 36's read rule) with the committed host profile; a --remeasure replaces
#: both, then review these
_MISSES: dict[str, tuple[str, ...]] = {
    "host/olmoe4-t64-g8b4q2-nonffn": ("makespan", "bubble"),
    "host/olmoe4-t64-g8b4q2-after": ("makespan", "bubble", "makespan-mean", "bubble-mean"),
    "host/olmoe4-t128-g4b2q1-nonffn": ("makespan", "makespan-mean", "bubble-mean"),
    "host/small-t512-g2b6q3-after": ("makespan", "bubble", "makespan-given-io", "bubble-given-io", "makespan-mean",
                                     "bubble-mean"),
}
_WHY_DISK = ("committed measurement: this machine's virtual disk reads at about 1.2 or 2.5-2.8 GB/s from run to "
             f"run, so a prediction from the profile's disk rate misses some cases ({_DISK})")
_WHY_MODEL = ("committed measurement: even at the runs' own disk rate one case (small model, 512 tokens, G=2 B=6 "
              f"Q=3, after-routing) misses, makespan by 11% and its bubble by more than 5 points ({_DISK})")


def _expect(name: str, check: str) -> Expectation:
    if check not in _MISSES.get(name, ()):
        return {}
    return {"expect": "miss", "why": _WHY_MODEL if check.endswith("given-io") else _WHY_DISK}


def host_cases() -> list[Case]:
    from moesim.calibrate.host_runs import CASES

    where = _where()

    src = (f"mean |error| of the predicted makespan over the {len(CASES)} executor cases on {where} "
           "(issue acceptance: <= 10%)")
    mean_src = (f"native executor on {where}, mean of repeats (validation/host_executor_runs.csv); predicted as "
                "the mean over the profile's disk-rate deciles (the disk as a random variable)")
    out = [Case(name="host/makespan-mape", reference=0.0, source=src, tolerance=0.0, tolerance_kind="range",
                predict=_mape("median"), fitted_to=False, unit="MAPE", low=0.0, high=0.10),
           Case(name="host/makespan-mape-given-io", reference=0.0,
                source=src + "; each case predicted with the disk rate its runs saw", tolerance=0.0,
                tolerance_kind="range", predict=_mape("given-io"), fitted_to=False, unit="MAPE", low=0.0, high=0.10),
           Case(name="host/makespan-mape-mean", reference=0.0,
                source=src + "; means of runs against predictions over the disk deciles", tolerance=0.0,
                tolerance_kind="range", predict=_mape("mean"), fitted_to=False, unit="MAPE", low=0.0, high=0.10)]
    src = f"native executor on {where}, median of repeats (validation/host_executor_runs.csv)"
    given = src + "; predicted with the disk rate the runs themselves saw (checks the pipeline model, not the disk)"
    #: (check, index of the prediction, prediction mode, measured column, source, tolerance)
    checks: tuple[tuple[str, int, Mode, str, str, float], ...] = (
        ("makespan", 0, "median", "makespan_s_median", src, 0.10),
        ("bubble", 1, "median", "bubble_share_median", src, 0.05),
        ("makespan-given-io", 0, "given-io", "makespan_s_median", given, 0.10),
        ("bubble-given-io", 1, "given-io", "bubble_share_median", given, 0.05),
        ("makespan-mean", 0, "mean", "makespan_s_mean", mean_src, 0.10),
        ("bubble-mean", 1, "mean", "bubble_share_mean", mean_src, 0.05))
    for c in CASES:
        for check, index, mode, key, source, tol in checks:
            out.append(Case(name=f"{c.name}/{check}", reference=0.0, source=source, tolerance=tol,
                            tolerance_kind="absolute" if index else "relative", predict=_pred(c.name, index, mode),
                            fitted_to=False, unit="share" if index else "s", reference_fn=_ref(c.name, key),
                            **_expect(c.name, check)))
    return out


def remeasure_host(workdir: str = "/var/tmp/moesim-host") -> None:
    """Recalibrate the host profile and rerun the executor cases on this machine.

    The disk rate is taken over the calibration probe and one more probe run before each
    validation round: these virtual disks drift over minutes, and a profile calibrated at
    another time than the runs it predicts measures a different disk. The probe reads its own
    file with its own configurations; no validation run enters the profile."""
    from pathlib import Path

    import pandas as pd

    from moesim.calibrate.host import measure_and_fit, probe_stream_bw, render_host_profile, with_disk_probe
    from moesim.calibrate.host_runs import RUNS_CSV, measure_cases
    from moesim.config.profiles import profile_dir, write_profile
    from moesim.files import atomic_path

    work = Path(workdir)
    fit, paths, fs, dev = measure_and_fit(RUNS_CSV.parent / "host", work)
    probes = [pd.read_csv(paths["stream_probe"])]

    def probe(round_: int) -> None:
        table = probe_stream_bw(work, repeats=1)[1]
        probes.append(table.assign(repeat=table.repeat + 100 * (round_ + 1)))

    measure_cases(work, before_round=probe)
    table = pd.concat(probes, ignore_index=True)
    with atomic_path(paths["stream_probe"]) as tmp_csv:
        table.to_csv(tmp_csv, index=False)
    fit = with_disk_probe(fit, table)
    note = f"; {len(probes)} probes, one before each of {len(probes) - 1} validation rounds"
    write_profile(render_host_profile(fit, ", ".join(str(p) for p in paths.values()), fs, dev, note),
                  profile_dir() / "host.toml")
    _measured.cache_clear()
    _predicted.cache_clear()

"""``moesim compare --devices A,B``: devices side by side for one model (a mode of ``compare``)."""

from __future__ import annotations

from typing import Any

import click

from moesim.cli.output import emit_json, emit_table, parse_int_list
from moesim.errors import InputError, MoesimError
from moesim.inputs import check_input, exists
from moesim.progress import track

__all__ = ["compare_devices_mode"]


def _iv(value: float | None, interval: Any, digits: int) -> str:
    if value is None:
        return "-"
    lo, hi = interval or (value, value)
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _check_device_files(names: list[str]) -> None:
    """A device given by path must be a regular file (a FIFO is never waited on): refused under
    ``--devices``, before any profile is loaded."""
    from moesim.config.profiles import profile_names

    bundled = set(profile_names())
    for name in names:
        if name not in bundled and (name.endswith(".toml") or exists(name)):
            check_input(name, "--devices", "config")


def _refuse_policy_options(baseline: str | None, plot: str | None) -> None:
    """``--baseline`` and ``--plot`` speak of policies of one device: refused under ``--devices``."""
    if baseline is not None:
        raise InputError("--baseline", "compares policies; with --devices the first device is the reference",
                         baseline)
    if plot is not None:
        raise InputError("--plot", "draws policies of one device; it is not available with --devices", plot)


def compare_devices_mode(model: str, devices: str, tokens: str, policies: str | None, baseline: str | None,
                         memory_budget_gib: float | None, overrides: dict[str, float], protocol: dict[str, str],
                         seed: int, plot: str | None, quiet: bool, as_json: bool) -> None:
    """Print (or emit as JSON) one row per (prompt length, policy, device); the first device is the reference."""
    from moesim.report.compare import global_failure
    from moesim.report.compare_devices import compare_devices, parse_devices

    _refuse_policy_options(baseline, plot)
    names = parse_devices(devices)
    _check_device_files(names)
    chosen = [p.strip() for p in policies.split(",")] if policies else ["estream"]
    show = False if quiet else None
    rows = compare_devices(model, names, parse_int_list(tokens, "--tokens"), chosen, memory_budget_gib, overrides,
                           seed, progress=lambda runs: track(runs, f"{runs[0].tokens} tokens", show),
                           protocol=protocol)
    failure = global_failure(rows)
    if failure is not None:
        raise MoesimError(failure.replace("no policy can run", "no device can run"))
    if as_json:
        emit_json({"model": model, "devices": names, "reference": names[0], **protocol, "rows": rows})
        return
    click.echo(f"{model} on {', '.join(names)}; speedup and energy ratio against {names[0]} (above 1 = better); "
               "[90% interval]")
    table = []
    for r in rows:
        if r["error"]:
            table.append((r["tokens"], r["policy"], r["device"], "-", "-", "-", "-", "-", "-", "-",
                          "cannot run: " + r["error"]))
            continue
        fits = "yes" if r["config"]["fits_device_memory"] else "no"
        table.append((r["tokens"], r["policy"], r["device"], _iv(r["ttft_s"], r["ttft_s_interval"], 3),
                      f"{r['tokens_per_s']:.0f}", _iv(r["peak_memory_GiB"], r["peak_memory_GiB_interval"], 2),
                      f"{fits} ({r['usable_GiB']:g} GiB)", _iv(r["energy_j"], r["energy_j_interval"], 2),
                      "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                      "-" if r["energy_ratio"] is None else f"{r['energy_ratio']:.2f}x", r["bound"]))
    emit_table(["tokens", "policy", "device", "ttft_s [90%]", "tok/s", "peak_gib [90%]", "fits (usable)",
                "energy_j [90%]", "speedup", "energy_ratio", "bound"], table)

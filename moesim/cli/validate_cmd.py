"""``moesim validate`` and ``moesim calibrate``: predictions against figures, and fitting."""

from __future__ import annotations

from pathlib import Path

import click

from moesim.cli.output import emit_json, emit_table
from moesim.config.catalog import DEFAULT_PHONE_DEVICE
from moesim.files import write_text_atomic
from moesim.progress import track
from moesim.validate.registry import CaseResult

__all__ = ["validate", "calibrate"]


@click.command()
@click.option("--only", metavar="SUBSTRING", help="Run only the cases whose name contains SUBSTRING.")
@click.option("--report", type=click.Path(dir_okay=False), default="docs/validation.md", show_default=True,
              help="Markdown report written on a full run (when its folder exists).")
@click.option("--remeasure", is_flag=True, help="Re-run the native measurements (host/ cases) on this machine first.")
@click.option("--strict", is_flag=True, help="A case that cannot run here (a missing tool) is an error too.")
@click.option("--quiet", is_flag=True, help="No progress bar (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def validate(only: str | None, report: str, remeasure: bool, strict: bool, quiet: bool, as_json: bool) -> None:
    """Run every validation case this machine can run; report the others as skipped with the reason.

    Exit 1 when a case that ran fails (or, with --strict, when one could not run)."""
    from moesim.validate.cases import registry
    from moesim.validate.registry import render_markdown, run_cases

    if remeasure:
        from moesim.validate.host import remeasure_host

        remeasure_host()
    cases = [c for c in registry() if not only or only in c.name]
    results = run_cases(list(track(cases, "validation cases", show=False if quiet else None)))
    if only is None and Path(report).parent.is_dir():
        write_text_atomic(render_markdown(results), report)
    if as_json:
        emit_json({"cases": [r.to_dict() for r in results]})
    else:
        rows = [(r.name, r.reference_text, "-" if r.skipped else f"{r.predicted:.4g}",
                 "" if r.skipped else (f"{r.error:+.1%}" if r.tolerance_kind != "absolute" else f"{r.error:+.4f}"),
                 "fitted" if r.fitted_to else "held out",
                 "skipped" if r.skipped else ("pass" if r.passed else "FAIL")) for r in results]
        emit_table(["case", "reference", "predicted", "error", "kind", "result"], rows)
        for reason, names in _skips(results).items():
            click.echo(f"skipped {len(names)} case(s) ({_group(names)}): {reason}", err=True)
    if not results:
        raise click.UsageError(f"--only {only!r} matches no validation case")
    if any(not r.passed and not r.skipped for r in results) or (strict and any(r.skipped for r in results)):
        raise click.exceptions.Exit(1)


def _skips(results: list[CaseResult]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in results:
        if r.skipped:
            out.setdefault(r.skipped, []).append(r.name)
    return out


def _group(names: list[str]) -> str:
    prefixes = sorted({n.split("/")[0] + "/" for n in names})
    return ", ".join(prefixes)


@click.group()
def calibrate() -> None:
    """Fit device-profile numbers to published figures or native measurements."""


@calibrate.command("estream")
@click.option("--device", default=DEFAULT_PHONE_DEVICE, show_default=True, metavar="NAME|PATH")
@click.option("--write/--no-write", default=False, help="Write the fitted numbers into the profile file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_estream(device: str, write: bool, as_json: bool) -> None:
    """Fit the HTP's unpublished rates (bounded) to llama.cpp's dense curve and the EStream TTFT; CPU rates too."""
    from moesim.calibrate.estream import fit_cpu, fit_estream, with_values, write_fit
    from moesim.config.profiles import profile_dir, profile_names
    from moesim.simulate.prefill import mobile_profile

    profile = mobile_profile(device)
    fit = fit_estream(profile)
    cpu = fit_cpu(with_values(profile, fit.values))
    if fit.at_bound:
        raise click.ClickException(f"calibration failed: {', '.join(fit.at_bound)} fitted at a bound "
                                   "(a mechanism is missing; the profile is left unchanged)")
    if write:
        path = profile_dir() / f"{device}.toml" if device in profile_names() else Path(device)
        write_fit(path, fit, cpu)
    if as_json:
        emit_json({"values": {**fit.values, **cpu}, "predictions": fit.predictions,
                   "errors": fit.errors, "cost": fit.cost, "written": write})
        return
    emit_table(["field", "fitted"], [(k, f"{v:.6g}") for k, v in {**fit.values, **cpu}.items()])
    emit_table(["target", "predicted", "error"], [(k, f"{fit.predictions[k]:.4f}", f"{v:+.4f}")
                                                 for k, v in fit.errors.items()])


@calibrate.command("host")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="validation/host", show_default=True,
              help="Folder for the measured CSV files.")
@click.option("--workdir", type=click.Path(file_okay=False), default="/var/tmp/moesim-host", show_default=True,
              help="Where the read benchmark's file is created (needs ~1 GiB; direct I/O).")
@click.option("--quick", is_flag=True, help="Fewer sizes and repeats (minutes instead of tens of minutes).")
@click.option("--write/--no-write", default=True, help="Write device_profiles/host.toml.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_host(out_dir: str, workdir: str, quick: bool, write: bool, as_json: bool) -> None:
    """Build native_ref/cpu, run its micro-benchmarks and fit the host profile."""
    from moesim.calibrate.host import measure_and_fit, render_host_profile
    from moesim.config.profiles import profile_dir, write_profile

    fit, paths, fs, dev = measure_and_fit(Path(out_dir), Path(workdir), quick)
    text = render_host_profile(fit, ", ".join(str(p) for p in paths.values()), fs, dev)
    if write:
        write_profile(text, profile_dir() / "host.toml")
    values = {k: v for k, v in fit.__dict__.items()
              if k not in ("residuals", "read_bw_spread_GBps", "read_bw_deciles_GBps")}
    if as_json:
        emit_json({"values": values, "residuals": fit.residuals, "read_bw_spread_GBps": fit.read_bw_spread_GBps,
                   "read_bw_deciles_GBps": fit.read_bw_deciles_GBps, "csv": {k: str(v) for k, v in paths.items()},
                   "written": write})
        return
    emit_table(["field", "fitted"], [(k, f"{v:.6g}") for k, v in values.items()])
    emit_table(["fit", "median |relative residual|"], [(k, f"{v:.2%}") for k, v in fit.residuals.items()])
    if fit.read_bw_spread_GBps is not None:
        lo, hi = fit.read_bw_spread_GBps
        click.echo(f"disk probe: {fit.read_bw_GBps:.3f} GB/s (median run), runs {lo:.3f}-{hi:.3f} GB/s")

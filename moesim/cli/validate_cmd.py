"""``moesim validate`` and ``moesim calibrate``: predictions against figures, and fitting."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from moesim.cli.output import emit_json, emit_table
from moesim.config.catalog import DEFAULT_PHONE_DEVICE
from moesim.files import check_writable, write_text_atomic
from moesim.progress import track
from moesim.validate.registry import Case, CaseResult, evaluate, group_of
from moesim.validate.report import exit_status, group_line, render_markdown, status_text, summary_dict, summary_line

__all__ = ["validate", "calibrate"]


@click.command()
@click.option("--only", metavar="SUBSTRING", help="Run only the cases whose name contains SUBSTRING.")
@click.option("--write-docs", "--report", "write_docs", type=click.Path(dir_okay=False), metavar="PATH",
              help="Also write the Markdown report to PATH (docs/validation.md is written this way); "
                   "nothing is written without it.")
@click.option("--remeasure", is_flag=True,
              help="Re-run the native measurements (host/ cases) on this machine first (their recorded "
                   "statuses describe the committed measurement: review them in moesim/validate/host.py).")
@click.option("--strict", is_flag=True, help="Any failure is an error, known misses and skipped cases included.")
@click.option("--quiet", is_flag=True, help="No progress bar (terminal only) and no per-group progress lines.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def validate(only: str | None, write_docs: str | None, remeasure: bool, strict: bool, quiet: bool,
             as_json: bool) -> None:
    """Run every validation case this machine can run; report the others as skipped with the reason.

    Each case records its expected status (pass, or a known miss with its reason). Prints a line per
    case group on stderr as it finishes and a summary at the end. Exit 0 when every result is what
    its case records (a known miss that now passes is listed), 1 on a regression or an error in a
    case (--strict: also on a known miss or a skip)."""
    from moesim.validate.cases import registry

    if write_docs is not None:
        check_writable(write_docs, "--write-docs")
    cases = [c for c in registry() if not only or only in c.name]
    if not cases:
        raise click.UsageError(f"--only {only!r} matches no validation case")
    if remeasure:
        from moesim.validate.host import remeasure_host

        remeasure_host()
    results = _run(cases, quiet)
    if write_docs is not None:
        write_text_atomic(render_markdown(results, only), write_docs)
    if as_json:
        emit_json({"cases": [r.to_dict() for r in results], "summary": {**summary_dict(results), "strict": strict}})
    else:
        rows = [(r.name, r.reference_text, "-" if r.skipped or r.failure else f"{r.predicted:.4g}",
                 "" if r.skipped or r.failure else (f"{r.error:+.1%}" if r.tolerance_kind != "absolute"
                                                    else f"{r.error:+.4f}"),
                 "fitted" if r.fitted_to else "held out", _RESULT[r.status]) for r in results]
        emit_table(["case", "reference", "predicted", "error", "kind", "result"], rows)
    _explain(results)
    raise click.exceptions.Exit(exit_status(results, strict))


#: the table's result column (the reasons follow the table, one line each)
_RESULT = {"pass": "pass", "now passes": "pass (now passes)", "known miss": "known miss", "regression": "REGRESSION",
           "error": "ERROR", "skipped": "skipped"}


def _run(cases: list[Case], quiet: bool) -> list[CaseResult]:
    """Every result, with a flushed line on stderr as each group of cases finishes."""
    results: list[CaseResult] = []
    group: list[CaseResult] = []
    started = time.perf_counter()
    for case in track(cases, "validation cases", show=False if quiet else None):
        if group and group_of(group[0].name) != group_of(case.name):     # the group before is done
            started = _group_done(group, started, quiet)
            group = []
        result = evaluate(case)
        group.append(result)
        results.append(result)
    if group:
        _group_done(group, started, quiet)
    return results


def _group_done(group: list[CaseResult], started: float, quiet: bool) -> float:
    now = time.perf_counter()
    if not quiet:
        click.echo(group_line(group_of(group[0].name), group, now - started), err=True)
        sys.stderr.flush()
    return now


def _explain(results: list[CaseResult]) -> None:
    """On stderr: each failing case with its status and reason, the skips by reason, the summary."""
    lines: dict[tuple[str, str], list[str]] = {}    # known misses sharing a reason share a line
    for r in results:
        if r.status in ("known miss", "regression", "error", "now passes"):
            lines.setdefault(("" if r.status == "known miss" else r.name, status_text(r)), []).append(r.name)
    for (_, text), names in lines.items():
        click.echo(f"{', '.join(names)}: {text}", err=True)
    for reason, names in _skips(results).items():
        click.echo(f"skipped {len(names)} case(s) ({_group(names)}): {reason}", err=True)
    click.echo(summary_line(results), err=True)


def _skips(results: list[CaseResult]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in results:
        if r.skipped:
            out.setdefault(r.skipped, []).append(r.name)
    return out


def _group(names: list[str]) -> str:
    prefixes = sorted({group_of(n) for n in names})
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
    from moesim.config.profiles import phone_profile, profile_dir, profile_names

    profile = phone_profile(device, workload="calibrate estream (the phone prefill profile)")
    fit = fit_estream(profile)
    cpu = fit_cpu(with_values(profile, fit.values))
    at_bound = fit.at_bound + (("cpu.routed_gemv_GFLOPS",) if cpu.at_bound else ())
    if at_bound:
        raise click.ClickException(f"calibration failed: {', '.join(at_bound)} fitted at a bound "
                                   "(a mechanism is missing; the profile is left unchanged)")
    if write:
        path = profile_dir() / f"{device}.toml" if device in profile_names() else Path(device)
        write_fit(path, fit, cpu)
    if as_json:
        emit_json({"values": {**fit.values, **cpu.values}, "predictions": fit.predictions,
                   "errors": fit.errors, "cost": fit.cost, "npu_vs_cpu_experts_64": cpu.npu_vs_cpu, "written": write})
        return
    emit_table(["field", "fitted"], [(k, f"{v:.6g}") for k, v in {**fit.values, **cpu.values}.items()])
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


def _add_device_command() -> None:
    from moesim.cli.calibrate_device import calibrate_device

    calibrate.add_command(calibrate_device)


_add_device_command()

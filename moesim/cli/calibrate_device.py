"""``moesim calibrate device``: fit a phone profile from the user's own llama-bench, fio and TTFT logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from moesim.cli.output import emit_json, emit_table, writable_path
from moesim.errors import InputError

__all__ = ["calibrate_device"]

_NAME_RULE = "must be a profile name: lower-case letters, digits, '.' and '-', starting with a letter or digit"


def _hold_out(text: str | None) -> list[str]:
    if text is None:
        return []
    names = [x.strip() for x in text.split(",")]
    if "" in names:
        raise InputError("--hold-out", "must be comma-separated figure names (htp:pp2048,ufs:4KiB@q1)", text)
    return names


def _interval(iv: tuple[float, float] | None) -> str:
    return "-" if iv is None else f"[{iv[0]:.4g}, {iv[1]:.4g}]"


@click.command("device")
@click.argument("name")
@click.option("--base", default="sd8-elite-gen5", show_default=True, metavar="NAME|PATH",
              help="The phone profile the new one is derived from (its other numbers, and bounds).")
@click.option("--llama-bench", "bench_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="llama-bench output (-o json, jsonl, csv or the default md table); repeatable.")
@click.option("--fio", "fio_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="fio --output-format=json of direct reads at two or more block sizes; repeatable.")
@click.option("--ttft", "ttft_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="TTFT log CSV: model,tokens,ttft_s[,group_size,banks][,source]; repeatable.")
@click.option("--hold-out", "hold_out", metavar="FIG1,FIG2",
              help="Figures to predict rather than fit (names as the table shows them, e.g. htp:pp2048).")
@click.option("--out", "out", type=click.Path(dir_okay=False), metavar="PATH", callback=writable_path,
              help="Where to write the profile [default: device_profiles/NAME.toml].")
@click.option("--force", is_flag=True, help="Replace an existing profile file.")
@click.option("--write/--no-write", default=True, help="Write the profile (--no-write: show the fit only).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_device(name: str, base: str, bench_files: tuple[str, ...], fio_files: tuple[str, ...],
                     ttft_files: tuple[str, ...], hold_out: str | None, out: str | None, force: bool, write: bool,
                     as_json: bool) -> None:
    """Fit a new phone profile NAME from your own measurements: UFS rate and latency from fio, CPU GEMM,
    attention and weight-read rates from llama-bench CPU rows, the HTP's HMX, HVX and graph rates from
    llama-bench HTP rows (and TTFT logs). Prints each fitted number with its bounds and 90% interval,
    and every figure with its residual (held-out figures predicted)."""
    import re

    from moesim.calibrate.bench_logs import read_llama_bench
    from moesim.calibrate.device_figures import Excluded, Figure, bench_figures, fio_figures, ttft_figures
    from moesim.calibrate.device_fit import fit_device
    from moesim.calibrate.device_out import render_profile, write_fitted_profile
    from moesim.calibrate.io_logs import read_fio, read_ttft_log
    from moesim.config.profiles import phone_profile, profile_dir, profile_names

    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", name):
        raise InputError("NAME", _NAME_RULE, name)
    if not (bench_files or fio_files or ttft_files):
        raise InputError("logs", "are required: give --llama-bench, --fio or --ttft files", show_value=False)
    base_profile = phone_profile(base, workload="calibrate device (a phone profile as the base)")
    path = Path(out) if out else profile_dir() / f"{name}.toml"
    if path.resolve().parent == profile_dir().resolve() and path.name != f"{name}.toml":
        raise InputError("--out", f"must be {name}.toml in the bundled profile folder (a bundled profile's file "
                         "is named after it)", str(path))
    if write and path.is_file() and not force:
        raise InputError("--out", "must not name an existing profile file (add --force to replace it)", str(path))
    if write and not out and name in profile_names() and not force:
        raise InputError("NAME", "must not be a bundled profile's name (add --force to replace it)", name)
    figures: list[Figure] = []
    excluded: list[Excluded] = []
    files: dict[str, set[str]] = {}
    for f in bench_files:
        figs, exc = bench_figures(read_llama_bench(f))
        figures += figs
        excluded += exc
        for fig in figs:
            files.setdefault(fig.group, set()).add(f)
    for f in fio_files:
        figures += fio_figures(read_fio(f))
        files.setdefault("ufs", set()).add(f)
    for f in ttft_files:
        figures += ttft_figures(read_ttft_log(f))
        files.setdefault("htp", set()).add(f)
    fit = fit_device(base_profile, figures, _hold_out(hold_out))
    by_group = {g: ", ".join(sorted(v)) for g, v in files.items()}
    base_path = profile_dir() / f"{base}.toml" if base in profile_names() else Path(base)
    text = render_profile(base_path.read_text(encoding="utf-8"), base_profile.name, name, fit, by_group)
    if write:
        write_fitted_profile(text, path)
    _report(fit, excluded, path if write else None, as_json)


def _report(fit: Any, excluded: list[Any], path: Path | None, as_json: bool) -> None:
    fields = [{"field": s.field, "value": g.values[s.field], "low": s.low, "high": s.high,
               "interval_90": g.intervals[s.field], "at_bound": s.field in g.at_bound, "group": g.group,
               "dof": g.dof} for g in fit.groups for s in g.fields]
    figures = [{"name": f.name, "group": f.group, "unit": f.unit, "measured": f.measured, "predicted": f.predicted,
                "error": f.error, "used": f.used, "interval_90": f.interval, "source": f.source}
               for g in fit.groups for f in g.figures]
    left = [{"source": e.source, "test": e.test, "reason": e.reason} for e in excluded]
    if as_json:
        emit_json({"fields": fields, "figures": figures, "excluded": left, "written": str(path) if path else None})
        return
    emit_table(["field", "fitted", "bounds", "90% interval", "group"],
               [(r["field"], f"{r['value']:.6g}" + (" (at bound)" if r["at_bound"] else ""),
                 f"[{r['low']:g}, {r['high']:g}]", _interval(r["interval_90"]), r["group"]) for r in fields])
    emit_table(["figure", "measured", "predicted", "error", "90% interval", "use"],
               [(r["name"], f"{r['measured']:.4g} {r['unit']}", f"{r['predicted']:.4g}", f"{r['error']:+.1%}",
                 _interval(r["interval_90"]), "fit" if r["used"] else "held out") for r in figures])
    for e in left:
        click.echo(f"left out {e['test']} ({e['source']}): {e['reason']}")
    if path is not None:
        click.echo(f"wrote {path}")

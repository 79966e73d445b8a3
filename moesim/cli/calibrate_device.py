"""``moesim calibrate device``: fit a phone profile from the user's own llama-bench, fio and TTFT logs.

No log is trusted: every row is checked against the physical range of what it measures before
the fit (one line naming the file, the row, the field and the value), a log given twice is
refused, and a fit that ends at a bound or misses a fitted figure by more than
:data:`moesim.calibrate.device_fit.MAX_FIT_ERROR` is a failed fit: it says which numbers the
logs do not explain and writes no profile (exit 2), unless ``--force`` (then the profile is
written, marked as a failed fit in its provenance).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from moesim.cli.output import emit_json, emit_table, writable_path
from moesim.errors import InputError
from moesim.files import check_writable
from moesim.inputs import is_regular, read_input_text

if TYPE_CHECKING:
    from moesim.calibrate.device_figures import Excluded, Figure
    from moesim.config.device import MobileNPUProfile

__all__ = ["calibrate_device"]

_NAME_RULE = "must be a profile name: lower-case letters, digits, '.' and '-', starting with a letter or digit"
#: a fit shows progress (on a terminal) once it has run this long
_QUIET_S = 1.0


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
@click.option("--force", is_flag=True,
              help="Replace an existing profile file, and write a failed fit (marked so in its provenance).")
@click.option("--write/--no-write", default=True, help="Write the profile (--no-write: show the fit only).")
@click.option("--quiet", is_flag=True, help="No progress spinner (drawn only on a terminal, after a second).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_device(name: str, base: str, bench_files: tuple[str, ...], fio_files: tuple[str, ...],
                     ttft_files: tuple[str, ...], hold_out: str | None, out: str | None, force: bool, write: bool,
                     quiet: bool, as_json: bool) -> None:
    """Fit a new phone profile NAME from your own measurements: UFS rate and latency from fio, CPU GEMM,
    attention and weight-read rates from llama-bench CPU rows, the HTP's HMX, HVX and graph rates from
    llama-bench HTP rows (and TTFT logs). Prints each fitted number with its bounds and 90% interval,
    and every figure with its residual (held-out figures predicted). A fit that ends at a bound or misses
    a fitted figure by more than 20% writes nothing (exit 2) unless --force."""
    from moesim.calibrate.device_fit import fit_device
    from moesim.calibrate.device_out import render_profile, write_fitted_profile
    from moesim.config.profiles import profile_dir, profile_names

    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", name):
        raise InputError("NAME", _NAME_RULE, name)
    if not (bench_files or fio_files or ttft_files):
        raise InputError("logs", "are required: give --llama-bench, --fio or --ttft files", show_value=False)
    base_profile, path = _target(name, base, out, write, force)
    logs = _read_logs({"--llama-bench": bench_files, "--fio": fio_files, "--ttft": ttft_files})
    figures, excluded, by_group = _figures(logs, base_profile)
    if not figures:
        raise _nothing_to_fit(excluded)
    with _fit_progress(quiet) as progress:
        fit = fit_device(base_profile, figures, _hold_out(hold_out), progress=progress)
    problems = fit.problems
    written = None
    if write and (force or not problems):
        base_path = profile_dir() / f"{base}.toml" if base in profile_names() else Path(base)
        text = render_profile(read_input_text(base_path, "--base", "config"), base_profile.name, name, fit, by_group)
        write_fitted_profile(text, path)
        written = path
    _report(fit, excluded, written, as_json)
    if problems:
        _failed(problems, written, write)


def _target(name: str, base: str, out: str | None, write: bool, force: bool) -> tuple[MobileNPUProfile, Path]:
    """The base profile and where the new one goes, refused before any work."""
    from moesim.config.profiles import phone_profile, profile_dir, profile_names

    base_profile = phone_profile(base, workload="calibrate device (a phone profile as the base)")
    path = Path(out) if out else profile_dir() / f"{name}.toml"
    if path.resolve().parent == profile_dir().resolve() and path.name != f"{name}.toml":
        raise InputError("--out", f"must be {name}.toml in the bundled profile folder (a bundled profile's file "
                         "is named after it)", str(path))
    if write and not out:
        check_writable(path, "NAME")    # the default file is named after NAME: a name too long for the folder
    if write and is_regular(path) and not force:
        raise InputError("--out", "must not name an existing profile file (add --force to replace it)", str(path))
    if write and is_regular(path) and not _is_profile(path):
        raise InputError("--out", "names an existing file that is not a device profile (no top-level name and kind); "
                         "--force replaces only a profile (delete it or choose another name)", str(path))
    if write and not out and name in profile_names() and not force:
        raise InputError("NAME", "must not be a bundled profile's name (add --force to replace it)", name)
    return base_profile, path


def _is_profile(path: Path) -> bool:
    """Whether ``path`` is a TOML file with a profile's top-level ``name`` and ``kind``."""
    from moesim.config.loading import read_toml

    try:
        data = read_toml(path, "--out")
    except InputError:
        return False
    return isinstance(data.get("name"), str) and isinstance(data.get("kind"), str)


def _read_logs(given: dict[str, tuple[str, ...]]) -> list[tuple[str, str, str]]:
    """(option, path, text) of every log, each read once. The same file, or the same bytes under another
    name, given twice is refused: a measurement counted twice shrinks the 90% intervals without evidence."""
    from moesim.inputs import read_input_text

    seen: dict[object, tuple[str, str]] = {}
    logs = []
    for flag, paths in given.items():
        for path in paths:
            text = read_input_text(path, flag, "log")
            st = os.stat(path)
            for key, how in (((st.st_dev, st.st_ino), "is the same file as"),
                             (hashlib.sha256(text.encode()).digest(), "holds the same bytes as")):
                if key in seen:
                    other_flag, other = seen[key]
                    same = f"{path} is given twice" if other == path else f"{path} {how} {other} ({other_flag})"
                    raise InputError(flag, f"must not give the same log twice ({same}: a measurement counted twice "
                                     "shrinks the 90% intervals to nothing)", path)
                seen[key] = (flag, path)
            logs.append((flag, path, text))
    return logs


def _figures(logs: Sequence[tuple[str, str, str]], base: MobileNPUProfile,
             ) -> tuple[list[Figure], list[Excluded], dict[str, str]]:
    """Every log's figures (no measurement twice), the rows left out, and the files of each group."""
    from moesim.calibrate.bench_logs import parse_llama_bench
    from moesim.calibrate.device_figures import bench_figures, fio_figures, ttft_figures, unique_figures
    from moesim.calibrate.io_logs import parse_fio, parse_ttft_log

    figures: list[Figure] = []
    excluded: list[Excluded] = []
    files: dict[str, set[str]] = {}
    for flag, path, text in logs:
        if flag == "--llama-bench":
            figs, left = bench_figures(parse_llama_bench(text, path))
            excluded += left
        elif flag == "--fio":
            figs = fio_figures(parse_fio(text, path, base.ufs.queue_slots_count))
        else:
            figs = ttft_figures(parse_ttft_log(text, path))
        figures += figs
        for fig in figs:
            files.setdefault(fig.group, set()).add(path)
    return unique_figures(figures), excluded, {g: ", ".join(sorted(v)) for g, v in files.items()}


def _nothing_to_fit(excluded: Sequence[Excluded]) -> InputError:
    """Every row was left out: say why, by reason, with the first row of each."""
    by_reason: dict[str, list[Excluded]] = {}
    for e in excluded:
        by_reason.setdefault(e.reason, []).append(e)
    parts = [f"{rows[0].test} ({rows[0].source}): {reason}"
             + (f" (and {len(rows) - 1} more row{'s' if len(rows) > 2 else ''} alike)" if len(rows) > 1 else "")
             for reason, rows in by_reason.items()]
    return InputError("logs", "hold no figure moesim can fit: every row is ignored: " + "; ".join(parts),
                      show_value=False)


@contextmanager
def _fit_progress(quiet: bool) -> Iterator[Callable[[str], None]]:
    """A callback for the fit's steps that opens a spinner (on a terminal, as every long command's) once the
    fit has run over :data:`_QUIET_S`, naming the group and step; nothing for a fit quicker than that."""
    from moesim.progress import activity, phase

    started = time.monotonic()
    with ExitStack() as stack:
        opened = [quiet]

        def step(text: str) -> None:
            if not opened[0] and time.monotonic() - started > _QUIET_S:
                opened[0] = True
                stack.enter_context(activity("calibrate device: fitting"))
            phase(text)

        yield step


def _failed(problems: Sequence[str], written: Path | None, write: bool) -> None:
    """Say what the logs do not explain (stderr); without --force, refuse (exit 2)."""
    from moesim.calibrate.device_fit import MAX_FIT_ERROR

    for line in problems:
        click.echo(f"not explained: {line}", err=True)
    what = f"{len(problems)} number{'s' if len(problems) > 1 else ''} above"
    if written is not None:
        click.echo(f"moesim: warning: the fit failed ({what}); wrote {written} anyway (--force), marked FAILED FIT "
                   "in its provenance", err=True)
        return
    unwritten = ("no profile written (--force writes it anyway, marked as a failed fit)" if write
                 else "nothing written (--no-write)")
    raise InputError("the fit", f"failed: the logs are not explained within moesim's physical bounds ({what}: a "
                     f"bound reached or a fitted figure missed by over {MAX_FIT_ERROR:.0%}); {unwritten}",
                     show_value=False)


def _report(fit: Any, excluded: Sequence[Any], path: Path | None, as_json: bool) -> None:
    fields = [{"field": s.field, "value": g.values[s.field], "low": s.low, "high": s.high,
               "interval_90": g.intervals[s.field], "at_bound": s.field in g.at_bound, "group": g.group,
               "dof": g.dof} for g in fit.groups for s in g.fields]
    figures = [{"name": f.name, "group": f.group, "unit": f.unit, "measured": f.measured, "predicted": f.predicted,
                "error": f.error, "used": f.used, "interval_90": f.interval, "source": f.source}
               for g in fit.groups for f in g.figures]
    left = [{"source": e.source, "test": e.test, "reason": e.reason} for e in excluded]
    if as_json:
        emit_json({"fields": fields, "figures": figures, "excluded": left, "written": str(path) if path else None,
                   "problems": list(fit.problems)})
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

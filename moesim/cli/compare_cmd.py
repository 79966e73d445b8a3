"""``moesim compare``: every prefill policy side by side for one model and device."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from moesim.cli.output import emit_json, emit_table, parse_int_list, writable_path
from moesim.cli.prefill_cmd import page_cache_of, parse_overrides, protocol_options, warn_budget_above_device
from moesim.config.base import field_default
from moesim.config.prefill import POLICY_NAMES, PrefillRun
from moesim.errors import InputError, MoesimError
from moesim.progress import track

if TYPE_CHECKING:
    from moesim.report.compare import Comparison

__all__ = ["compare"]


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [x.strip() for x in text.split(",")]
    if not any(names):
        raise InputError("--policies", f"must list policies among {', '.join(POLICY_NAMES)}", text)
    if "" in names:
        raise InputError("--policies", f"must be comma-separated names (element {names.index('') + 1} is empty)", text)
    if len(set(names)) < len(names):
        raise InputError("--policies", "must name each policy once", text)
    return names


@click.command()
@click.option("--model", default=field_default(PrefillRun, "model"), show_default=True, metavar="NAME|PATH")
@click.option("--device", default=field_default(PrefillRun, "device"), show_default=True, metavar="NAME|PATH")
@click.option("--devices", metavar="D1,D2,...",
              help="Compare devices instead of policies: one row per device (EStream, or --policies), the first "
              "device the reference of the ratios.")
@click.option("--tokens", default=str(field_default(PrefillRun, "tokens")), show_default=True, metavar="N1,N2,...",
              help="Prompt lengths.")
@click.option("--policies", metavar="P1,P2,...",
              help=f"Policies to compare, among {', '.join(POLICY_NAMES)} [default: every policy the device's "
              "profile prices; the header names any it left out and why]")
@click.option("--baseline", metavar="POLICY",
              help="The policy the speedup, memory and energy ratios are taken against, or fastest-completed: at "
              "each prompt length the fastest of resident, cpu, gpu-resident and qnn-switch whose run fits the "
              "device's memory (the EStream paper's reference) [default: resident when it is compared, else "
              "the first of --policies].")
@click.option("--memory-budget-gib", type=float, help="Peak-memory budget for every policy.")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.FIELD=VALUE", help="Profile what-if (repeatable).")
@protocol_options
@click.option("--seed", type=int, default=field_default(PrefillRun, "seed"), show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), callback=writable_path,
              help="Draw the latency-memory plane (.png/.svg/.pdf; log axes, lower left is better).")
@click.option("--quiet", is_flag=True, help="No progress bar (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def compare(model: str, device: str, devices: str | None, tokens: str, policies: str | None, baseline: str | None,
            memory_budget_gib: float | None, overrides: tuple[str, ...], warm: bool, ttft_from: str, seed: int,
            plot: str | None, quiet: bool, as_json: bool) -> None:
    """Compare prefill policies (EStream and the baselines) in one table: TTFT, tokens/s, peak
    memory, bubble, energy, and speedup, memory and energy ratios against --baseline (above 1 =
    better).

    Exits with status 2 and one line when no row can run (a device that is not a phone, an
    invalid --set, a budget that no policy fits); rows that cannot run beside rows that can are
    shown with their reason."""
    from moesim.plotting import check_figure_path
    from moesim.report.compare import comparison, default_baseline, global_failure, plot_plane

    protocol = {"page_cache": page_cache_of(warm), "ttft_from": ttft_from}
    if devices is not None:
        from moesim.cli.compare_devices import compare_devices_mode

        _names(policies)
        compare_devices_mode(model, devices, tokens, policies, baseline, memory_budget_gib,
                             parse_overrides(overrides), protocol, seed, plot, quiet, as_json)
        return
    lengths, chosen, what_if = parse_int_list(tokens, "--tokens"), _names(policies), parse_overrides(overrides)
    if plot:
        check_figure_path(plot, "--plot")
    baseline = default_baseline(chosen or POLICY_NAMES) if baseline is None else baseline
    warn_budget_above_device(memory_budget_gib, device, what_if)
    show = False if quiet else None
    result = comparison(model, device, lengths, chosen, baseline, memory_budget_gib, what_if, seed,
                        progress=lambda runs: track(runs, f"{runs[0].tokens} tokens", show), protocol=protocol)
    rows = result.rows
    failure = global_failure(rows)
    if failure is not None:
        raise MoesimError(failure)
    if plot:
        plot_plane(rows, plot, f"{model} on {device}")
    if as_json:
        emit_json({"model": model, "device": device, "baseline": baseline, **protocol, "rows": rows,
                   "left_out": result.left_out})
        return
    _print(f"{model} on {device}", baseline, result, warm, ttft_from, plot)


def _print(title: str, baseline: str, result: Comparison, warm: bool, ttft_from: str, plot: str | None) -> None:
    """The text output: a header line, the policies left out, the table, and the plot written."""
    click.echo(_header(title, baseline, result, warm, ttft_from))
    if result.left_out:
        click.echo(result.left_out_line())
    emit_table(["tokens", "policy", "ttft_s [90%]", "tok/s", "peak_gib", "bubble", "energy_j", "speedup", "mem_ratio",
                "energy_ratio", "config", "bound"], _table(result))
    if plot:
        click.echo(f"wrote {plot}")


def _header(title: str, baseline: str, result: Comparison, warm: bool, ttft_from: str) -> str:
    """The line above the table: what the ratios are taken against, and the protocol."""
    from moesim.report.compare import FASTEST_COMPLETED

    cache = "warm page cache" if warm else "page cache dropped"
    origin = "process launch (load counted)" if ttft_from == "launch" else "the request (load not counted)"
    against = baseline
    if baseline == FASTEST_COMPLETED:
        picked = {r["tokens"]: r["baseline"] or "none completes" for r in result.rows}
        against = ("the fastest completed non-offloading policy (" +
                   ", ".join(f"{n} tokens: {p}" for n, p in picked.items()) + ")")
    return (f"{title}; speedup, memory and energy ratios against {against} (above 1 = better); "
            f"[90% interval]; {cache}, TTFT from {origin}")


def _table(result: Comparison) -> list[tuple[object, ...]]:
    """One table row per compared run; a run that cannot run shows its reason."""
    table: list[tuple[object, ...]] = []
    for r in result.rows:
        if r["error"]:
            table.append((r["tokens"], r["policy"], "-", "-", "-", "-", "-", "-", "-", "-", "-",
                          "cannot run: " + r["error"]))
            continue
        lo, hi = r["ttft_s_interval"] or (r["ttft_s"], r["ttft_s"])
        cfg = r["config"]
        table.append((r["tokens"], r["policy"], f"{r['ttft_s']:.3f} [{lo:.3f}, {hi:.3f}]", f"{r['tokens_per_s']:.0f}",
                      f"{r['peak_memory_GiB']:.2f}", f"{r['bubble_share']:.3f}",
                      "-" if r["energy_j"] is None else f"{r['energy_j']:.2f}",
                      "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                      "-" if r["memory_ratio"] is None else f"{r['memory_ratio']:.2f}x",
                      "-" if r["energy_ratio"] is None else f"{r['energy_ratio']:.2f}x",
                      f"G={cfg['group_size']} B={cfg['banks']} Q={cfg['queue_depth']}",
                      r["bound"] + ("" if cfg["fits_device_memory"] else "; exceeds device memory")))
    return table

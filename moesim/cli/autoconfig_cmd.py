"""``moesim autoconfig``: choose G, B and Q for a model, device, prompt and memory budget."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import click

from moesim.cli.output import emit_json, emit_table, writable_path
from moesim.cli.prefill_cmd import warn_budget_above_device
from moesim.config.base import field_default
from moesim.config.prefill import PREFETCH_POINTS, EStreamPolicy, Prefetch, PrefillRun
from moesim.errors import InputError
from moesim.progress import track

if TYPE_CHECKING:
    from moesim.autoconfig.run import AutoconfigCase as Case
    from moesim.autoconfig.run import Exhaustive, QueueDepth
    from moesim.policies.prefill.search import Choice, StreamSetting

__all__ = ["autoconfig"]


def _queue_depth(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str:
    if value is None or value == "search":
        return "profile" if value is None else value
    try:
        depth = int(value)
    except ValueError:
        depth = 0
    if depth < 1:
        raise InputError("--queue-depth", "must be a positive integer or 'search'", value)
    return depth


@click.command()
@click.option("--model", default=field_default(PrefillRun, "model"), show_default=True, metavar="NAME|PATH")
@click.option("--device", default=field_default(PrefillRun, "device"), show_default=True, metavar="NAME|PATH")
@click.option("--tokens", type=click.IntRange(min=1), default=field_default(PrefillRun, "tokens"), show_default=True)
@click.option("--memory-budget-gib", type=float, required=True, help="Peak-memory budget of the prefill.")
@click.option("--trace", "trace_path", metavar="PATH", help="Canonical trace (.parquet) for the routing.")
@click.option("--prefetch", type=click.Choice(PREFETCH_POINTS), default=field_default(EStreamPolicy, "prefetch"),
              show_default=True)
@click.option("--queue-depth", "queue_depth_opt", metavar="N|search", callback=_queue_depth,
              help="Reads in flight, held fixed; default: the profile's ufs.default_queue_depth_count (EStream "
                   "fixes Q = 2); 'search' searches 1..8.")
@click.option("--verify", is_flag=True, help="Also simulate every configuration (exhaustive sweep) and report regret.")
@click.option("--plot", metavar="PATH", callback=writable_path,
              help="Save the TTFT-vs-budget trade-off (.png/.svg/.pdf).")
@click.option("--quiet", is_flag=True, help="No progress bar (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def autoconfig(model: str, device: str, tokens: int, memory_budget_gib: float, trace_path: str | None,
               prefetch: str, queue_depth_opt: QueueDepth, verify: bool, plot: str | None, quiet: bool,
               as_json: bool) -> None:
    """Choose group size, bank count and queue depth under a memory budget (max-plus search)."""
    from moesim.autoconfig.run import autoconfigure, prepare
    from moesim.cost.params import check_queue_depth

    gate = cast(Prefetch, prefetch)      # click.Choice admits only PREFETCH_POINTS
    if not math.isfinite(memory_budget_gib) or not 0 < memory_budget_gib <= 1e6:
        raise InputError("--memory-budget-gib", "must be a finite number in (0, 1e6]", memory_budget_gib)
    warn_budget_above_device(memory_budget_gib, device, {})
    case = prepare(model, device, tokens, trace_path)
    if isinstance(queue_depth_opt, int):
        check_queue_depth(queue_depth_opt, case.device)
    choice = autoconfigure(case, memory_budget_gib, gate, queue_depth_opt)
    out = _summary(case, choice, prefetch, queue_depth_opt, tokens, memory_budget_gib)
    ex = _verify(case, choice, gate, queue_depth_opt, memory_budget_gib, quiet, out) if verify else None
    if plot:
        from moesim.autoconfig.plot import plot_tradeoff
        from moesim.autoconfig.run import queue_depth_of

        plot_tradeoff(case, gate, (memory_budget_gib, choice.ttft_ns / 1e9), plot,
                      queue_depth_of(case, queue_depth_opt))
        out["plot"] = plot
    if as_json:
        emit_json(out)
        return
    click.echo(f"{case.model.name} on {case.device.name}, {tokens} tokens, budget {memory_budget_gib} GiB, "
               f"prefetch {prefetch}")
    emit_table(["field", "value"], _table_rows(case, choice, out, ex))


def _peak_memory(case: Case, cfg: StreamSetting, memory_budget_gib: float
                 ) -> tuple[float, tuple[float, float] | None, bool | None]:
    """The chosen configuration's peak memory (GiB), its interval where the device states an
    uncertainty, and whether that interval reaches over the budget (warned about once)."""
    from moesim.cost.uncertainty import budget_warning, interval_over_budget, memory_interval_gib
    from moesim.units import GiB

    peak = (case.base_B + case.profile.arena_B(cfg)) / GiB
    u = case.device.uncertainty
    peak_iv = None if u is None else memory_interval_gib(
        peak, case.device.memory.require("runtime_overhead_MiB", case.device.name) / 1024, u)
    over = interval_over_budget(peak_iv, memory_budget_gib)
    if over and peak_iv is not None:     # docs/autoconfig.md: the choice stands, with one warning
        click.echo("warning: " + budget_warning(peak_iv, memory_budget_gib), err=True)
    return peak, peak_iv, over


def _summary(case: Case, choice: Choice, prefetch: str, queue_depth_opt: QueueDepth, tokens: int,
             memory_budget_gib: float) -> dict[str, Any]:
    """The JSON record of the choice (the table prints a part of it)."""
    from moesim.autoconfig.run import queue_depth_of

    cfg = choice.config
    peak, peak_iv, over = _peak_memory(case, cfg, memory_budget_gib)
    return {
        "config": {"group_size": cfg.group_size, "banks": cfg.banks, "queue_depth": cfg.queue_depth,
                   "prefetch": prefetch},
        "predicted_ttft_s": choice.ttft_ns / 1e9, "fastest_predicted_ttft_s": choice.fastest_ttft_ns / 1e9,
        "queue_depth_searched": queue_depth_of(case, queue_depth_opt) is None, "peak_memory_GiB": peak,
        "peak_memory_GiB_interval": peak_iv, "memory_interval_over_budget": over, "selection_ms": choice.selection_ms,
        "profile_ms": case.profile.build_ms, "profile_from_store": case.from_store, "evaluated": choice.evaluated,
        "runner_up": [{"group_size": g, "banks": c.banks, "queue_depth": c.queue_depth, "predicted_ttft_s": t / 1e9}
                      for g, (c, t) in sorted(choice.per_group_size.items(), key=lambda kv: (kv[1][1], kv[0]))],
        "model": case.model.name, "device": case.device.name, "tokens": tokens, "memory_budget_GiB": memory_budget_gib,
        "trace": {"source": case.provenance.source, "synthetic": case.provenance.synthetic},
    }


def _verify(case: Case, choice: Choice, gate: Prefetch, queue_depth_opt: QueueDepth, memory_budget_gib: float,
            quiet: bool, out: dict[str, Any]) -> Exhaustive:
    """``--verify``: simulate every configuration and add the regret of the choice to ``out``."""
    from moesim.autoconfig.run import exhaustive, simulate_config

    show = False if quiet else None
    ex = exhaustive(case, memory_budget_gib, gate,
                    progress=lambda cfgs: track(cfgs, "simulating every configuration", show),
                    queue_depth=queue_depth_opt)
    chosen_des = simulate_config(case, choice.config, gate)
    select_s = (case.profile.build_ms + choice.selection_ms) / 1e3
    out.update({"exhaustive_best": {"group_size": ex.best.group_size, "banks": ex.best.banks,
                                    "queue_depth": ex.best.queue_depth},
                "exhaustive_ttft_s": ex.best_ttft_ns / 1e9, "exhaustive_fastest_ttft_s": ex.fastest_ttft_ns / 1e9,
                "chosen_des_ttft_s": chosen_des / 1e9, "same_as_exhaustive": ex.best == choice.config,
                "regret": chosen_des / ex.fastest_ttft_ns - 1.0, "exhaustive_wall_s": ex.wall_s,
                "exhaustive_configs": ex.configs, "speedup_vs_exhaustive": ex.wall_s / select_s})
    return ex


def _table_rows(case: Case, choice: Choice, out: dict[str, Any], ex: Exhaustive | None) -> list[tuple[str, object]]:
    cfg = choice.config
    rows: list[tuple[str, object]] = [
        ("group_size", cfg.group_size), ("banks", cfg.banks), ("queue_depth", cfg.queue_depth),
        ("predicted_ttft_s", f"{choice.ttft_ns / 1e9:.4f}"), ("peak_memory_GiB", f"{out['peak_memory_GiB']:.3f}"),
        ("selection_ms", f"{choice.selection_ms:.2f}"), ("profile_ms", f"{case.profile.build_ms:.1f}")]
    if ex is not None:
        rows += [("exhaustive_best", f"G={ex.best.group_size} B={ex.best.banks} Q={ex.best.queue_depth}"),
                 ("exhaustive_ttft_s", f"{out['exhaustive_ttft_s']:.4f}"),
                 ("exhaustive_fastest_ttft_s", f"{out['exhaustive_fastest_ttft_s']:.4f}"),
                 ("regret", f"{out['regret']:.4%}"),
                 ("exhaustive_wall_s", f"{ex.wall_s:.2f}"),
                 ("speedup_vs_exhaustive", f"{out['speedup_vs_exhaustive']:.0f}x")]
    return rows

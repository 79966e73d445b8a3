"""``moesim decode --autoconfig``: choose the cache policy, size, prefetch and speculation that
maximise tokens/s under a memory budget, run the choice, and (``--check``) report its regret."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

from moesim.cli.decode_cmd import show_decode
from moesim.cli.output import emit_json, emit_table, write_timeline
from moesim.config.decode import DecodeRun
from moesim.cost.uncertainty import budget_warning, interval_over_budget
from moesim.errors import InputError
from moesim.simulate.decode import simulate_decode

if TYPE_CHECKING:
    from moesim.autoconfig.decode import DecodeChoice
    from moesim.results import DecodeResult

__all__ = ["decode_autoconfig"]


def decode_autoconfig(run: DecodeRun, budget: float | None, autoconfig: bool, check: bool, timeline: str | None,
                      as_json: bool, given_policy: str | None) -> None:
    """Choose, simulate and print the choice (``given_policy``: the cache policy --cache-policy restricts to)."""
    from moesim.autoconfig.decode import choose, policies_for

    if not autoconfig:
        raise InputError("--autoconfig", "is needed with --memory-budget-gib and --check", False)
    budget, said = _budget(run, budget)
    policies = policies_for(run, budget, given_policy)
    choice = choose(run, budget, policies=policies)
    result = simulate_decode(choice.run)
    if timeline:
        write_timeline(result.to_chrome_trace(), timeline)
    checked = _check(run, budget, policies, result) if check else None
    if said:      # printed once the choice is made: an error would be the only line
        click.echo(said, err=True)
    iv = result.metrics.peak_memory_GiB_interval
    over = interval_over_budget(iv, budget)
    if over and iv is not None:     # the choice stands (its point estimate fits): one warning (docs/decode.md)
        click.echo("warning: " + budget_warning(iv, budget), err=True)
    if as_json:
        emit_json({"choice": {"cache_policy": choice.run.cache_policy, "prefetch": choice.run.prefetch,
                              "selector": choice.run.selector, "gamma": choice.run.gamma,
                              "cache_GiB": result.metrics.config.cache_GiB, "simulations": choice.simulations},
                   "memory_budget_GiB": budget, "policies_searched": list(policies),
                   "memory_interval_over_budget": over,
                   "candidates": list(choice.table), "check": checked,
                   "result": result.metrics.model_dump(mode="json")})
        return
    _print(choice, result, budget, policies, checked)


def _budget(run: DecodeRun, budget: float | None) -> tuple[float, str]:
    """The budget in GiB (the device's usable DRAM where none is given) and the note that says so."""
    from moesim.cli.prefill_cmd import warn_budget_above_device
    from moesim.config.profiles import phone_profile

    if budget is None:     # docs/decode.md: the device's usable DRAM, as a run without --cache-gib has
        device = phone_profile(run.device, run.overrides)
        usable = device.memory.usable_GiB
        return usable, f"note: memory budget: the {usable:g} GiB usable on {device.name} (no --memory-budget-gib given)"
    if not 0 < budget < 1e6:
        raise InputError("--memory-budget-gib", "must be > 0 GiB and < 1e6" if math.isfinite(budget)
                         else "must be a finite number (GiB)", budget)
    warn_budget_above_device(budget, run.device, run.overrides)
    return budget, ""


def _check(run: DecodeRun, budget: float, policies: tuple[str, ...], result: DecodeResult) -> dict[str, Any]:
    """``--check``: simulate every setting and take the choice's regret against the best."""
    from moesim.autoconfig.decode import exhaustive

    rows = exhaustive(run, budget, policies)
    best = max(rows, key=lambda r: r["tokens_per_s"])
    return {"best": best, "simulations": len(rows),
            "regret": 1.0 - result.metrics.tokens_per_s / best["tokens_per_s"]}


def _print(choice: DecodeChoice, result: DecodeResult, budget: float, policies: tuple[str, ...],
           checked: dict[str, Any] | None) -> None:
    """The candidates' table, the choice, the check, then the chosen run as ``moesim decode`` prints it."""
    emit_table(["cache", "prefetch", "selector", "gamma", "screened tok/s", "full tok/s"],
               [(r["cache_policy"], r["prefetch"], r["selector"], r["gamma"] if r["selector"] != "none" else "-",
                 f"{r['screened_tokens_per_s']:.3f}", "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:.3f}")
                for r in choice.table])
    chosen = {"cache_policy": choice.run.cache_policy, "prefetch": choice.run.prefetch, "selector": choice.run.selector,
              "gamma": choice.run.gamma}
    click.echo(f"chosen under {budget:g} GiB: {_setting(chosen)}, cache {result.metrics.config.cache_GiB:.2f} GiB "
               f"({choice.simulations} simulations, cache policies {', '.join(policies)})")
    if checked is not None:
        b = checked["best"]
        click.echo(f"exhaustive check ({checked['simulations']} simulations): best {_setting(b)}, cache "
                   f"{b['cache_GiB']:.2f} GiB at "
                   f"{b['tokens_per_s']:.3f} tok/s; regret {checked['regret']:.1%}")
    show_decode(result.metrics, False)


def _setting(s: dict[str, Any]) -> str:
    """``lfu cache, prefetch none, selector cache-aware (gamma 3)``: gamma only where there is speculation."""
    return (f"{s['cache_policy']} cache, prefetch {s['prefetch']}, selector {s['selector']}"
            + (f" (gamma {s['gamma']})" if s["selector"] != "none" else ""))

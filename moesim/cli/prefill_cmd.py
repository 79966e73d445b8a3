"""``moesim prefill``: simulate one MoE prefill on a mobile NPU."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

from moesim.cli.output import describe_routing, emit_json, emit_table, timeline_path, write_timeline
from moesim.cli.run_options import FINITE, schema_options
from moesim.config.base import field_choices, field_default
from moesim.config.loading import validate_data
from moesim.config.prefill import POLICY_NAMES, PREFETCH_POINTS, PrefillRun, policy_options
from moesim.config.profiles import phone_profile
from moesim.config.schema import unflatten
from moesim.cost.uncertainty import budget_warning
from moesim.errors import InputError
from moesim.policies.prefill.registry import prefill_traits
from moesim.progress import activity
from moesim.results import PrefillMetrics
from moesim.simulate.prefill import simulate_prefill

__all__ = ["prefill", "show_prefill", "describe_protocol", "parse_overrides", "FINITE", "warn_budget_above_device",
           "protocol_options", "page_cache_of"]


def warn_budget_above_device(budget_GiB: float | None, device: str, overrides: dict[str, float]) -> None:
    """A budget above the phone's usable memory constrains nothing: say so on stderr."""
    if budget_GiB is None or not math.isfinite(budget_GiB):
        return
    usable = phone_profile(device, overrides).memory.usable_GiB
    if budget_GiB > usable:
        click.echo(f"warning: --memory-budget-gib {budget_GiB:g} exceeds the {usable:g} GiB usable memory of "
                   f"{device}; the device's memory, not the budget, limits this run", err=True)


def parse_overrides(items: tuple[str, ...]) -> dict[str, float]:
    """``("ufs.effective_read_bw_GBps=3.0", ...)`` -> ``{"ufs.effective_read_bw_GBps": 3.0}``.

    Each item is ``SECTION.FIELD=NUMBER`` with a finite number (``nan`` and ``inf`` are no
    device's numbers); which fields a profile lets ``--set`` change is checked when it is applied
    (:func:`moesim.config.profiles.override_profile`: the numeric fields of its sections).

    >>> parse_overrides(("ufs.peak_read_bw_GBps=2",))
    {'ufs.peak_read_bw_GBps': 2.0}
    >>> try:
    ...     parse_overrides(("htp.arch=v99",))
    ... except InputError as err:
    ...     print(err.field, err.rule.split(" (")[0], err.value)
    --set htp.arch must be a number v99
    """
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError("--set", "must be SECTION.FIELD=NUMBER", item)
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--set {key}", "must be a number (--set changes one numeric field of the device "
                             "profile)", value.strip()) from None
        if not math.isfinite(number):
            raise InputError(f"--set {key}", "must be a finite number", number)
        if key in out:
            raise InputError(f"--set {key}", f"must be given once (here {out[key]:g} and {number:g})", item)
        out[key] = number
    return out


def _default(name: str) -> Any:
    """A prefill option's default, from PrefillRun's field (one definition)."""
    return field_default(PrefillRun, name)


def _takes(option: str) -> str:
    """The policies that take a policy option, from the policy models (``estream, naive``)."""
    return ", ".join(sorted(policy_options()[option]))


def protocol_options(command: Callable[..., None]) -> Callable[..., None]:
    """The measurement-protocol options of ``prefill`` and ``compare``: ``--warm`` and ``--ttft-from``
    (PrefillRun.page_cache and .ttft_from; docs/background/prefill-model.md, "The measurement protocol")."""
    command = click.option("--ttft-from", type=click.Choice(field_choices(PrefillRun, "ttft_from")),
                           default=field_default(PrefillRun, "ttft_from"), show_default=True,
                           help="TTFT from the prompt's arrival at the loaded process, or from process launch "
                                "(the load phase counted).")(command)
    return click.option("--warm", is_flag=True,
                        help="Start with a warm page cache (what an identical previous run read) instead of the "
                             "paper's dropped one.")(command)


def page_cache_of(warm: bool) -> str:
    """``--warm`` as PrefillRun.page_cache."""
    return "warm" if warm else field_default(PrefillRun, "page_cache")


#: the parameters of PrefillRun that ``moesim prefill`` spells itself (``--warm`` is page_cache, ``--trace``'s
#: value trace_path); every other is an option of schema_options
_SPELLED = ("model", "device", "tokens", "trace", "policy", "group_size", "banks", "queue_depth", "prefetch",
            "memory_budget_GiB", "seed", "page_cache", "ttft_from")


@click.command()
@click.option("--model", default=_default("model"), show_default=True, metavar="NAME|PATH")
@click.option("--device", default=_default("device"), show_default=True, metavar="NAME|PATH")
@click.option("--tokens", type=int, default=_default("tokens"), show_default=True, help="Prompt length.")
@click.option("--trace", "trace_path", metavar="PATH", help="Canonical trace (.parquet); default: the "
              "model's real trace from ../shared/traces, else the bundled or generated synthetic one.")
@click.option("--policy", type=click.Choice(POLICY_NAMES), default=_default("policy").kind, show_default=True)
@click.option("--group-size", type=int, help=f"Experts per group ({_takes('group_size')}).")
@click.option("--banks", type=int, help=f"Banks in the arena ({_takes('banks')}).")
@click.option("--queue-depth", type=int, help=f"Reads in flight ({_takes('queue_depth')}).")
@click.option("--prefetch", type=click.Choice(PREFETCH_POINTS), help=f"{_takes('prefetch')} prefetch point.")
@schema_options(PrefillRun, spelled=_SPELLED)
@click.option("--memory-budget-gib", type=FINITE, help="Peak-memory budget; the default rule fits B to it.")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.FIELD=VALUE",
              help="Override one profile number for a what-if (repeatable), e.g. ufs.effective_read_bw_GBps=3.0")
@protocol_options
@click.option("--seed", type=int, default=_default("seed"), show_default=True)
@click.option("--timeline", type=click.Path(dir_okay=False), callback=timeline_path,
              help="Write a Chrome/Perfetto timeline (trace-event JSON); an existing file is replaced only if it "
                   "is a moesim timeline.")
@click.option("--quiet", is_flag=True, help="No progress spinner (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def prefill(model: str, device: str, tokens: int, trace_path: str | None, policy: str, group_size: int | None,
            banks: int | None, queue_depth: int | None, prefetch: str | None, memory_budget_gib: float | None,
            overrides: tuple[str, ...], warm: bool, ttft_from: str, seed: int, timeline: str | None, quiet: bool,
            as_json: bool, **derived: Any) -> None:
    """Simulate MoE prefill with expert streaming (EStream) or a baseline policy.

    By default the page cache is dropped before the process starts and the TTFT runs from the
    prompt's arrival at the loaded process (load_s reports the load phase beside it)."""
    flat = {"model": model, "device": device, "tokens": tokens, "trace": trace_path, "policy": policy,
            "group_size": group_size, "banks": banks, "queue_depth": queue_depth, "prefetch": prefetch,
            "memory_budget_GiB": memory_budget_gib, "seed": seed, "page_cache": page_cache_of(warm),
            "ttft_from": ttft_from, **derived}
    run = validate_data(PrefillRun, {**unflatten(PrefillRun, flat), "overrides": parse_overrides(overrides)})
    warn_budget_above_device(run.memory_budget_GiB, run.device, run.overrides)
    with activity(f"prefill {run.model}, {run.tokens} tokens", show=False if quiet else None):
        result = simulate_prefill(run)
    if timeline:
        write_timeline(result.to_chrome_trace(), timeline)
    show_prefill(result.metrics, as_json)


_ORIGIN = {"request": "the request", "launch": "process launch"}


def describe_protocol(m: dict[str, Any]) -> str:
    """One line: the page cache at start, where the TTFT starts, and what the load phase read."""
    cfg = m["config"]
    cache = "warm page cache" if cfg["page_cache"] == "warm" else "page cache dropped"
    origin = _ORIGIN[cfg["ttft_from"]]
    if m["load_s"] is None:
        return f"protocol: {cache}, TTFT from {origin} (the load phase cannot be priced on this profile)"
    counted = "counted in ttft_s" if cfg["ttft_from"] == "launch" else "not counted"
    read = (f"{m['load_io_bytes'] / 1e9:.2f} GB from flash" if m["load_io_bytes"]
            else "nothing from flash")
    return (f"protocol: {cache}, TTFT from {origin}; load {m['load_s']:.3f} s ({m['load_path']}, "
            f"{read}), {counted}")


def show_prefill(metrics: PrefillMetrics, as_json: bool) -> None:
    """Print a prefill result as ``moesim prefill`` does: a table, or its JSON."""
    m = metrics.model_dump(mode="json")
    if m["memory_interval_over_budget"]:     # the budget check's decision (docs/metrics.md): warn, not refuse
        click.echo("warning: " + budget_warning(m["peak_memory_GiB_interval"], m["config"]["memory_budget_GiB"]),
                   err=True)
    if as_json:
        emit_json(m)
        return
    cfg, tr = m["config"], m["config"]["trace"]
    click.echo(f"{cfg['model']} on {cfg['device']}, {cfg['tokens']} tokens, policy {cfg['policy']} "
               f"(G={cfg['group_size']}, B={cfg['banks']}, Q={cfg['queue_depth']}, prefetch {cfg['prefetch']})")
    if cfg["overrides"]:
        click.echo("what-if: " + ", ".join(f"{k}={v:g}" for k, v in sorted(cfg["overrides"].items())))
    click.echo(describe_routing(tr))
    click.echo(describe_protocol(m))
    if prefill_traits(cfg["policy"]).streams:
        click.echo("G = experts per group (one read, one NPU call), B = banks in the arena, Q = reads in flight; "
                   "bubble = NPU time waiting for experts / expert-phase time")
    def band(key: str, fmt: str) -> str:
        iv = m[f"{key}_interval"]
        return "" if iv is None else f"{iv[0]:{fmt}} - {iv[1]:{fmt}}"

    rows = [("ttft_s", f"{m['ttft_s']:.4f}", band("ttft_s", ".3f")),
            ("tokens_per_s", f"{m['tokens_per_s']:.1f}", band("tokens_per_s", ".1f")),
            ("peak_memory_GiB", f"{m['peak_memory_GiB']:.3f}", band("peak_memory_GiB", ".3f")),
            ("load_s", "-" if m["load_s"] is None else f"{m['load_s']:.4f}", band("load_s", ".3f")),
            ("bubble_share", f"{m['bubble_share']:.4f}", ""),
            ("bubble_share_total", f"{m['bubble_share_total']:.4f}", ""), ("io_bytes", f"{m['io_bytes']:,}", ""),
            ("io_amplification", f"{m['io_amplification']:.3f}", "")]
    rows += [(f"utilization.{k}", f"{v:.3f}", "") for k, v in sorted(m["utilization"].items())]
    if m["energy_j"] is not None:
        rows += [("energy_j", f"{m['energy_j']:.3f}", band("energy_j", ".3f")),
                 ("j_per_token", f"{m['j_per_token']:.5f}", ""), ("mean_power_w", f"{m['mean_power_w']:.2f}", "")]
    emit_table(["metric", "value", "90% interval"], rows)
    if not m["fits_device_memory"]:
        click.echo(f"warning: peak memory {m['peak_memory_GiB']:.2f} GiB exceeds the usable memory of "
                   f"{cfg['device']}: this run would not complete on the device", err=True)

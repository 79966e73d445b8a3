"""``moesim decode``: decode on a phone with an expert cache in DRAM and experts read from UFS."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from moesim.cli.output import describe_routing, emit_json, emit_table, timeline_path, write_timeline
from moesim.cli.prefill_cmd import parse_overrides
from moesim.cli.run_options import FINITE, derived_names, option_flag, schema_options
from moesim.config.base import field_choices, field_default
from moesim.config.decode import DecodeRun, ignored_option
from moesim.config.loading import validate_data
from moesim.config.schema import unflatten
from moesim.config.selectors import needs_predictor
from moesim.config.specdecode import DraftTree
from moesim.errors import InputError, deprecated
from moesim.progress import activity
from moesim.results import DecodeMetrics
from moesim.simulate.decode import simulate_decode

__all__ = ["decode", "show_decode", "decode_run_data", "check_ignored_options"]

#: the parameters of DecodeRun that ``moesim decode`` spells itself (``--trace``'s value is trace_path, ``--set``
#: the overrides); every other is an option of schema_options
_SPELLED = ("model", "device", "tokens", "context", "cache_GiB", "cache_policy", "pinned_by", "pinned_share",
            "prefetch", "expert_format", "read_group_size", "read_grouping", "selector", "gamma", "depth", "width",
            "routing", "draft_mu", "temperature", "predictor", "backend", "queue_depth", "warmup_tokens", "trace",
            "seed")
#: the options the combination may ignore (config.decode.ignored_option), in the order they are checked (then
#: those of schema_options)
_ORDER = ("gamma", "depth", "width", "routing", "draft_mu", "temperature", "predictor", "pinned_by",
          "pinned_share", "read_grouping", "cache_GiB", "prefetch", "selector",
          *derived_names(DecodeRun, _SPELLED))
#: options that --autoconfig chooses itself
_CHOSEN = ("cache_GiB", "prefetch", "selector", "gamma")
_flag = option_flag
#: parameters whose option's value has another name in the command
_DEST = {"routing": "draft_routing", "trace": "trace_path"}


def check_ignored_options(given: set[str], values: dict[str, Any]) -> None:
    """Refuse an option the combination would ignore (``given``: the options the user set).

    >>> try:
    ...     check_ignored_options({"gamma"}, {"gamma": 4, "selector": "none", "autoconfig": False})
    ... except InputError as err:
    ...     print(err.field, err.value)
    --gamma 4
    """
    v = values
    if v.get("autoconfig"):
        for name in _CHOSEN:
            if name in given:
                raise InputError(_flag(name), "is chosen by --autoconfig (it searches cache size, prefetch and "
                                 "speculation; --cache-policy restricts its cache policies): leave it out",
                                 v.get(name))
        return
    for name in ("depth", "width"):
        if name in given and not 1 <= v.get(name, 1) <= 8:
            raise InputError(_flag(name), "must be an integer in 1..8 (draft-tree " +
                             ("steps)" if name == "depth" else "tokens kept per step)"), v.get(name))
    for name in _ORDER:
        why = ignored_option(name, v, _flag) if name in given else None
        if why is not None:
            raise InputError(_flag(name), why, v.get(name))


def _choice(name: str) -> click.Choice[str]:
    """A decode option's choices, from DecodeRun's Literal (one definition)."""
    return click.Choice(field_choices(DecodeRun, name))


def _default(name: str) -> Any:
    """A decode option's default, from DecodeRun's field (one definition)."""
    return field_default(DecodeRun, name)


def decode_run_data(**opts: Any) -> dict[str, object]:
    """CLI option values (DecodeRun's flat parameters, ``draft_routing`` its routing, ``overrides`` the
    ``--set`` items; None: not given) -> DecodeRun data."""
    flat = {("routing" if k == "draft_routing" else k): v for k, v in opts.items() if k != "overrides"}
    data = unflatten(DecodeRun, flat)
    if opts.get("overrides"):
        data["overrides"] = parse_overrides(opts["overrides"])
    return data


@click.command()
@click.option("--model", default=_default("model"), show_default=True, metavar="NAME|PATH")
@click.option("--device", default=_default("device"), show_default=True, metavar="NAME|PATH")
@click.option("--tokens", type=int, default=_default("tokens"), show_default=True, help="Tokens to generate.")
@click.option("--context", type=int, default=_default("context"), show_default=True,
              help="Prompt tokens already in the KV cache.")
@click.option("--cache-gib", "cache_GiB", type=FINITE, help="DRAM for cached experts, at most all the model's experts "
              "[default: what the device's usable DRAM leaves after the resident weights, KV cache and runtime, "
              "up to all the experts].")
@click.option("--cache-policy", type=_choice("cache_policy"), default=_default("cache_policy"), show_default=True,
              help="none: every expert read from UFS; pinned: a hot set chosen offline from the trace, the rest "
              "LRU; resident: all experts in DRAM (where they fit); mmap: llama.cpp-like page cache on the CPU.")
@click.option("--pinned-by", type=_choice("pinned_by"), default=_default("pinned_by"), show_default=True,
              help="pinned: the hot set from the experts' co-activation graph, or by frequency alone.")
@click.option("--pinned-share", type=FINITE, default=_default("pinned_share"), show_default=True,
              help="pinned: share of slots pinned.")
@click.option("--prefetch", type=_choice("prefetch"), default=_default("prefetch"), show_default=True,
              help="next-layer: read the predicted experts of the next layer while this one computes.")
@click.option("--expert-format", type=_choice("expert_format"), default=_default("expert_format"),
              show_default=True, help="Storage of the routed experts (Q4_K/Q5_K: llama.cpp's Q4_K_M/Q5_K_M files; "
              "MXFP4: gpt-oss); needs --backend cpu unless Q4_0.")
@click.option("--read-group-size", type=int, default=_default("read_group_size"), show_default=True,
              help="Experts stored together and read whole on a miss (the others join the cache).")
@click.option("--read-grouping", type=_choice("read_grouping"), default=_default("read_grouping"), show_default=True,
              help="Read groups from the experts' co-activation graph, or by expert id.")
@click.option("--selector", type=_choice("selector"), default=_default("selector"), show_default=True,
              help="Speculative decoding: the draft selection rule (cache-aware: EcoSpec with the cache's costs).")
@click.option("--spec", "old_spec", type=_choice("selector"), hidden=True, help="Deprecated: --selector.")
@click.option("--gamma", type=int, default=_default("gamma"), show_default=True,
              help="Tokens verified per step, root included.")
@click.option("--depth", type=int, help=f"Draft steps (tree depth) [default: {field_default(DraftTree, 'depth')}].")
@click.option("--width", type=int, help=f"Tokens kept per draft step [default: {field_default(DraftTree, 'width')}].")
@click.option("--draft-routing", metavar="KIND",
              help=f"Routing of non-true drafts [default: {_default('routing').kind}].")
@click.option("--draft-mu", type=FINITE, help="The draft's mean top-1 logit (acceptance).")
@click.option("--temperature", type=FINITE, default=_default("temperature"), show_default=True,
              help="Sampling temperature of speculative decoding: 0 (greedy) or 1.")
@click.option("--predictor", metavar="KIND",
              help=f"oracle, learned or accuracy:P [default: {_default('predictor').kind}].")
@schema_options(DecodeRun, spelled=_SPELLED)
@click.option("--backend", type=_choice("backend"), default=_default("backend"), show_default=True,
              help="Compute unit: the CPU cores (llama.cpp-like) or the HTP (HVX one-token products; its decode rate "
              "and per-layer overhead solved from two measured dense decodes, not the prefill fit; Q4_0 experts "
              "only).")
@click.option("--queue-depth", type=int, help="UFS reads in flight [default: the profile's].")
@click.option("--warmup-tokens", type=int, default=_default("warmup_tokens"), show_default=True,
              help="Tokens decoded before measuring (a warm cache).")
@click.option("--trace", "trace_path", metavar="PATH", help="Canonical trace (.parquet) [default: the model's "
              "real trace, else a synthetic one (labelled)].")
@click.option("--seed", type=int, default=_default("seed"), show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.FIELD=VALUE",
              help="Override one profile number (repeatable), e.g. ufs.peak_read_bw_GBps=2.0")
@click.option("--timeline", type=click.Path(dir_okay=False), callback=timeline_path,
              help="Write a Chrome/Perfetto timeline (trace-event JSON); an existing file is replaced only if it "
                   "is a moesim timeline.")
@click.option("--memory-budget-gib", type=FINITE, help="With --autoconfig: the DRAM the whole run may use "
              "[default: the device's usable DRAM].")
@click.option("--autoconfig", is_flag=True, help="Choose the cache policy (lru, lfu, pinned, and resident where it "
              "fits; only --cache-policy's if given) and size, prefetch and speculation (gamma) that maximise "
              "tokens/s under --memory-budget-gib, then run the choice.")
@click.option("--check", is_flag=True, help="With --autoconfig: simulate every setting at four cache sizes and "
              "report the choice's regret against the best.")
@click.option("--quiet", is_flag=True, help="No progress bar (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def decode(model: str, device: str, tokens: int, context: int, cache_GiB: float | None, cache_policy: str,
           pinned_by: str, pinned_share: float, prefetch: str, expert_format: str, read_group_size: int,
           read_grouping: str, selector: str, old_spec: str | None, gamma: int, depth: int | None,
           width: int | None, draft_routing: str | None, draft_mu: float | None, temperature: float,
           predictor: str | None,
           backend: str, queue_depth: int | None, warmup_tokens: int, trace_path: str | None, seed: int,
           overrides: tuple[str, ...], timeline: str | None, memory_budget_gib: float | None, autoconfig: bool,
           check: bool, quiet: bool, as_json: bool, **derived: Any) -> None:
    """Simulate decode on a phone: an expert cache in DRAM, misses read from UFS, optional speculation."""
    source = click.get_current_context().get_parameter_source
    if old_spec is not None:   # the option's old name, kept for one release
        deprecated("--spec", "--selector")
        selector = old_spec
    values = {"model": model, "device": device, "tokens": tokens, "context": context, "cache_GiB": cache_GiB,
              "cache_policy": cache_policy, "pinned_by": pinned_by, "pinned_share": pinned_share, "prefetch": prefetch,
              "expert_format": expert_format, "read_group_size": read_group_size, "read_grouping": read_grouping,
              "selector": selector, "gamma": gamma, "depth": depth, "width": width, "routing": draft_routing,
              "draft_mu": draft_mu, "temperature": temperature, "predictor": predictor, "backend": backend,
              "queue_depth": queue_depth, "warmup_tokens": warmup_tokens, "trace": trace_path, "seed": seed, **derived}
    given = {n for n in _ORDER if source(_DEST.get(n, n)) not in (ParameterSource.DEFAULT, None)}
    check_ignored_options(given | ({"selector"} if old_spec is not None else set()),
                          {**values, "autoconfig": autoconfig})
    run = validate_data(DecodeRun, decode_run_data(**values, overrides=overrides))
    show = False if quiet else None
    if autoconfig or check or memory_budget_gib is not None:
        given_policy = cache_policy if source("cache_policy") not in (ParameterSource.DEFAULT, None) else None
        from moesim.cli.decode_autoconfig import decode_autoconfig

        with activity(f"decode --autoconfig {run.model}", show):
            decode_autoconfig(run, memory_budget_gib, autoconfig, check, timeline, as_json, given_policy)
        return
    with activity(f"decode {run.model}, {run.tokens} tokens", show) as update:
        result = simulate_decode(run, progress=update)
    if timeline:
        write_timeline(result.to_chrome_trace(), timeline)
    show_decode(result.metrics, as_json)


def show_decode(metrics: DecodeMetrics, as_json: bool) -> None:
    """Print a decode result as ``moesim decode`` does: a table, or its JSON."""
    m = metrics.model_dump(mode="json")
    for note in m["notes"]:
        click.echo(f"note: {note}", err=True)
    if as_json:
        emit_json(m)
        return
    cfg = m["config"]
    spec = "no speculation" if cfg["selector"] == "none" else f"speculation {cfg['selector']} (gamma {cfg['gamma']})"
    pred = cfg["predictor"]
    uses = cfg["prefetch"] != "none" or needs_predictor(cfg["selector"])
    named = (f", predictor {pred['kind']}" + (f" {pred['fraction']:g}" if pred.get("fraction") is not None else "")
             if uses else "")
    click.echo(f"{cfg['model']} on {cfg['device']} ({cfg['backend']}): {cfg['tokens']} tokens after "
               f"{cfg['context']}, cache {cfg['cache_policy']} {cfg['cache_GiB']:.2f} GiB ({cfg['cache_slots']} "
               f"experts), prefetch {cfg['prefetch']}, {spec}{named}")
    if cfg["overrides"]:
        click.echo("what-if: " + ", ".join(f"{k}={v:g}" for k, v in sorted(cfg["overrides"].items())))
    tr = m["trace"]
    wrapped = ", replayed from the start when it ran out" if tr["wrapped"] else ""
    click.echo(f"{describe_routing(tr)}, {tr['decode_tokens']:,} decode tokens{wrapped}")
    ms = m["ms_per_token"]
    rows = [("tokens_per_s", f"{m['tokens_per_s']:.3f}"),
            ("ms_per_token mean / p50 / p90 / p99", f"{ms['mean']:.1f} / {ms['p50']:.1f} / {ms['p90']:.1f} / "
                                                    f"{ms['p99']:.1f}"),
            ("cache_hit_rate (Belady bound)", f"{m['cache_hit_rate']:.3f} ({m['belady_hit_rate']:.3f})"),
            ("ufs_bytes_per_token", f"{m['ufs_bytes_per_token'] / 2**20:,.1f} MiB"),
            ("bubble_share_total", f"{m['bubble_share_total']:.3f}"),
            ("mean_active_experts", f"{m['mean_active_experts']:.1f}"),
            ("acceptance_length", "-" if m["acceptance_length"] is None else f"{m['acceptance_length']:.3f}"),
            ("peak_memory_GiB", f"{m['peak_memory_GiB']:.2f}" + ("" if m["fits_device_memory"] else
                                                                  " (more than the device has)"))]
    if cfg["prefetch"] != "none":
        rows.append(("prefetched / used", f"{m['cache']['prefetched']:,} / {m['cache']['prefetch_used']:,}"))
    emit_table(["metric", "value"], rows)

"""``moesim specdecode``: simulate speculative decoding of an MoE on a GPU server (EcoSpec)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click
from click.core import ParameterSource

from moesim.cli.output import describe_routing, emit_json, emit_table, parse_int_list, writable_path
from moesim.cli.prefill_cmd import parse_overrides
from moesim.cli.run_options import derived_names, schema_options
from moesim.config.base import field_choices, field_default
from moesim.config.device import GPUServerProfile
from moesim.config.loading import validate_data
from moesim.config.profiles import gpu_profile
from moesim.config.schema import params, unflatten
from moesim.config.selectors import needs_predictor, spell_rules
from moesim.config.specdecode import SELECTORS, DraftTree, SpecDecodeRun, predictor_rules
from moesim.errors import InputError
from moesim.plotting import check_figure_path, pyplot, save_figure
from moesim.progress import activity
from moesim.results import SpecDecodeMetrics
from moesim.simulate.specdecode import gamma_sweep, simulate_specdecode
from moesim.typing_ import JSONValue

__all__ = ["specdecode", "show_specdecode", "plot_sweep", "describe_predictor", "predictor_name",
           "describe_draft", "check_ignored_options", "describe_comm"]

_ROWS = (("mean_active_experts", "{:.3f}"), ("acceptance_length", "{:.3f}"), ("hbm_bytes_per_step", "{:,.0f}"),
         ("hbm_expert_bytes_estimate_per_step", "{:,.0f}"),
         ("t_draft_s", "{:.4f}"), ("t_pred_s", "{:.4f}"), ("t_verify_s", "{:.4f}"), ("t_step_s", "{:.4f}"),
         ("tokens_per_s", "{:.2f}"), ("speedup_vs_ar", "{:.3f}"), ("steps", "{:,}"))


#: the parameters of SpecDecodeRun that ``moesim specdecode`` spells itself (``--trace``'s value is trace_path,
#: ``--set`` the overrides); every other is an option of schema_options
_SPELLED = ("model", "device", "trace", "selector", "gamma", "predictor", "depth", "width", "routing", "epsilon",
            "t_draft_ms", "t_pred_ms", "passes", "batch_size", "requests", "drafter", "draft_mu", "temperature", "seed")
#: the predictor's own parameters (its accuracy, its folds): read where the predictor is
_PREDICTOR_PARAMS = tuple(n for n in derived_names(SpecDecodeRun, _SPELLED) if params(SpecDecodeRun)[n].field
                          == "predictor")


def check_ignored_options(given: set[str], values: Mapping[str, object], selector: str | None, sweep: bool) -> None:
    """Refuse an option the run would ignore: a predictor (or its time, or epsilon) under
    confidence selection, a draft time at gamma 1, ``--gamma`` beside ``--gamma-sweep``."""
    if sweep and "gamma" in given:
        raise InputError("--gamma", "is replaced by --gamma-sweep's list: give one of them", values["gamma"])
    # a sweep runs every rule
    rules = [selector] if selector is not None else (list(SELECTORS) if sweep else [_default("selector")])
    if not any(needs_predictor(r) for r in rules):
        for name in ("predictor", "epsilon", "t_pred_ms", *_PREDICTOR_PARAMS):
            if name in given:
                raise InputError("--" + name.replace("_", "-"), f"is read only by the cost-aware rules (--selector "
                                 f"{predictor_rules()}), not by {rules[0]} selection",
                                 values[name])
    if not sweep and "t_draft_ms" in given and values["gamma"] == 1:
        raise InputError("--t-draft-ms", "needs gamma > 1 (gamma 1 verifies no draft)", values["t_draft_ms"])
    if not sweep and "t_pred_ms" in given and values["gamma"] == 1:
        raise InputError("--t-pred-ms", "needs gamma > 1 (gamma 1 verifies no draft)", values["t_pred_ms"])


def predictor_name(config: Mapping[str, JSONValue]) -> str:
    """``learned (2 folds)``, ``accuracy 0.93``, ``oracle``: a resolved predictor's config in words."""
    if config["kind"] == "learned":
        return f"learned ({config['folds']} folds)"
    if config["kind"] == "accuracy":
        return f"accuracy {config['fraction']:g}"
    return str(config["kind"])


def describe_predictor(info: Mapping[str, JSONValue], config: Mapping[str, JSONValue]) -> str:
    """The predictor line: which one, whether the rule used it, and where a default came from."""
    blind = spell_rules(r for r in SELECTORS if not needs_predictor(r))
    used = "" if info["used"] else f" (not used: {blind} selection and gamma 1 need no predictor)"
    source = f" [{info['source']}]" if info.get("default") else ""
    return predictor_name(config) + used + source


def describe_draft(draft: Mapping[str, JSONValue], routing: Mapping[str, JSONValue], source: str | None) -> str:
    """The draft line: the draft's top-1 logit, the wrong drafts' routing and where the numbers the
    run left out came from (``SpecDecodeRun.draft_source``; None: the run gave them)."""
    drift = f" ({draft['depth_drift']:+g} per depth)" if draft["depth_drift"] else ""
    arg = {"mixture": "context_free_share", "nearby": "window", "alternative": "layer_share"}.get(str(routing["kind"]))
    kind = routing["kind"] if arg is None else f"{routing['kind']}:{routing[arg]:g}"
    return f"top-1 logit {draft['top1_logit_mean']:+.4f}{drift}, wrong drafts {kind} [{source or 'given'}]"


def plot_sweep(rows: Sequence[Mapping[str, JSONValue]], path: str, title: str) -> None:
    """E and speedup against gamma, one line per selection rule (matplotlib, imported here)."""
    out = check_figure_path(path, "--plot")
    plt = pyplot("--plot", path)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for sel in dict.fromkeys(r["selector"] for r in rows):
        mine = [r for r in rows if r["selector"] == sel]
        axes[0].plot([r["gamma"] for r in mine], [r["mean_active_experts"] for r in mine], marker="o", label=sel)
        axes[1].plot([r["gamma"] for r in mine], [r["speedup_vs_ar"] for r in mine], marker="o", label=sel)
    axes[0].set(xlabel="gamma (tokens verified per step)", ylabel="E (experts per MoE layer per step)")
    axes[1].set(xlabel="gamma (tokens verified per step)", ylabel="speedup over AR")
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, out)


def _default(name: str) -> Any:
    """A specdecode option's default, from SpecDecodeRun's field (one definition)."""
    return field_default(SpecDecodeRun, name)


@click.command()
@click.option("--model", default=_default("model"), show_default=True, metavar="NAME|PATH")
@click.option("--device", default=_default("device"), show_default=True, metavar="NAME|PATH")
@click.option("--trace", "trace_path", metavar="PATH", help="Canonical trace (.parquet); default: the model's "
              "real trace from ../shared/traces, else a synthetic one (labelled).")
@click.option("--selector", metavar="RULE", help=f"Draft selection rule: {', '.join(SELECTORS)} "
              f"[default: {_default('selector')}; all three with --gamma-sweep]")
@click.option("--gamma", type=int, default=_default("gamma"), show_default=True,
              help="Tokens verified per step, root included.")
@click.option("--predictor", metavar="KIND", help="oracle, learned[:FOLDS] or accuracy:P [default: learned on the "
              "model's real trace, else the EcoSpec paper's published accuracy for the model, else 0.80].")
@click.option("--depth", type=int, default=field_default(DraftTree, "depth"), show_default=True,
              help="Draft steps (tree depth).")
@click.option("--width", type=int, default=field_default(DraftTree, "width"), show_default=True,
              help="Tokens kept per draft step.")
@click.option("--draft-routing", default=_default("routing").kind, show_default=True,
              help="Routing of non-true drafts: mixture[:SHARE], nearby[:W], request, trace, same-position, "
              "alternative[:SHARE]; mixture's SHARE defaults to the model's fitted draft, else the generic one.")
@click.option("--epsilon", type=float, default=_default("epsilon"), show_default=True,
              help="Score epsilon: P / (cost + eps).")
@click.option("--t-draft-ms", type=float, help="Draft time per step (default: published or estimated).")
@click.option("--t-pred-ms", type=float, help="Predictor time per step (default 4 ms when a predictor is used).")
@click.option("--passes", type=int, default=_default("passes"), show_default=True, help="Replays of the whole trace.")
@click.option("--batch-size", type=int, default=_default("batch_size"), show_default=True,
              help="Requests decoded together (one verification over the union of their trees' experts).")
@click.option("--requests", metavar="LABEL", help="Replay only the requests whose label contains LABEL "
              "(a dataset of the trace: gpt-oss-120b chat, code, story, summarize; mixtral gsm8k, humaneval).")
@click.option("--draft", "drafter", type=click.Choice(field_choices(SpecDecodeRun, "drafter")),
              default=_default("drafter"), show_default=True,
              help="The draft: an EAGLE-3 tree, or the model's MTP module reused at every draft step (DeepSeek-V3.1: "
              "the same tree, 85-90% accepted at the first draft, decaying with depth as published).")
@click.option("--draft-mu", type=float, help="The draft's mean top-1 logit (acceptance): default, the model's "
              "fitted draft (its catalog entry's eagle3_draft, fitted to its published alpha), else the generic "
              "one, fitted to gpt-oss-120b's alpha = 1.88 (with --draft mtp: the MTP module's, 2.640); the output "
              "names which.")
@schema_options(SpecDecodeRun, spelled=_SPELLED)
@click.option("--temperature", type=float, default=_default("temperature"), show_default=True,
              help="Sampling temperature, 0 (greedy) or 1 (rejection sampling: acceptance from the model's "
              "published T=1/T=0 ratio).")
@click.option("--seed", type=int, default=_default("seed"), show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.FIELD=VALUE",
              help="Override one profile number (repeatable), e.g. runtime.per_active_expert_us=20")
@click.option("--gamma-sweep", metavar="G1,G2,...", help="Run every gamma listed (and every rule unless "
              "--selector is given) and print one row per run.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=writable_path,
              help="With --gamma-sweep: write E and speedup vs gamma.")
@click.option("--quiet", is_flag=True, help="No progress spinner (it is drawn only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def specdecode(model: str, device: str, trace_path: str | None, selector: str | None, gamma: int,
               predictor: str | None,
               depth: int, width: int, draft_routing: str, epsilon: float, t_draft_ms: float | None,
               t_pred_ms: float | None, passes: int, batch_size: int, requests: str | None, drafter: str,
               draft_mu: float | None, temperature: float, seed: int,
               overrides: tuple[str, ...], gamma_sweep: str | None, plot: str | None, quiet: bool,
               as_json: bool, **derived: Any) -> None:
    """Simulate speculative decoding with draft trees and a selection rule (EcoSpec), batch 1 or more."""
    source = click.get_current_context().get_parameter_source
    given = {p for p in ("predictor", "epsilon", "t_pred_ms", "t_draft_ms", "gamma")
             if source(p) not in (ParameterSource.DEFAULT, None)}
    given |= {name for name, value in derived.items() if value is not None}
    check_ignored_options(given, {"predictor": predictor, "epsilon": epsilon, "t_pred_ms": t_pred_ms,
                                  "t_draft_ms": t_draft_ms, "gamma": gamma, **derived}, selector,
                          gamma_sweep is not None)
    flat = {"model": model, "device": device, "trace": trace_path, "selector": selector, "gamma": gamma,
            "predictor": predictor, "depth": depth, "width": width, "routing": draft_routing, "epsilon": epsilon,
            "t_draft_ms": t_draft_ms, "t_pred_ms": t_pred_ms, "passes": passes, "batch_size": batch_size,
            "requests": requests, "drafter": drafter, "draft_mu": draft_mu, "temperature": temperature, "seed": seed,
            **derived}
    run = validate_data(SpecDecodeRun, {**unflatten(SpecDecodeRun, flat), "overrides": parse_overrides(overrides)})
    profile = gpu_profile(run.device, run.overrides)
    if plot and gamma_sweep is None:
        raise InputError("--plot", "needs --gamma-sweep", plot)
    if gamma_sweep is not None:
        gammas = parse_int_list(gamma_sweep, "--gamma-sweep")
        with activity(f"specdecode --gamma-sweep {run.model}", False if quiet else None):
            _sweep(run, profile, gammas, [selector] if selector else list(SELECTORS), plot, as_json)
        return
    with activity(f"specdecode {run.model}, draft {run.drafter}", False if quiet else None):
        result = simulate_specdecode(run)
    show_specdecode(result.metrics, as_json)


def show_specdecode(metrics: SpecDecodeMetrics, as_json: bool) -> None:
    """Print a speculative-decoding result as ``moesim specdecode`` does: a table, or its JSON."""
    m = metrics.model_dump(mode="json")
    if as_json:
        emit_json(m)
        return
    cfg, tr = m["config"], m["config"]["trace"]
    click.echo(f"{cfg['model']} on {cfg['device']}: draft {cfg['drafter']}, {cfg['selector']}, gamma {cfg['gamma']}, "
               f"batch {m['batch_size']}, T {m['temperature']:g}, tree "
               f"{cfg['tree']['depth']} x {cfg['tree']['width']}, draft routing {cfg['routing']['kind']}")
    click.echo(f"predictor: {describe_predictor(m['predictor'], cfg['predictor'])}")
    click.echo(f"draft: {describe_draft(cfg['draft'], cfg['routing'], cfg['run'].get('draft_source'))}")
    if cfg["overrides"]:
        click.echo("what-if: " + ", ".join(f"{k}={v:g}" for k, v in sorted(cfg["overrides"].items())))
    click.echo(f"{describe_routing(tr)}, {tr['decode_tokens']:,} decode tokens x {cfg['passes']} passes")
    rows = [(k, fmt.format(m[k])) for k, fmt in _ROWS]
    rows.append(("predictor_accuracy", "-" if m["predictor_accuracy"] is None else f"{m['predictor_accuracy']:.3f}"))
    rows.append(("ar.t_token_s", f"{m['ar']['t_token_s']:.4f}"))
    emit_table(["metric", "value"], rows)
    if m["runtime_path"] is not None:
        click.echo(f"runtime path: {m['runtime_path']} (verification cost "
                   f"{'grows with' if m['verify_depends_on_union'] else 'does not depend on'} the union of experts)")
    comm = describe_comm(m)
    if comm:
        click.echo(comm)
    for note in m["notes"]:
        click.echo(f"note: {note}")


def describe_comm(m: dict[str, Any]) -> str:
    """One line on the collectives of a forward spread over GPUs ('' on one GPU or a layer split)."""
    par = m.get("parallel") or {}
    tp, ep = int(par.get("tensor_parallel", 1)), int(par.get("expert_parallel", 1))
    if tp <= 1:
        return ""
    what = f"TP {tp}" + (f", experts split {ep} ways" if ep > 1 else "")
    how = ("an all-reduce after attention and a dispatch + combine all-to-all a MoE layer"
           if par.get("moe_all_to_all") else "2 all-reduces a layer")
    ar_comm, ar_t = float(m["ar"]["t_comm_s"]), float(m["ar"]["t_token_s"])
    v_comm, v_t = float(m["t_verify_comm_s"]), float(m["t_verify_s"])
    return (f"communication: {what} ({how}): {v_comm * 1e3:.2f} ms of T_verify ({v_comm / v_t:.0%}), "
            f"{ar_comm * 1e3:.2f} ms of each AR token ({ar_comm / ar_t:.0%}); at batch 1 a collective's latency, "
            "which grows with log2 of the GPUs, outweighs its bytes, so more GPUs divide the weight reads but "
            "add this")


def _sweep(run: SpecDecodeRun, profile: GPUServerProfile, gammas: list[int], selectors: list[str],
           plot: str | None, as_json: bool) -> None:
    rows = [row.flat() for row in gamma_sweep(run, gammas, selectors)]
    if plot:
        plot_sweep(rows, plot, f"{run.model} on {profile.name}")
    if as_json:
        emit_json({"sweep": rows, "config": {**run.model_dump(mode="json"), "device": profile.name,
                                             "predictor": rows[0]["predictor_config"]}})
        return
    pred = rows[0]["predictor_config"]
    source = f" [{pred['source']}]" if pred["default"] else ""
    click.echo(f"{run.model} on {profile.name}: predictor {predictor_name(pred)}{source} "
               "(used by ecospec and global-cost above gamma 1)")
    click.echo("draft: " + describe_draft(run.draft.model_dump(), run.routing.model_dump(), run.draft_source))
    emit_table(["selector", "gamma", "predictor", "E", "alpha", "t_verify_s", "tokens_per_s", "speedup"],
               [(r["selector"], r["gamma"], "-" if r["predictor"] is None else predictor_name(r["predictor_config"]),
                 f"{r['mean_active_experts']:.3f}", f"{r['acceptance_length']:.3f}",
                 f"{r['t_verify_s']:.4f}", f"{r['tokens_per_s']:.2f}", f"{r['speedup_vs_ar']:.3f}") for r in rows])

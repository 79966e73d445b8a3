"""``moesim require``: the least value of one resource (or of each) that meets a target."""

from __future__ import annotations

from typing import Any

import click

from moesim.cli.output import emit_json, emit_table, writable_path
from moesim.cli.prefill_cmd import FINITE, parse_overrides
from moesim.config.base import field_default
from moesim.config.prefill import PrefillRun
from moesim.errors import InputError
from moesim.typing_ import JSONValue

__all__ = ["require"]

#: moesim.autoconfig.require.resources.RESOURCES (a test holds them equal; not imported: --help loads no simulator)
_RESOURCES = ("ufs", "memory", "npu", "hbm", "gpus")


def _target(profile_kind: str, ttft_s: float | None, tokens_per_s: float | None) -> tuple[str, float]:
    """The target: --ttft-s of a phone prefill, --tokens-per-s of GPU decoding."""
    option, value = ("--ttft-s", ttft_s) if profile_kind == "mobile-npu" else ("--tokens-per-s", tokens_per_s)
    other = "--tokens-per-s" if option == "--ttft-s" else "--ttft-s"
    workload = "prefill on a phone" if option == "--ttft-s" else "batch-1 decoding on a GPU server"
    if (tokens_per_s if option == "--ttft-s" else ttft_s) is not None:
        raise InputError(other, f"is not a target of {workload} (its target: {option})", show_value=False)
    if value is None:
        raise InputError(option, f"is required: the target of {workload}", show_value=False)
    if not value > 0:
        raise InputError(option, "must be > 0", value)
    return option, value


def _workload(model: str, device: str, tokens: int | None, budget: float | None, sets: dict[str, float],
              trace: str | None) -> Any:
    from moesim.autoconfig.require.evaluate import GPUDecodeWorkload, PrefillWorkload
    from moesim.config.catalog import load_model
    from moesim.config.device import GPUServerProfile, MobileNPUProfile
    from moesim.config.profiles import load_profile, override_profile

    profile = load_profile(device)
    profile = override_profile(profile, sets) if sets else profile
    if isinstance(profile, MobileNPUProfile):
        return PrefillWorkload(model=load_model(model), device=profile, device_arg=device, trace=trace,
                               tokens=tokens or field_default(PrefillRun, "tokens"), budget_GiB=budget, overrides=sets)
    if not isinstance(profile, GPUServerProfile):
        raise InputError("--device", f"must be a mobile-npu or gpu-server profile, {profile.name} is {profile.kind}",
                         device)
    for option, given in (("--tokens", tokens), ("--memory-budget-gib", budget), ("--trace", trace)):
        if given is not None:
            raise InputError(option, "applies to prefill on a phone, not to decoding on a GPU server", given)
    return GPUDecodeWorkload(model=load_model(model), device=profile)


#: the curve printed: values tried at least 2% apart
_CURVE_STEP = 1.02


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _row(a: Any) -> tuple[str, ...]:
    res, at = a.resource, a.at_threshold
    if a.threshold is None:
        best = "nothing runs" if a.best is None else f"best {_fmt(a.best[1])} at {_fmt(a.best[0])} {res.unit}"
        return (res.name, res.field, f"{_fmt(a.profile_value)}", "not reachable", "-", "-", best)
    binding = at.binding if at.metric is not None else "does not fit"
    if at.detail:
        binding += ", " + ", ".join(f"{k} {_fmt(v, 3) if isinstance(v, float) else v}" for k, v in at.detail.items()
                                    if k in ("bubble_share", "config", "gpus"))
    below = "- (low end of the range)" if a.below is None else \
        f"{'does not fit' if a.below.metric is None else _fmt(a.below.metric)} at {_fmt(a.below_value)}"
    note = "" if a.monotone else " (non-monotone)"
    return (res.name, res.field, _fmt(a.profile_value), f"{_fmt(a.threshold)} {res.unit}{note}",
            _fmt(at.metric), below, binding)


def _curve_rows(answers: list[Any]) -> list[tuple[str, str, str]]:
    rows = []
    for a in answers:
        if a.resource.integer:
            shown = [c for c in a.curve if c[0] in {float(2**i) for i in range(7)} or c[0] == a.threshold]
        else:
            shown = []
            for c in a.curve:         # every value tried, but one of each pair the search placed 0.1% apart
                if not shown or c[0] > shown[-1][0] * _CURVE_STEP:
                    shown.append(c)
        rows += [(a.resource.name, _fmt(v), _fmt(m)) for v, m in shown]
    return rows


def _conf(c: Any) -> dict[str, JSONValue] | None:
    return None if c is None else {"metric": c.metric, "binding": c.binding, **c.detail}


def _as_json(a: Any) -> dict[str, JSONValue]:
    return {"resource": a.resource.name, "field": a.resource.field, "unit": a.resource.unit, "metric": a.metric,
            "target": a.target, "profile_value": a.profile_value, "range": list(a.span), "threshold": a.threshold,
            "reachable": a.threshold is not None, "confirmed": a.confirmed, "at_threshold": _conf(a.at_threshold),
            "below_value": a.below_value, "below": _conf(a.below), "monotone": a.monotone,
            "best": None if a.best is None else {"value": a.best[0], "metric": a.best[1]},
            "curve": [{"value": v, "metric": m} for v, m in a.curve]}


@click.command()
@click.option("--model", required=True, metavar="NAME|PATH")
@click.option("--device", default=field_default(PrefillRun, "device"), show_default=True, metavar="NAME|PATH")
@click.option("--tokens", type=click.IntRange(min=1), help="Prompt length of the prefill (phone) [default: 1024].")
@click.option("--ttft-s", type=FINITE, help="Target of a phone prefill: TTFT at most this.")
@click.option("--tokens-per-s", type=FINITE, help="Target of batch-1 decoding on a GPU server: at least this.")
@click.option("--memory-budget-gib", type=FINITE, help="Peak-memory budget of the prefill, held fixed "
              "(not with --resource memory, which searches it).")
@click.option("--resource", type=click.Choice(_RESOURCES), help="The resource to size [default: every resource of "
              "the device's kind: ufs, memory, npu on a phone; hbm, gpus on a GPU server].")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.FIELD=VALUE",
              help="Override one profile number of the fixed rest (repeatable).")
@click.option("--trace", metavar="PATH", help="Canonical trace (.parquet) for the prefill's routing.")
@click.option("--plot", metavar="PATH", callback=writable_path, help="Save the metric-vs-resource curves "
              "(.png/.svg/.pdf), the threshold marked.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def require(model: str, device: str, tokens: int | None, ttft_s: float | None, tokens_per_s: float | None,
            memory_budget_gib: float | None, resource: str | None, overrides: tuple[str, ...], trace: str | None,
            plot: str | None, as_json: bool) -> None:
    """The least value of a hardware resource that meets a TTFT or tokens/s target, the rest fixed."""
    from moesim.autoconfig.require.answer import require as answer
    from moesim.autoconfig.require.resources import resource_of, resources_for

    work = _workload(model, device, tokens, memory_budget_gib, parse_overrides(overrides), trace)
    option, target = _target(work.device.kind, ttft_s, tokens_per_s)
    chosen = [resource_of(resource, work.device)] if resource else resources_for(work.device.kind)
    if memory_budget_gib is not None and any(r.name == "memory" for r in chosen):
        raise InputError("--memory-budget-gib", "is what --resource memory searches: give one or the other",
                         memory_budget_gib)
    answers = [answer(work, r, target, full_grid=plot is not None) for r in chosen]
    _show(answers, work, option, target, plot, as_json)


def _show(answers: list[Any], work: Any, option: str, target: float, plot: str | None, as_json: bool) -> None:
    what = f"prefill of {work.tokens} tokens" if work.metric == "ttft_s" else "batch-1 decoding"
    sign = "<=" if work.metric == "ttft_s" else ">="
    title = f"{work.model.name} on {work.device.name}, {what}, target {work.metric} {sign} {target:g}"
    if plot:
        from moesim.autoconfig.require.plot import plot_answers

        plot_answers(answers, title, plot)
    missed = [a for a in answers if a.threshold is None]
    if as_json:
        emit_json({"model": work.model.name, "device": work.device.name, "target": {work.metric: target},
                   "answers": [_as_json(a) for a in answers], **({"plot": plot} if plot else {})})
    elif len(missed) < len(answers):      # an answer that is all "not reachable" is its one error line
        click.echo(title)
        emit_table(["resource", "field", "profile", "threshold", work.metric, "at 0.99x (half the GPUs)"
                    if any(a.resource.integer for a in answers) else "at 0.99x", "binding at threshold"],
                   [_row(a) for a in answers])
        click.echo("curve (fast evaluator):")
        emit_table(["resource", "value", work.metric], _curve_rows(answers))
    if missed:
        a = missed[0]
        unit = " s" if a.metric == "ttft_s" else " tokens/s"
        best = "nothing runs in it" if a.best is None else \
            f"the best reachable is {_fmt(a.best[1])}{unit} at {_fmt(a.best[0])} {a.resource.unit}"
        raise InputError(option, f"is not reachable within the physical range of {a.resource.field} "
                         f"({_fmt(a.span[0])} to {_fmt(a.span[1])} {a.resource.unit}): {best}", target)

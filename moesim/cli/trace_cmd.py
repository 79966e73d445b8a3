"""``moesim trace``: import, inspect, summarise, assemble and synthesize routing traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from moesim.calibrate.draft_routing import overlap_stats, read_draft_log, render_report, routing_shares
from moesim.cli.output import emit_json, emit_table, fmt_num, writable_path
from moesim.errors import InputError
from moesim.progress import activity
from moesim.traces import (
    FORMATS,
    TargetStats,
    assemble_prompt,
    import_report,
    import_trace,
    read_trace,
    synthesize,
    trace_stats,
    write_trace,
)
from moesim.traces.stats import TraceStats
from moesim.traces.synth import default_stats
from moesim.traces.trace import PHASE_NAMES, RoutingTrace

__all__ = ["trace"]

_JSON = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable keys).")
_OUT = click.option("-o", "--output", "out", required=True, callback=writable_path,
                    type=click.Path(dir_okay=False, path_type=Path),
                    help="Trace file to write (.parquet).")


@click.group()
def trace() -> None:
    """Routing traces: import third-party logs, statistics, prompt assembly, synthetic traces."""


def _summary(t: RoutingTrace) -> dict[str, Any]:
    phases = {name: int((t.phase == i).sum()) for i, name in enumerate(PHASE_NAMES)}
    return {"model": t.meta.model, "synthetic": t.meta.synthetic, "tokens": t.num_tokens,
            "layers": list(t.layers), "k": t.top_k, "experts": t.num_experts, "segments": t.num_segments,
            "phases": phases, "scores": t.scores is not None, "rank_bucket": t.rank_bucket is not None,
            "token_ids": t.token_ids is not None, "source": t.meta.source, "license": t.meta.license}


def _parse_lengths(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise InputError("--segments", "must be comma-separated token counts", text) from None


@trace.command("import")
@click.argument("src", type=click.Path(path_type=Path))
@click.option("--format", "fmt", required=True, type=click.Choice(list(FORMATS)), help="Source format.")
@click.option("--model", required=True, metavar="NAME|PATH", help="Catalog model the routing belongs to.")
@click.option("--segments", metavar="N,N,...", help="nvmoe only: workload lengths (not stored in the file).")
@_OUT
@_JSON
def import_cmd(src: Path, fmt: str, model: str, segments: str | None, out: Path, as_json: bool) -> None:
    """Import SRC (a file or folder) into the canonical trace format."""
    t = import_trace(src, fmt, model, segment_lengths=_parse_lengths(segments))
    write_trace(t, out)
    report = import_report(t)
    assert report is not None
    if as_json:
        emit_json({"output": str(out), "trace": _summary(t), "import_report": report.model_dump(mode="json")})
        return
    for line in report.lines():
        click.echo(line)
    click.echo(f"wrote {out}")


def _stats_rows(s: TraceStats) -> list[tuple[str, str, str, str]]:
    rows = []
    for key, value in s.coverage.items():
        rand = s.random_coverage.get(key)
        rows.append((f"coverage W={key}", fmt_num(value), "-", fmt_num(rand)))
    for key, value in s.mean_union.items():
        rows.append((f"mean union w={key}", fmt_num(value, 2), fmt_num(s.shuffled_mean_union[key], 2),
                     fmt_num(s.random_mean_union[key], 2)))
    return rows


@trace.command("stats")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--per-layer", is_flag=True, help="Also print per-layer popularity skew.")
@_JSON
def stats_cmd(path: Path, per_layer: bool, as_json: bool) -> None:
    """Popularity skew, reuse, window coverage and mean unions of a trace (docs/traces.md)."""
    t = read_trace(path)
    s = trace_stats(t)
    if as_json:
        emit_json({"path": str(path), **s.model_dump(mode="json")})
        return
    kind = "synthetic" if s.synthetic else "real"
    click.echo(f"{path}: {s.model} ({kind}), {s.tokens:,} tokens in {s.segments} segment(s) "
               f"({s.sequential_tokens:,} sequential), {s.layers} layers, {s.experts} experts, k={s.k}")
    click.echo(f"load: normalised entropy {fmt_num(s.entropy)}, max/mean {fmt_num(s.max_mean_load, 2)} "
               "(means over layers)")
    click.echo(f"reuse: {fmt_num(s.reuse)} (uniform random {fmt_num(s.random_reuse)})")
    emit_table(["statistic", "trace", "shuffled", "uniform_random"], _stats_rows(s))
    if per_layer:
        rows = [(i, fmt_num(e), fmt_num(m, 2)) for i, e, m in
                zip(t.layers, s.per_layer_entropy, s.per_layer_max_mean_load)]
        emit_table(["layer", "entropy", "max_mean_load"], rows)


@trace.command("draft-log")
@click.argument("path", type=click.Path(path_type=Path))
@_JSON
def draft_log_cmd(path: Path, as_json: bool) -> None:
    """Expert overlap of draft-tree nodes in a log of native_ref/gpu/log_draft_routing.py, and the
    routing shares it implies (docs/background/specdecode-evidence.md section 7.4)."""
    log = read_draft_log(path)
    stats = overlap_stats(log)
    if not as_json:
        click.echo(render_report(log, stats))
        return

    def num(x: float) -> float | None:
        return None if x != x else round(x, 6)
    emit_json({"path": str(path), "model": log.header["model"], "nodes": len(log.nodes), "pairs": stats.pairs,
               "overall": {k: num(v) for k, v in stats.overall.items()},
               "by_layer": {k: [num(float(x)) for x in v] for k, v in stats.by_layer.items()},
               "shares": {k: num(v) for k, v in routing_shares(stats).items()}})


@trace.command("info")
@click.argument("path", type=click.Path(path_type=Path))
@_JSON
def info_cmd(path: Path, as_json: bool) -> None:
    """Metadata of a trace file: model, provenance, import report, assembly."""
    t = read_trace(path)
    if as_json:
        emit_json({"path": str(path), "trace": _summary(t), "meta": t.meta.model_dump(mode="json")})
        return
    for key, value in _summary(t).items():
        click.echo(f"{key}: {value}")
    click.echo(f"recorded: {t.meta.recorded_how}")
    report = import_report(t)
    for line in report.lines() if report else []:
        click.echo(line)
    for note in t.meta.notes:
        click.echo(f"note: {note}")
    if t.meta.assembly is not None:
        a = t.meta.assembly
        pieces = "; ".join(f"{p.label} [{p.start}:{p.stop}]" for p in a.pieces)
        click.echo(f"assembled: {a.n_tokens:,} tokens from {pieces} (concatenated: {a.concatenated}, "
                   f"repeated: {a.repeated})")
    if t.meta.synth is not None:
        click.echo(f"synthetic: seed {t.meta.synth.get('seed')}, fitted to {t.meta.synth.get('fitted_to')}")


@trace.command("assemble")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--tokens", required=True, type=int, help="Prompt length N.")
@click.option("--start-segment", type=click.IntRange(min=0), default=0, show_default=True,
              help="First segment to draw from.")
@click.option("--allow-repeat", is_flag=True, help="Cycle the trace when it is shorter than N.")
@_OUT
@_JSON
def assemble_cmd(path: Path, tokens: int, start_segment: int, allow_repeat: bool, out: Path,
                 as_json: bool) -> None:
    """Build an N-token prefill prompt's routing from consecutive tokens of a trace."""
    t = assemble_prompt(read_trace(path), tokens, start_segment=start_segment, allow_repeat=allow_repeat)
    write_trace(t, out)
    assert t.meta.assembly is not None
    if as_json:
        emit_json({"output": str(out), "assembly": t.meta.assembly.model_dump(mode="json")})
        return
    a = t.meta.assembly
    click.echo(f"{a.n_tokens:,} tokens from {len(a.pieces)} piece(s); concatenated: {a.concatenated}; "
               f"repeated: {a.repeated}; source phases: {', '.join(a.source_phases)}")
    emit_table(["segment", "label", "start", "stop"], [(p.segment, p.label, p.start, p.stop) for p in a.pieces])
    click.echo(f"wrote {out}")


@trace.command("synth")
@click.option("--model", required=True, metavar="NAME|PATH", help="Catalog model.")
@click.option("--tokens", required=True, type=int, help="Tokens to generate.")
@click.option("--fit", "fit_path", type=click.Path(path_type=Path), help="Real trace (.parquet) to fit.")
@click.option("--seed", default=0, show_default=True, help="Generator seed.")
@click.option("--entropy", type=float, help="Without --fit: normalised load entropy per layer.")
@click.option("--reuse", type=float, help="Without --fit: token-to-token reuse.")
@click.option("--coverage-32", "cov32", type=float, help="Without --fit: coverage at W=32 (optional).")
@click.option("--coverage-128", "cov128", type=float, help="Without --fit: coverage at W=128 (optional).")
@click.option("--segment-tokens", type=int, metavar="N", help="Without --fit: tokens per request [default: 400 "
              "with the default statistics, 512 with --entropy and --reuse].")
@click.option("--quiet", is_flag=True, help="No progress spinner (it is drawn only on a terminal anyway).")
@_OUT
@_JSON
def synth_cmd(model: str, tokens: int, fit_path: Path | None, seed: int, entropy: float | None,
              reuse: float | None, cov32: float | None, cov128: float | None, segment_tokens: int | None,
              quiet: bool, out: Path, as_json: bool) -> None:
    """Generate a synthetic trace (always labelled synthetic) fitted to a trace or to statistics.

    Without --fit and statistics, defaults typical of the real traces are used (and stated).
    """
    given = {"--entropy": entropy, "--reuse": reuse, "--coverage-32": cov32, "--coverage-128": cov128}
    if segment_tokens is not None and segment_tokens < 1:
        raise InputError("--segment-tokens", "must be an integer >= 1 (tokens per synthetic request)", segment_tokens)
    if segment_tokens is not None and fit_path is None and segment_tokens > max(tokens, 1):
        raise InputError("--segment-tokens", f"must be <= --tokens ({tokens:,}): a request longer than the trace "
                         "is never generated", segment_tokens)
    _check_tokens(model, tokens)
    with activity(f"trace synth {model}, {tokens} tokens", False if quiet else None):
        t = _synthesize(model, tokens, fit_path, seed, given, segment_tokens)
    write_trace(t, out)
    if as_json:
        emit_json({"output": str(out), "trace": _summary(t), "synth": t.meta.synth})
        return
    assert t.meta.synth is not None
    click.echo(f"{t.num_tokens:,} synthetic tokens of {t.meta.model}; fitted to {t.meta.synth['fitted_to']}")
    click.echo(f"targets {t.meta.synth['targets']}; fitting run {t.meta.synth['fit_run']}")
    click.echo(f"wrote {out}")


def _check_tokens(model_name: str, tokens: int) -> None:
    """Refuse, before any work, a trace longer than this machine can hold."""
    from moesim.config.catalog import load_model
    from moesim.limits import check_prompt_tokens

    if tokens < 1:
        raise InputError("--tokens", "must be an integer >= 1", tokens)
    model = load_model(model_name)
    try:
        check_prompt_tokens(tokens, model.name, model.num_moe_layers, model.moe.top_k)
    except InputError as exc:
        raise exc.renamed("--tokens") from None


def _synthesize(model: str, tokens: int, fit_path: Path | None, seed: int, given: dict[str, float | None],
                segment_tokens: int | None) -> RoutingTrace:
    if fit_path is not None:
        extra = [k for k, v in {**given, "--segment-tokens": segment_tokens}.items() if v is not None]
        if extra:
            raise InputError("--fit", "excludes the statistics options (the fit takes them from the trace)", extra)
        return synthesize(model, tokens, fit=read_trace(fit_path), seed=seed)
    if all(v is None for v in given.values()):
        from moesim.config.catalog import load_model
        base = default_stats(load_model(model).name)[0]
        stats = None if segment_tokens is None else base.model_copy(update={"segment_tokens": segment_tokens})
        return synthesize(model, tokens, stats=stats, seed=seed)  # the model's defaults, stated in meta.synth
    entropy, reuse = given["--entropy"], given["--reuse"]
    if entropy is None or reuse is None:
        raise InputError("synth", "needs both --entropy and --reuse when statistics are given",
                         [k for k, v in given.items() if v is not None])
    stats = _target_stats(entropy, reuse, given["--coverage-32"], given["--coverage-128"],
                          512 if segment_tokens is None else segment_tokens)
    return synthesize(model, tokens, stats=stats, seed=seed)


def _target_stats(entropy: float, reuse: float, cov32: float | None, cov128: float | None,
                  segment_tokens: int) -> TargetStats:
    try:
        return TargetStats(entropy=entropy, reuse=reuse, coverage_32=cov32, coverage_128=cov128,
                           segment_tokens=segment_tokens)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"--{str(err['loc'][0]).replace('_', '-')}", err["msg"].lower(), err.get("input")) from None

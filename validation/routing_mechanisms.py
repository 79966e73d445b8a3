"""Which routing of rejected drafts could make EcoSpec cut Qwen3-235B's E from 23.7 to 20.5 (issue 26
item 3, task h26c)? An exploration, not part of the model: each mechanism is applied by wrapping the
replay's step function for the duration of one run, and nothing here changes moesim's defaults.

    python validation/routing_mechanisms.py [--passes 2]

Mechanisms (each with one share, fitted where said to gpt-oss-120b's EAGLE-3 E = 11.6 on its real
trace, then carried to Qwen3-235B-A22B on its synthetic trace, draft top-1 logit fitted to alpha 2.41):

A. layer-dependent ``alternative`` share (hypothesis 1: routing is driven by context in some layers
   and by the token in others): flat, rising with depth, falling with depth, deep half only.
B. the Qwen3 synthetic trace's statistics (hypothesis 2): popularity entropy and token-to-token reuse
   varied, the ``mixture`` share refitted to Qwen3's E = 23.7 on each trace.
C. the predictor (hypothesis 3): EcoSpec with an oracle (fraction 1.0) against the paper's 82%.
D. draft-tree neighbours: a wrong draft copies, per MoE layer with probability S, the routing of
   its tree parent (``parent``) or of a sibling, the other child of the same parent (``sibling``:
   two candidate tokens at the same position after the same prefix); the predictor sees the same
   copy. Scanned over S, fitted on gpt-oss, and on Qwen3 traces of higher popularity entropy.

Writes validation/routing_mechanisms.md. Needs ../shared/traces (the real gpt-oss-120b trace).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _script import passes_args

import moesim.policies.specdecode.step as step_mod
import moesim.workloads.specdecode as workload_mod
from moesim.calibrate.ecospec import calibration_run, fit_draft
from moesim.config.catalog import load_model
from moesim.config.specdecode import PUBLISHED_PREDICTOR_ACCURACY, SpecDecodeRun
from moesim.files import write_text_atomic
from moesim.policies.specdecode.routing import _GOLDEN, _splitmix, layer_mask, step_sources
from moesim.simulate.specdecode import replay_run, resolve_trace
from moesim.traces.sources import SYNTHETIC_TOKENS
from moesim.traces.synth import DEFAULT_STATS, TargetStats, synthesize
from moesim.traces.trace import RoutingTrace

HERE = Path(__file__).resolve().parent
OUT = HERE / "routing_mechanisms.md"
F64 = npt.NDArray[np.float64]
Trace = RoutingTrace | None


def _with(run: SpecDecodeRun, **update: Any) -> SpecDecodeRun:
    return SpecDecodeRun.model_validate({**run.model_dump(), **update})


def _e_alpha(run: SpecDecodeRun, trace: Trace = None) -> tuple[float, float]:
    s = replay_run(run, trace).stats
    return float(s.active.mean()), float((s.accepted + 1).mean())


def _eco(run: SpecDecodeRun, model: str, fraction: float | None = None) -> SpecDecodeRun:
    frac = PUBLISHED_PREDICTOR_ACCURACY[model] if fraction is None else fraction
    return _with(run, selector="ecospec", predictor={"kind": "accuracy", "fraction": frac})


def _bisect(e: Callable[[float], float], target: float, rounds: int = 10) -> float:
    rising = e(1.0) > e(0.0)
    lo, hi = 0.0, 1.0
    for _ in range(rounds):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (e(mid) < target) == rising else (lo, mid)
    return (lo + hi) / 2


# --- A: a per-layer share profile for the 'alternative' family ----------------------------------

@contextmanager
def layer_profile(profile: Callable[[int, float], F64]) -> Iterator[None]:
    """``alternative`` with share ``profile(n_layers, share)[l]`` at layer ``l`` (same hashed draws)."""
    def mask(u: F64, n_layers: int, share: float) -> npt.NDArray[np.bool_]:
        seeds = (u[:, 2] * 2.0**53).astype(np.uint64)
        layers = np.arange(n_layers, dtype=np.uint64) * _GOLDEN
        draws = (_splitmix(seeds[:, None] ^ layers[None, :]) >> np.uint64(11)).astype(np.float64) / 2.0**53
        out: npt.NDArray[np.bool_] = draws < profile(n_layers, share)[None, :]
        return out
    saved = step_mod.layer_mask
    step_mod.layer_mask = mask
    try:
        yield
    finally:
        step_mod.layer_mask = saved


PROFILES: dict[str, Callable[[int, float], F64]] = {
    "flat (the existing family)": lambda n, s: np.full(n, s),
    "rising with depth (0 -> 2S)": lambda n, s: np.minimum(2 * s * np.linspace(0, 1, n), 1.0),
    "falling with depth (2S -> 0)": lambda n, s: np.minimum(2 * s * np.linspace(1, 0, n), 1.0),
    "deep half only (2S)": lambda n, s: np.where(np.arange(n) >= n // 2, min(2 * s, 1.0), 0.0),
}


# --- D: wrong drafts that copy a tree neighbour's routing ---------------------------------------

def _links(kind: str, parent: npt.NDArray[np.integer], true: list[int]) -> npt.NDArray[np.int64]:
    """The node each wrong draft copies from (-1: none): its parent, or the other child of its parent."""
    n, out, truth = len(parent), np.full(len(parent), -1, dtype=np.int64), set(true)
    for i in range(1, n):
        if i in truth:
            continue
        if kind == "parent":
            out[i] = int(parent[i])
        else:
            sib = [j for j in range(1, n) if parent[j] == parent[i] and j != i]
            out[i] = sib[0] if sib else -1
    return out


def neighbour_step(kind: str, share: float) -> Callable[..., step_mod.StepOutcome]:
    """A replacement for :func:`speculative_step` with ``trace`` routing plus neighbour copies."""
    def run(settings: step_mod.StepSettings, inputs: step_mod.StepInputs, draws: step_mod.StepDraws, s: int,
            p: int, seg: tuple[int, int], max_drafts: int, cost: Any) -> step_mod.StepOutcome:
        trees, shape = draws.trees, settings.shape
        src, _, true = step_sources(settings.routing, shape.node_depth, trees.true_node[s], p, seg,
                                    inputs.actual.shape[0], draws.uniforms[s])
        act = inputs.actual[src].copy()
        pred = None if inputs.predict is None else inputs.predict(p, src, shape.node_depth).copy()
        link = _links(kind, trees.parent[s], true)
        mask = layer_mask(draws.uniforms[s], inputs.n_layers, share)
        wpl = act.shape[1] // inputs.n_layers
        for i in sorted(range(1, len(src)), key=lambda i: (bool(link[i] > i), i)):   # parents first
            j = int(link[i])
            if j < 0:
                continue
            wide = np.repeat(mask[i], wpl)
            act[i] = np.where(wide, act[j], act[i])
            if pred is not None:
                pred[i] = np.where(wide, pred[j], pred[i])
        return step_mod.settle_step(settings, inputs, draws, s, src, act, pred, max_drafts, cost)
    return run


@contextmanager
def neighbours(kind: str, share: float) -> Iterator[None]:
    saved = workload_mod.speculative_step
    workload_mod.speculative_step = neighbour_step(kind, share)
    try:
        yield
    finally:
        workload_mod.speculative_step = saved


# --- the experiments ----------------------------------------------------------------------------

class Bench:
    def __init__(self, passes: int) -> None:
        self.oss = calibration_run(passes=passes)
        qwen = calibration_run(model="qwen3-235b-a22b", passes=passes)
        self.qtrace = resolve_trace(qwen, load_model(qwen.model), None)
        self.mu = fit_draft(self.qtrace, qwen, alpha=2.41, active=23.7).top1_logit_mean
        self.qwen = _with(qwen, draft={**qwen.draft.model_dump(), "top1_logit_mean": self.mu})

    def four(self, routing: dict[str, Any], qtrace: Trace = None) -> list[float]:
        """gpt-oss E conf / eco, Qwen3 E conf, alpha conf, E eco, alpha eco."""
        qt = self.qtrace if qtrace is None else qtrace
        oc = _e_alpha(_with(self.oss, routing=routing))[0]
        oe = _e_alpha(_eco(_with(self.oss, routing=routing), "gpt-oss-120b"))[0]
        qc, qca = _e_alpha(_with(self.qwen, routing=routing), qt)
        qe, qea = _e_alpha(_eco(_with(self.qwen, routing=routing), "qwen3-235b-a22b"), qt)
        return [oc, oe, qc, qca, qe, qea]


HEAD = ("| gpt-oss E conf (pub. 11.6) | gpt-oss E EcoSpec | Qwen3 E conf (pub. 23.7) | Qwen3 alpha conf (pub. 2.41) | "
        "Qwen3 E EcoSpec (pub. 20.5) | Qwen3 alpha EcoSpec (pub. 2.32) | Qwen3 cut (pub. -3.2) |")


def _row(label: str, v: list[float]) -> str:
    return (f"| {label} | {v[0]:.2f} | {v[1]:.2f} | {v[2]:.2f} | {v[3]:.3f} | {v[4]:.2f} | {v[5]:.3f} | "
            f"{v[4] - v[2]:+.2f} |")


def _table(first: str) -> list[str]:
    """Header and rule of a table whose leading columns are ``first`` ("a | b")."""
    return [f"| {first} {HEAD}", "|---" * (first.count("|") + 8) + "|"]


def part_a(b: Bench) -> list[str]:
    lines = ["## A. A layer-dependent share (alternative family), fitted to gpt-oss E = 11.6", "",
             *_table("share profile | mean share S")]
    alt: Callable[[float], dict[str, Any]] = lambda x: {"kind": "alternative", "layer_share": x}  # noqa: E731
    for name, prof in PROFILES.items():
        with layer_profile(prof):
            x = _bisect(lambda s: _e_alpha(_with(b.oss, routing=alt(s)))[0], 11.6)
            lines.append(_row(f"{name} | {x:.4f}", b.four(alt(x))))
    return lines


def part_b(b: Bench) -> list[str]:
    lines = ["## B. The Qwen3 synthetic trace: popularity entropy and reuse, mixture share fitted to Qwen3 E = 23.7",
             "", "| entropy | reuse | Qwen3 E conf, context-free (share 1) | fitted share | Qwen3 E conf | "
             "Qwen3 E EcoSpec 82% | Qwen3 alpha EcoSpec | cut |", "|---" * 8 + "|"]
    mix: Callable[[float], dict[str, Any]] = lambda x: {"kind": "mixture", "context_free_share": x}  # noqa: E731
    for ent, reuse in ((DEFAULT_STATS.entropy, DEFAULT_STATS.reuse), (0.85, 0.414), (0.75, 0.414), (0.6, 0.414),
                       (0.97, 0.414), (0.99, 0.414), (0.926, 0.6)):
        tr = synthesize("qwen3-235b-a22b", SYNTHETIC_TOKENS, seed=0, cache=False,
                        stats=TargetStats(entropy=ent, reuse=reuse, coverage_128=DEFAULT_STATS.coverage_128,
                                          segment_tokens=DEFAULT_STATS.segment_tokens))
        top = _e_alpha(_with(b.qwen, routing=mix(1.0)), tr)[0]
        x = _bisect(lambda s, t=tr: _e_alpha(_with(b.qwen, routing=mix(s)), t)[0], 23.7)
        qc = _e_alpha(_with(b.qwen, routing=mix(x)), tr)[0]
        qe, qa = _e_alpha(_eco(_with(b.qwen, routing=mix(x)), "qwen3-235b-a22b"), tr)
        lines.append(f"| {ent} | {reuse} | {top:.2f} | {x:.3f} | {qc:.2f} | {qe:.2f} | {qa:.3f} | {qe - qc:+.2f} |")
    return lines


def part_c(b: Bench) -> list[str]:
    lines = ["## C. The predictor: EcoSpec with the paper's 82% predictor and with an oracle, Qwen3", "",
             "| routing | Qwen3 E conf | E EcoSpec 82% | E EcoSpec oracle | alpha EcoSpec oracle |", "|---" * 5 + "|"]
    for label, r in (("mixture 0.9572 (fitted on gpt-oss)", {"kind": "mixture", "context_free_share": 0.9572}),
                     ("alternative 0.0385 (fitted on gpt-oss)", {"kind": "alternative", "layer_share": 0.0385}),
                     ("same-position (most local bound)", {"kind": "same-position"})):
        qc = _e_alpha(_with(b.qwen, routing=r), b.qtrace)[0]
        q82 = _e_alpha(_eco(_with(b.qwen, routing=r), "qwen3-235b-a22b"), b.qtrace)[0]
        qo, qoa = _e_alpha(_eco(_with(b.qwen, routing=r), "qwen3-235b-a22b", 1.0), b.qtrace)
        lines.append(f"| {label} | {qc:.2f} | {q82:.2f} | {qo:.2f} | {qoa:.3f} |")
    return lines


def part_d(b: Bench) -> list[str]:
    trace_routing = {"kind": "trace"}
    lines = ["## D. Wrong drafts that copy a tree neighbour's routing (per layer, share S; else a random trace token)",
             "", *_table("neighbour | S | Qwen3 trace")]
    for kind in ("parent", "sibling"):
        for s in (0.0, 0.1, 0.3, 0.6, 0.7, 0.9, 1.0):
            with neighbours(kind, s):
                lines.append(_row(f"{kind} | {s} | default", b.four(trace_routing)))
    for kind in ("parent", "sibling"):
        def oss_e(s: float, k: str = kind) -> float:
            with neighbours(k, s):
                return _e_alpha(_with(b.oss, routing=trace_routing))[0]
        x = _bisect(oss_e, 11.6)
        with neighbours(kind, x):
            lines.append(_row(f"{kind}, fitted to gpt-oss E 11.6 | {x:.4f} | default", b.four(trace_routing)))
    for ent in (0.97, 0.99):
        tr = synthesize("qwen3-235b-a22b", SYNTHETIC_TOKENS, seed=0, cache=False,
                        stats=TargetStats(entropy=ent, reuse=DEFAULT_STATS.reuse,
                                          coverage_128=DEFAULT_STATS.coverage_128,
                                          segment_tokens=DEFAULT_STATS.segment_tokens))
        for s in (0.0, 0.5, 0.8, 0.9, 1.0):
            with neighbours("sibling", s):
                lines.append(_row(f"sibling | {s} | entropy {ent}", b.four(trace_routing, tr)))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = passes_args(__doc__, argv)
    if args is None:
        return 2
    b = Bench(args.passes)
    body = ["# Routing mechanisms for EcoSpec's E cut on Qwen3-235B (written by validation/routing_mechanisms.py)",
            "", f"{args.passes} passes, seed 0, gamma 4, tree 3 x 2, batch 1, T = 0. gpt-oss-120b replays its real "
            "trace; Qwen3-235B-A22B a synthetic one (default statistics unless said), its draft top-1 logit fitted "
            f"to alpha 2.41: {b.mu:+.4f}. EcoSpec uses the paper's predictor accuracy (gpt-oss 0.93, Qwen3 0.82). "
            "An exploration: nothing here is a moesim default.", ""]
    for part in (part_a, part_b, part_c, part_d):
        body += part(b) + [""]
        print("\n".join(body[-3:]), flush=True)
    write_text_atomic("\n".join(body).rstrip() + "\n", OUT)
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())

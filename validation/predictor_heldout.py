"""Held-out accuracy of the trace-driven expert predictors (moesim/policies/predictors.py).

    python validation/predictor_heldout.py

For every model with a real trace in ../shared/traces (or $MOESIM_SHARED_TRACES): each
predictor cross-fitted over 2 contiguous chunks per request, scored on layer >= 1 of tokens
that have a previous token in their request; accuracy at m = k (|predicted & true| / k) and
recall at m = 2k. Writes validation/predictor_heldout.md. No pass/fail: numbers only.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from moesim.files import write_text_atomic
from moesim.policies.predictors import (
    PREDICTORS,
    heldout_accuracy,
    request_ids,
)
from moesim.traces.sources import REAL_SOURCES, default_trace

HERE = Path(__file__).resolve().parent
FOLDS = 2


def _row(name: str) -> tuple[str, str, str, float] | None:
    trace = default_trace(name)
    if trace is None:
        return None
    n_exp, k = trace.num_experts, trace.top_k
    start = time.perf_counter()
    acc = {p: heldout_accuracy(f, trace, n_exp, FOLDS) for p, f in PREDICTORS.items()}
    rec = {p: heldout_accuracy(f, trace, n_exp, FOLDS, m=2 * k) for p, f in PREDICTORS.items()}
    seconds = time.perf_counter() - start
    req = request_ids(trace)
    scored = int((req[1:] == req[:-1]).sum()) * (trace.num_layers - 1)
    head = (f"| {name} | {trace.num_tokens} | {trace.num_segments} | {scored} | {trace.num_layers} | "
            f"{n_exp} | {k} | ")
    cells_k = " | ".join(f"{acc[p]:.3f}" for p in PREDICTORS)
    cells_2k = " | ".join(f"{rec[p]:.3f}" for p in PREDICTORS)
    return (head + f"{k / n_exp:.3f} | {cells_k} |", head + f"{min(2 * k / n_exp, 1.0):.3f} | {cells_2k} |",
            name, seconds)


def main() -> int:
    rows = [r for r in (_row(name) for name in REAL_SOURCES) if r is not None]
    cols = ("| trace | tokens | requests | scored (token, layer) | L | E | k | chance | "
            + " | ".join(PREDICTORS) + " |")
    rule = "|" + "---|" * (8 + len(PREDICTORS))
    slowest = max(rows, key=lambda r: r[3]) if rows else None
    lines = ["# Held-out accuracy of the expert predictors (validation/predictor_heldout.py)", "",
             f"Real traces from ../shared/traces; every request cut into {FOLDS} contiguous chunks, each chunk",
             "predicted by predictors fitted on the others (moesim/policies/predictors.py). Scored: layer >= 1",
             "of every token with a previous token in its request (where every predictor has its context), with",
             "the true routing of earlier layers and tokens as context. `chance`: m / E, a predictor that",
             "ignores everything. `layer-ahead`: layer l from the same token's layer l - 1; `+prev-token`: also",
             "the previous token's layer l. `markov-set`: layer l from the previous token's layer l.", "",
             "## Accuracy at m = k (mean |predicted & true| / k)", "", cols, rule,
             *(r[0] for r in rows), "", "## Recall at m = 2k (mean |predicted & true| / k)", "", cols, rule,
             *(r[1] for r in rows), ""]
    missing = [name for name in REAL_SOURCES if name not in {r[2] for r in rows}]
    if missing:
        lines += [f"Not found (skipped): {', '.join(missing)}.", ""]
    if slowest is not None:
        lines += [f"Slowest trace: {slowest[2]}, {slowest[3]:.1f} s for all {len(PREDICTORS)} predictors at both m "
                  f"({2 * FOLDS * len(PREDICTORS)} fits and predictions), numpy {np.__version__}.", ""]
    write_text_atomic("\n".join(lines), HERE / "predictor_heldout.md")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

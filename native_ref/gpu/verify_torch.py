"""MoE-layer verification time vs the union of experts, in PyTorch, on a GPU when present.

    python native_ref/gpu/verify_torch.py [--device cuda|cpu] [--out verify_torch.csv]

One MoE layer with E experts (BF16 on a GPU, FP32 on the CPU), gamma verified tokens, top-k
routing whose union of experts is set exactly; two implementations:
  * ``loop``: a Python loop over the active experts (the Hugging Face Transformers MoE layer's
    structure, the prototype the EcoSpec figures came from);
  * ``grouped``: the active experts' weights gathered and run as one batched matmul (a fused
    grouped-GEMM stand-in).
For each union size it writes the median time over repeats (CUDA events on a GPU) to CSV,
fits ``t = a + b * union`` on some sizes and reports the held-out error on the others,
the linear-in-union model moesim.cost.verify uses. Run on an H200 whenever one is lent;
this file is measurement code: moesim never imports it.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def routing_for_union(experts: int, gamma: int, k: int, union: int, gen: np.random.Generator) -> list[list[int]]:
    pool = gen.permutation(experts)[:union].tolist()
    rows = [[pool[(t * k + j) % union] for j in range(k)] for t in range(gamma)]
    for i, e in enumerate(e for e in pool if e not in {x for r in rows for x in r}):
        rows[i % gamma][-1 - (i // gamma) % k] = e
    return rows


def layer_loop(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, routing: list[list[int]]) -> torch.Tensor:
    out = torch.zeros_like(x)
    by_expert: dict[int, list[int]] = {}
    for t, chosen in enumerate(routing):
        for e in chosen:
            by_expert.setdefault(e, []).append(t)
    for e, toks in by_expert.items():
        idx = torch.tensor(toks, device=x.device)
        h = x[idx] @ w13[e].T
        gate, up = h.chunk(2, dim=-1)
        out.index_add_(0, idx, (F.silu(gate) * up) @ w2[e].T)
    return out


def layer_grouped(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, routing: list[list[int]]) -> torch.Tensor:
    active = sorted({e for r in routing for e in r})
    pos = {e: i for i, e in enumerate(active)}
    mask = torch.zeros(len(active), x.shape[0], 1, device=x.device, dtype=x.dtype)
    for t, chosen in enumerate(routing):
        for e in chosen:
            mask[pos[e], t] = 1
    sel = torch.tensor(active, device=x.device)
    h = torch.bmm(x.expand(len(active), -1, -1), w13[sel].transpose(1, 2))
    gate, up = h.chunk(2, dim=-1)
    y = torch.bmm(F.silu(gate) * up, w2[sel].transpose(1, 2))
    return (y * mask).sum(0)


def timed(fn, device: str, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hidden", type=int, default=2880)
    p.add_argument("--inter", type=int, default=2880)
    p.add_argument("--experts", type=int, default=128)
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default="verify_torch.csv")
    a = p.parse_args()
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    torch.manual_seed(0)
    w13 = torch.randn(a.experts, 2 * a.inter, a.hidden, device=a.device, dtype=dtype) * 0.02
    w2 = torch.randn(a.experts, a.hidden, a.inter, device=a.device, dtype=dtype) * 0.02
    x = torch.randn(a.gamma, a.hidden, device=a.device, dtype=dtype)
    gen = np.random.default_rng(0)
    unions = list(range(a.top_k, a.gamma * a.top_k + 1))
    rows = []
    with torch.inference_mode():
        for u in unions:
            routing = routing_for_union(a.experts, a.gamma, a.top_k, u, gen)
            ref = layer_loop(x, w13, w2, routing)
            assert torch.allclose(ref, layer_grouped(x, w13, w2, routing), rtol=5e-2, atol=5e-2)
            for impl, fn in (("loop", layer_loop), ("grouped", layer_grouped)):
                rows.append({"device": a.device, "impl": impl, "union": u,
                             "time_us_median": timed(lambda fn=fn, routing=routing: fn(x, w13, w2, routing),
                                                     a.device, a.repeats)})
    with open(a.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fit_u = unions[::2]
    for impl in ("loop", "grouped"):
        pts = [(r["union"], r["time_us_median"]) for r in rows if r["impl"] == impl]
        train = [(u, t) for u, t in pts if u in fit_u]
        test = [(u, t) for u, t in pts if u not in fit_u]
        b, c = np.polyfit([u for u, _ in train], [t for _, t in train], 1)
        mape = float(np.mean([abs((c + b * u) / t - 1) for u, t in test])) if test else 0.0
        print(f"{a.device} {impl}: t = {c:.1f} us + {b:.2f} us x union; held-out MAPE {mape:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

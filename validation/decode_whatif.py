"""What-if surfaces of phone decode: tokens/s against the expert cache, the UFS speed and speculation.

    python validation/decode_whatif.py [--tokens 64] [--out validation]

For the catalog models that do not fit a 16 GB phone (Mixtral-8x7B, Qwen3-30B-A3B, gpt-oss-20b,
gpt-oss-120b) on the bundled sd8-elite-gen5 profile (CPU decode, llama.cpp-like), writes
``decode_whatif.csv`` (every run), ``decode_whatif.md`` (the tables and the headline findings)
and ``decode_whatif.png`` (tokens/s against cache size per policy, and against UFS speed with
and without speculation). Every run decodes ``--tokens`` tokens after a warm-up of half as many
(the cache starts cold), 512 tokens of context, seed 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.files import write_text_atomic
from moesim.plotting import pyplot, save_figure
from moesim.progress import track
from moesim.simulate.decode import simulate_decode
from moesim.units import GiB

MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b")
CACHE_SHARES = (0.05, 0.1, 0.2, 0.35, 0.5)          # of all routed experts' bytes, capped by the DRAM left
POLICIES = ("lru", "lfu", "pinned", "mmap")
SPECS = ("none", "confidence", "ecospec", "cache-aware")
UFS_GBPS = (1.075, 2.15, 4.3, 8.6)   # UFS peak read GB/s (the other UFS rates scale with it)


def _run(tokens: int, **kw: Any) -> dict[str, Any]:
    run = DecodeRun.model_validate({"tokens": tokens, "warmup_tokens": tokens // 2, **kw})
    m = simulate_decode(run).to_dict()
    return {**kw, "overrides": str(kw.get("overrides", "")), "tokens_per_s": m["tokens_per_s"],
            "cache_hit_rate": m["cache_hit_rate"], "belady_hit_rate": m["belady_hit_rate"],
            "ufs_mib_per_token": m["ufs_bytes_per_token"] / 2**20, "acceptance_length": m["acceptance_length"],
            "mean_active_experts": m["mean_active_experts"], "bubble_share_total": m["bubble_share_total"],
            "peak_memory_GiB": m["peak_memory_GiB"], "cache_GiB_used": m["config"]["cache_GiB"],
            "synthetic_routing": m["trace"]["synthetic"]}


def _cache_sizes(model_name: str) -> list[float]:
    model = load_model(model_name)
    total = model.num_moe_layers * model.moe.num_routed_experts * model.expert_bytes("q4_0") / GiB
    return sorted({round(min(share * total, 13.0), 2) for share in CACHE_SHARES})


def grid(tokens: int) -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = []
    for model in MODELS:
        for gib in _cache_sizes(model):
            points += [{"model": model, "cache_GiB": gib, "cache_policy": p} for p in POLICIES]
            points += [{"model": model, "cache_GiB": gib, "cache_policy": "lru", "prefetch": "next-layer"}]
            points += [{"model": model, "cache_GiB": gib, "cache_policy": "lru", "selector": s} for s in SPECS[1:]]
        mid = _cache_sizes(model)[2]
        for bw in UFS_GBPS:
            for s in ("none", "cache-aware"):
                points.append({"model": model, "cache_GiB": mid, "cache_policy": "lru", "selector": s,
                               "overrides": {"ufs.peak_read_bw_GBps": bw}})
    return [_run(tokens, **p) for p in track(points, "decode what-if")]


def _plot(df: pd.DataFrame, path: Path) -> None:
    plt = pyplot("decode_whatif.py", str(path))
    fig, axes = plt.subplots(2, len(MODELS), figsize=(4 * len(MODELS), 7))
    plain = df[(df["overrides"] == "") & (df["selector"].fillna("none") == "none")
               & (df["prefetch"].fillna("none") == "none")]
    for i, model in enumerate(MODELS):
        ax = axes[0][i]
        for pol in POLICIES:
            rows = plain[(plain["model"] == model) & (plain["cache_policy"] == pol)]
            ax.plot(rows["cache_GiB"], rows["tokens_per_s"], marker="o", label=pol)
        ax.set(title=model, xlabel="expert cache (GiB)", ylabel="tokens/s")
        ax.legend(fontsize=7)
        ax = axes[1][i]
        ufs = df[(df["model"] == model) & (df["overrides"] != "")]
        for s in ("none", "cache-aware"):
            rows = ufs[ufs["selector"] == s]
            bw = [float(o.split(": ")[1].rstrip("}")) for o in rows["overrides"]]
            ax.plot(bw, rows["tokens_per_s"], marker="o", label=f"spec {s}")
        ax.set(xlabel="UFS peak read GB/s", ylabel="tokens/s")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def _table(df: pd.DataFrame, model: str) -> str:
    rows = df[(df["model"] == model) & (df["overrides"] == "")].copy()
    rows["setting"] = rows.apply(lambda r: r["cache_policy"] + ("" if pd.isna(r.get("prefetch")) else
                                                                 " +prefetch") + ("" if pd.isna(r.get("selector")) else
                                                                                  f" spec {r['selector']}"), axis=1)
    rows = rows.drop_duplicates(subset=["setting", "cache_GiB"])
    pivot = rows.pivot_table(index="setting", columns="cache_GiB", values="tokens_per_s", sort=False)
    hit = rows[rows["setting"] == "lru"].set_index("cache_GiB")
    lines = ["| setting | " + " | ".join(f"{c:g} GiB" for c in pivot.columns) + " |",
             "|---|" + "---|" * len(pivot.columns)]
    lines += [f"| {idx} | " + " | ".join(f"{v:.3f}" for v in row) + " |" for idx, row in pivot.iterrows()]
    lines.append("| lru hit rate (Belady) | " + " | ".join(
        f"{hit.loc[c, 'cache_hit_rate']:.2f} ({hit.loc[c, 'belady_hit_rate']:.2f})" for c in pivot.columns) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--from-csv", action="store_true", help="Redo the tables and plot from the CSV of a run.")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.from_csv:
        df = pd.read_csv(out / "decode_whatif.csv", keep_default_na=True).fillna({"overrides": ""})
    else:
        df = pd.DataFrame(grid(args.tokens))
        write_text_atomic(df.to_csv(index=False), out / "decode_whatif.csv")
    parts = ["# Phone decode what-if surfaces (written by validation/decode_whatif.py)", "",
             f"sd8-elite-gen5, CPU decode, {args.tokens} tokens after a {args.tokens // 2}-token warm-up, context "
             "512, seed 0. Tokens/s; columns are expert-cache sizes (5/10/20/35/50% of the routed experts, "
             "capped at 13 GiB). Routing: real traces where moesim has them (Mixtral-8x7B, gpt-oss-20b, "
             "gpt-oss-120b), synthetic for Qwen3-30B-A3B.", ""]
    for model in MODELS:
        parts += [f"## {model}", "", _table(df, model), ""]
    write_text_atomic("\n".join(parts) + "\n", out / "decode_whatif.md")
    _plot(df, out / "decode_whatif.png")
    print("wrote", out / "decode_whatif.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

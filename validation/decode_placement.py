"""Expert placement from the co-activation graph against frequency and id order (issue 16, item 3).

    python validation/decode_placement.py [--tokens 64]     # the page in the repository: --tokens 48

For the models with a real decode trace that do not fit (or barely fit) the phone, at a cache of
10% and 25% of their routed experts: the pinned hot set chosen from the co-activation graph vs by
routing frequency alone (half the slots pinned), against plain LRU; and contiguous read groups of
4 experts formed from the co-activation graph vs by expert id, against one read per expert.
Writes validation/decode_placement.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _script import count, write_page

from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.progress import track
from moesim.simulate.decode import simulate_decode
from moesim.units import GiB

MODELS = ("mixtral-8x7b", "gpt-oss-20b", "gpt-oss-120b", "olmoe-1b-7b")
SHARES = (0.1, 0.25)
SETTINGS: dict[str, dict[str, Any]] = {
    "lru": {},
    "pinned by graph": {"cache_policy": "pinned", "pinned_by": "graph"},
    "pinned by frequency": {"cache_policy": "pinned", "pinned_by": "frequency"},
    "read groups of 4, graph": {"read_group_size": 4, "read_grouping": "graph"},
    "read groups of 4, id": {"read_group_size": 4, "read_grouping": "id"},
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=count, default=64)
    args = ap.parse_args(argv)
    points = []
    for name_of_model in MODELS:
        model = load_model(name_of_model)
        total = model.num_moe_layers * model.moe.num_routed_experts * model.expert_bytes("q4_0") / GiB
        for share in SHARES:
            points += [(name_of_model, share, round(share * total, 3), name) for name in SETTINGS]
    rows = []
    for model, share, gib, name in track(points, "placement"):
        run = DecodeRun.model_validate({"model": model, "tokens": args.tokens, "warmup_tokens": args.tokens // 2,
                                        "cache_GiB": gib, **SETTINGS[name]})
        m = simulate_decode(run).metrics
        rows.append((model, share, gib, name, m.tokens_per_s, m.cache_hit_rate, m.ufs_bytes_per_token / 2**20))
    lines = ["# Expert placement: co-activation graph vs frequency vs id (written by validation/decode_placement.py)",
             "", f"sd8-elite-gen5, CPU decode, {args.tokens} tokens after a {args.tokens // 2}-token warm-up, real "
             "decode traces, seed 0. The pinned sets and the graph groups are chosen on the whole trace (in-sample).",
             "", "| model | cache (share of experts) | setting | tok/s | hit rate | UFS MiB/token |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {m} | {g:.2f} GiB ({s:.0%}) | {n} | {t:.3f} | {h:.3f} | {u:,.1f} |" for m, s, g, n, t, h, u in rows]
    write_page(lines, "decode_placement.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

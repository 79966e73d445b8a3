"""Launch, host-sync and per-layer costs of the three Transformers MoE paths, on a lent GPU.

    python native_ref/gpu/measure_paths.py --device cuda --out paths_h200.json
    python native_ref/gpu/measure_paths.py --refit paths_h200.json --base h200x8-hf --name h200x8-hf-measured

Measures (JSON on stdout, or ``--out``):
  * ``launch_us``: host time of one tiny async kernel (``x.add_(1)``), N in a row, one sync at the end;
  * ``sync_us``: a ``.item()`` round trip on an idle stream (D2H copy + stream sync);
  * ``nonzero_us``: ``torch.nonzero`` of a small mask, which syncs to size its output;
  * per layer, on synthetic weights of the real shapes (one MoE layer; ``--layers`` copies run back to
    back so that caches do not hold the weights), for T tokens and several unions U:
      - ``qwen3-hit-loop``: Qwen3-MoE (Transformers >= 4.54): one-hot mask, ``nonzero`` of the hit
        experts (a sync), then per hit expert ``torch.where`` (a sync), gate/up, act, down, ``index_add_``;
      - ``deepseek-v3-scan``: DeepSeek-V3: the same per-expert body, but the loop visits all 256 experts
        and ``torch.where`` + ``numel()`` (a sync) decides whether to skip each one;
      - ``gpt-oss-all-bmm``: GPT-OSS eval path: every expert for every token in two batched matmuls,
        routing weights dense (cost independent of U).
``--refit FILE`` writes a profile what-if onto the code-path runtime: the base profile
(``device_profiles/BASE.toml``, one with ``[runtime.paths]``) with ``runtime.per_op_us`` = the measured
``launch_us`` (one eager op: Python, dispatcher, launch) and ``runtime.host_sync_us`` = the measured
``sync_us`` (one ``.item()``), provenance "measured: ... FILE". It then prices every measured MoE block
with moesim's own path costs (``moesim.cost.verify.price_path`` of the model's path on the new profile,
plus the HBM / FLOP time of the synthetic BF16 weights) and prints predicted against measured per-layer
times and per-hit-expert slopes: a check, not a fit (nothing else is changed). This is measurement code:
moesim never imports it; torch is imported only when measuring, so the pure parts (arguments, shapes,
the JSON schema, the refit and its check) run without it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: /2 (from /1): top-level ``scale`` / ``layers`` / ``repeats`` and per-row ``hidden`` / ``inter`` /
#: ``experts`` / ``top_k`` (the shapes measured, so that the refit's check prices the same weights)
SCHEMA = "moesim.native_ref.gpu.measure_paths/2"
REFIT_SCHEMA = "moesim.native_ref.gpu.measure_paths.refit/1"
#: one MoE layer of each family: (hidden, expert intermediate, routed experts, top-k), from the models'
#: config.json (moesim/config/models/*.toml holds the same numbers; tests/unit/test_measure_paths.py checks)
#: each measured code pattern, the model whose shapes it uses and the profile path it emulates (the
#: pattern, not the model, names the path: h200x8-hf runs gpt-oss-120b on hf-mxfp4-ogs and DeepSeek-V3.1
#: on hf5-fp8-hit-loop, while these patterns measure the BF16 fallback and transformers 4.x's scan)
SHAPES: dict[str, dict[str, int | str]] = {
    "qwen3-hit-loop": {"model": "qwen3-235b-a22b", "hidden": 4096, "inter": 1536, "experts": 128, "top_k": 8,
                       "profile_path": "hf-hit-expert-loop"},
    "deepseek-v3-scan": {"model": "deepseek-v3.1", "hidden": 7168, "inter": 2048, "experts": 256, "top_k": 8,
                         "profile_path": "hf-all-expert-scan"},
    "gpt-oss-all-bmm": {"model": "gpt-oss-120b", "hidden": 2880, "inter": 2880, "experts": 128, "top_k": 4,
                        "profile_path": "hf-dense-bmm"},
}
PATHS = tuple(SHAPES)
TOP_KEYS = ("schema", "device", "torch", "dtype", "scale", "layers", "repeats", "launch_us", "sync_us", "nonzero_us",
            "paths")
ROW_KEYS = ("path", "model", "tokens", "union", "hidden", "inter", "experts", "top_k", "layer_us")
#: bytes of one weight of the measured dtype
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="MoE-path launch/sync/per-layer costs on a GPU, or a refit")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--paths", default=",".join(PATHS), help="comma-separated subset of " + ", ".join(PATHS))
    ap.add_argument("--tokens", default="1,5", help="tokens per forward (1 = AR; 5 = gamma 4 + root)")
    ap.add_argument("--unions", default="8,16,24,32", help="experts hit per layer, clipped per forward to "
                    "[top_k, min(tokens x top_k, experts)]")
    ap.add_argument("--layers", type=int, default=2, help="copies of the layer run back to back (>= 1)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--scale", type=int, default=1, help="divide hidden/inter by this (smoke tests on a CPU)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--refit", type=Path, default=None, help="a JSON this script wrote: write a profile what-if "
                    "with the measured per_op_us / host_sync_us and check the paths' predicted layer times")
    ap.add_argument("--base", default="h200x8-hf", help="the profile --refit starts from")
    ap.add_argument("--name", default=None, help="the new profile's name (default BASE-measured)")
    ap.add_argument("--profiles-dir", type=Path, default=Path(__file__).resolve().parents[2] / "device_profiles")
    a = ap.parse_args(argv)
    for p in a.paths.split(","):
        if p not in SHAPES:
            ap.error(f"--paths: unknown path {p!r} (one of {', '.join(PATHS)})")
    if a.layers < 1 or a.repeats < 1 or a.scale < 1:
        ap.error("--layers, --repeats and --scale must be >= 1")
    try:
        a.token_list = [int(t) for t in a.tokens.split(",")]
        a.union_list = [int(u) for u in a.unions.split(",")]
    except ValueError:
        ap.error(f"--tokens/--unions must be comma-separated integers, got {a.tokens!r} / {a.unions!r}")
    if min(a.token_list) < 1 or min(a.union_list) < 1:
        ap.error("--tokens and --unions must be >= 1")
    return a


def check_result(doc: dict[str, Any]) -> None:
    """Raise ValueError naming the first field that breaks the schema of a measurement JSON."""
    if not isinstance(doc, dict):
        raise ValueError("measurement JSON: must be an object")
    for k in TOP_KEYS:
        if k not in doc:
            raise ValueError(f"measurement JSON: missing field {k!r}")
    if doc["schema"] != SCHEMA:
        raise ValueError(f"measurement JSON: schema must be {SCHEMA!r}, got {doc['schema']!r}")
    if doc["dtype"] not in DTYPE_BYTES:
        raise ValueError(f"measurement JSON: dtype must be one of {', '.join(DTYPE_BYTES)}, got {doc['dtype']!r}")
    for k in ("launch_us", "sync_us", "nonzero_us"):
        if not isinstance(doc[k], (int, float)) or isinstance(doc[k], bool) or doc[k] <= 0:
            raise ValueError(f"measurement JSON: {k} must be a positive number, got {doc[k]!r}")
    for k in ("scale", "layers", "repeats"):
        if not isinstance(doc[k], int) or isinstance(doc[k], bool) or doc[k] < 1:
            raise ValueError(f"measurement JSON: {k} must be an integer >= 1, got {doc[k]!r}")
    if not isinstance(doc["paths"], list) or not doc["paths"]:
        raise ValueError("measurement JSON: paths must be a non-empty list of rows")
    for i, row in enumerate(doc["paths"]):
        if not isinstance(row, dict):
            raise ValueError(f"measurement JSON: paths[{i}] must be an object")
        for k in ROW_KEYS:
            if k not in row:
                raise ValueError(f"measurement JSON: paths[{i}] is missing {k!r}")
        if row["path"] not in SHAPES:
            raise ValueError(f"measurement JSON: paths[{i}].path must be one of {', '.join(PATHS)}, "
                             f"got {row['path']!r}")
        for k in ("tokens", "union", "hidden", "inter", "experts", "top_k"):
            if not isinstance(row[k], int) or isinstance(row[k], bool) or row[k] < 1:
                raise ValueError(f"measurement JSON: paths[{i}].{k} must be an integer >= 1, got {row[k]!r}")
        if not isinstance(row["layer_us"], (int, float)) or not row["layer_us"] > 0:
            raise ValueError(f"measurement JSON: paths[{i}].layer_us must be > 0, got {row['layer_us']!r}")


def fit_linear(rows: list[dict[str, Any]], path: str, tokens: int) -> tuple[float, float]:
    """(a, b) of ``layer_us = a + b x union`` over the rows of ``path`` at ``tokens`` (least squares)."""
    pts = [(float(r["union"]), float(r["layer_us"])) for r in rows if r["path"] == path and r["tokens"] == tokens]
    if len({u for u, _ in pts}) < 2:
        raise ValueError(f"refit: {path} at {tokens} token(s) needs >= 2 distinct unions, got {len(pts)} row(s)")
    mu, mt = statistics.fmean(u for u, _ in pts), statistics.fmean(t for _, t in pts)
    b = sum((u - mu) * (t - mt) for u, t in pts) / sum((u - mu) ** 2 for u, _ in pts)
    return mt - b * mu, b


def predict_block_us(row: dict[str, Any], dtype: str, profile: Any) -> tuple[str, float, float]:
    """moesim's price of one measured MoE block: (the profile's path name, predicted us, predicted us per hit
    expert). Host time = the path's fixed MoE part + union x per-hit-expert part (``price_path`` with the
    profile's per_op_us / host_sync_us); GPU time = max(bytes of the experts read / (peak HBM x
    hbm_efficiency_ratio), FLOPs / peak BF16) for the synthetic weights measured (gate/up/down of
    ``hidden`` x ``inter``); they add on a path that syncs, else the longer one counts."""
    from moesim.cost.verify import price_path

    rt, gpu = profile.runtime, profile.gpu
    name = str(SHAPES[str(row["path"])]["profile_path"])
    if name not in rt.paths:
        raise ValueError(f"refit: profile {profile.name} has no runtime path {name} (measured as {row['path']})")
    path = rt.paths[name]
    e, k, u, t = int(row["experts"]), int(row["top_k"]), int(row["union"]), int(row["tokens"])
    cost = price_path(name, path, e, op_s=rt.per_op_us * 1e-6, sync_s=rt.host_sync_us * 1e-6,
                      layer_host_s=0.0, verify_layer_s=0.0)
    weights = 3 * int(row["hidden"]) * int(row["inter"])
    bw = gpu.hbm_peak_bw_TBps * 1e12 * rt.hbm_efficiency_ratio
    expert_s = weights * DTYPE_BYTES[dtype] / bw
    read = e if cost.reads_all else u
    flops = t * 2.0 * (e if cost.reads_all else k) * weights
    hw = max(read * expert_s, flops / (gpu.bf16_dense_TFLOPS * 1e12))
    host = cost.moe_layer_s + u * cost.hit_s
    total = host + hw if cost.syncs else max(host, hw)
    slope = 0.0 if cost.reads_all else cost.hit_s + (expert_s if cost.syncs else 0.0)
    return name, total * 1e6, slope * 1e6


def check_paths(doc: dict[str, Any], profile: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Predicted against measured: (one row per measured forward, one row per path and token count with
    >= 2 unions comparing the per-hit-expert slope). Ratios are measured / predicted."""
    rows, slopes = [], []
    for r in sorted(doc["paths"], key=lambda r: (r["path"], r["tokens"], r["union"])):
        name, pred, _ = predict_block_us(r, doc["dtype"], profile)
        rows.append({"path": r["path"], "profile_path": name, "tokens": r["tokens"], "union": r["union"],
                     "measured_us": round(float(r["layer_us"]), 3), "predicted_us": round(pred, 3),
                     "ratio": round(float(r["layer_us"]) / pred, 4)})
    for path, tokens in sorted({(r["path"], r["tokens"]) for r in doc["paths"]}):
        group = [r for r in doc["paths"] if r["path"] == path and r["tokens"] == tokens]
        if len({r["union"] for r in group}) < 2:
            continue
        _, b = fit_linear(doc["paths"], path, tokens)
        name, _, pred_b = predict_block_us(group[0], doc["dtype"], profile)
        slopes.append({"path": path, "profile_path": name, "tokens": tokens,
                       "measured_per_hit_expert_us": round(b, 3), "predicted_per_hit_expert_us": round(pred_b, 3)})
    return rows, slopes


def refit(doc: dict[str, Any], src: Path, base: Path, out: Path, name: str) -> dict[str, Any]:
    """Write ``out``: ``base`` (a code-path profile) with ``runtime.per_op_us`` = ``launch_us`` and
    ``runtime.host_sync_us`` = ``sync_us`` of the measurement, provenance naming ``src``; return the
    report (schema :data:`REFIT_SCHEMA`) with the paths' predicted and measured block times."""
    import tomlkit

    from moesim.calibrate.profile_edit import set_profile_value
    from moesim.config.profiles import load_profile, write_profile

    check_result(doc)
    base_prof = load_profile(base)
    if getattr(base_prof, "kind", None) != "gpu-server" or not base_prof.runtime.paths:
        raise ValueError(f"refit: base profile {base.stem} has no [runtime.paths] (the code-path runtime); "
                         "per_op_us / host_sync_us price code paths only")
    with tempfile.TemporaryDirectory() as work:   # edit a copy; ``out`` is replaced once, atomically
        draft = Path(work) / out.name
        text = tomlkit.parse(base.read_text())
        text["name"] = name
        text["display_name"] = f"{text['display_name']} (launch and sync measured on {doc['device']})"
        draft.write_text(tomlkit.dumps(text))
        where = f"native_ref/gpu/measure_paths.py on {doc['device']}, torch {doc['torch']} ({src.name})"
        set_profile_value(draft, "runtime", "per_op_us", round(float(doc["launch_us"]), 4),
                          f"measured: {where}: launch_us, host time of one tiny async op (x.add_(1)), median of "
                          "1000 in a row; eager ops of the real paths carry more Python and dispatch than this")
        set_profile_value(draft, "runtime", "host_sync_us", round(float(doc["sync_us"]), 4),
                          f"measured: {where}: sync_us, one .item() round trip on an idle stream (nonzero of a "
                          f"small mask {float(doc['nonzero_us']):.4g} us)")
        write_profile(draft.read_text(), out)
    prof = load_profile(out)
    rows, slopes = check_paths(doc, prof)
    return {"schema": REFIT_SCHEMA, "profile": str(out), "source": src.name, "device": doc["device"],
            "per_op_us": prof.runtime.per_op_us, "host_sync_us": prof.runtime.host_sync_us,
            "nonzero_us": doc["nonzero_us"], "check": rows, "slopes": slopes}


# ----- measurement (torch needed from here on) ------------------------------------------------
def _routing(experts: int, tokens: int, k: int, union: int, seed: int) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    pool = rng.sample(range(experts), union)
    # k consecutive pool entries per token: distinct within a row (union >= k), and together they
    # cover the whole pool when tokens x k >= union
    return [[pool[(t * k + j) % union] for j in range(k)] for t in range(tokens)]


def measure(a: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("measure_paths: --device cuda but torch sees no CUDA device")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def timed(fn: Any, n: int) -> float:
        fn()
        sync()
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            sync()
            samples.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(samples)

    x = torch.zeros(1, device=dev)
    n_launch = 1000
    launch_us = timed(lambda: [x.add_(1) for _ in range(n_launch)], 5) / n_launch
    sync_us = timed(lambda: x.item(), a.repeats * 5)
    mask = torch.zeros(128, device=dev, dtype=torch.bool)
    mask[::16] = True
    nonzero_us = timed(lambda: torch.nonzero(mask), a.repeats * 5)

    rows: list[dict[str, Any]] = []
    for path in a.paths.split(","):
        s = SHAPES[path]
        h, i, e, k = int(s["hidden"]) // a.scale, int(s["inter"]) // a.scale, int(s["experts"]), int(s["top_k"])
        w13 = [torch.randn(e, 2 * i, h, device=dev, dtype=dtype) * 0.02 for _ in range(a.layers)]
        w2 = [torch.randn(e, h, i, device=dev, dtype=dtype) * 0.02 for _ in range(a.layers)]
        for tokens in a.token_list:
            # a forward of T tokens hits between k and min(T x k, E) experts: the unions asked for, clipped
            for union in sorted({min(max(u, k), tokens * k, e) for u in a.union_list}):
                route = torch.tensor(_routing(e, tokens, k, union, seed=union), device=dev)
                weights = torch.full((tokens, k), 1.0 / k, device=dev, dtype=dtype)
                hs = torch.randn(tokens, h, device=dev, dtype=dtype)

                def body(hs: torch.Tensor, top_x: torch.Tensor, idx: torch.Tensor, wl13: torch.Tensor,
                         wl2: torch.Tensor, out: torch.Tensor, ex: int, weights: torch.Tensor) -> None:
                    cur = hs[top_x]
                    gate, up = (cur @ wl13[ex].T).chunk(2, dim=-1)
                    y = (F.silu(gate) * up) @ wl2[ex].T
                    out.index_add_(0, top_x, y * weights[top_x, idx, None])

                def forward(path: str = path, hs: torch.Tensor = hs, route: torch.Tensor = route,
                            weights: torch.Tensor = weights, w13: list[torch.Tensor] = w13,
                            w2: list[torch.Tensor] = w2, e: int = e, tokens: int = tokens) -> None:
                    for layer in range(a.layers):
                        out = torch.zeros_like(hs)
                        onehot = F.one_hot(route, e).permute(2, 1, 0)       # (experts, k, tokens)
                        if path == "qwen3-hit-loop":
                            hit = (onehot.sum(dim=(-1, -2)) > 0).nonzero()    # sync
                            for ex in hit.flatten().tolist():
                                idx, top_x = torch.where(onehot[ex])          # sync
                                body(hs, top_x, idx, w13[layer], w2[layer], out, ex, weights)
                        elif path == "deepseek-v3-scan":
                            for ex in range(e):
                                idx, top_x = torch.where(onehot[ex])          # sync
                                if top_x.numel() > 0:
                                    body(hs, top_x, idx, w13[layer], w2[layer], out, ex, weights)
                        else:                                                 # every expert, dense weights
                            dense = torch.zeros(tokens, e, device=dev, dtype=dtype).scatter_(1, route, weights)
                            up2 = torch.bmm(hs.expand(e, -1, -1), w13[layer].transpose(1, 2))
                            gate, up = up2.chunk(2, dim=-1)
                            y = torch.bmm(F.silu(gate) * up, w2[layer].transpose(1, 2))
                            out = (y * dense.T[..., None]).sum(0)
                        del out

                total = timed(forward, a.repeats)
                rows.append({"path": path, "model": s["model"], "tokens": tokens, "union": union,
                             "hidden": h, "inter": i, "experts": e, "top_k": k, "layer_us": total / a.layers})
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    return {"schema": SCHEMA, "device": name, "torch": torch.__version__, "dtype": str(dtype).split(".")[-1],
            "scale": a.scale, "layers": a.layers, "repeats": a.repeats, "launch_us": launch_us, "sync_us": sync_us,
            "nonzero_us": nonzero_us, "paths": rows}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.refit is not None:
        try:
            doc = json.loads(a.refit.read_text())
            name = a.name or f"{a.base}-measured"
            out = a.out or a.profiles_dir / f"{name}.toml"
            report = refit(doc, a.refit, a.profiles_dir / f"{a.base}.toml", out, name)
        except (OSError, ValueError) as exc:
            print(f"measure_paths: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        print(json.dumps(report, indent=1, sort_keys=True))
        return 0
    doc = measure(a)
    check_result(doc)
    text = json.dumps(doc, indent=1, sort_keys=True)
    if a.out:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # this checkout's moesim.files (stdlib only)
        from moesim.files import write_text_atomic

        write_text_atomic(text + "\n", a.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

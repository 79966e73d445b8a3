"""Fit the fused what-if runtime's three assumed numbers on one model's batch curve, predict the rest
(issue 37 item 4: batch as a mechanism).

    PYTHONPATH=. python3 validation/fit_fused_batch.py      # prints the fit, writes validation/fit_fused_batch.md

The anchor is aiconfigurator 0.12.0's TensorRT-LLM database for 8x H200 (``cli estimate
--estimate-mode static_gen --tp 8 --ep 8 --isl 1024 --osl 1024 --batch-size B``: a generation
step of B requests, no in-flight prefill mixed in; the recorded TPOTs are
``moesim.validate.gpu_devices.AIC_STATIC_GEN_MS``). It is NVIDIA's sum of measured per-op
times, not a measurement of a whole step. moesim prices the same step: B requests of mean
context 1536 (ISL 1024 + half of OSL 1024), their per-layer union that of B independent uniform
top-k draws, the KV reads, the engine's all-reduce (from the same database's measured table, not
fitted), the expert reads at the bandwidth and the MXFP4 dequantization of the same database's
measured MoE kernel table (not fitted), and the two runtime numbers fitted here on Qwen3-235B-A22B
alone (six batches): ``per_active_expert_us`` and ``per_layer_fixed_us``, inside their physical
bounds. gpt-oss-120b and DeepSeek-V3 (12 points) are predicted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from moesim.files import write_text_atomic
from moesim.validate.gpu_devices import AIC_STATIC_GEN_MS, batch_s_per_token

OUT = Path(__file__).with_name("fit_fused_batch.md")
DEVICE = "h200x8-fused"
FIT_MODEL = "qwen3-235b-a22b"
#: (field, lower, upper): per expert between almost nothing and a few microseconds of tile scheduling;
#: per layer between two kernels and a dozen unfused ones at 3-5 us each
BOUNDS = (("per_active_expert_us", 0.01, 5.0), ("per_layer_fixed_us", 6.0, 60.0))


def _curve(model: str, values: np.ndarray) -> np.ndarray:
    sets = {f"runtime.{name}": float(v) for (name, _, _), v in zip(BOUNDS, values)}
    return np.array([batch_s_per_token(DEVICE, model, b, context=1536, overrides=sets) * 1e3
                     for b in AIC_STATIC_GEN_MS[model]])


def fit() -> np.ndarray:
    ref = np.array(list(AIC_STATIC_GEN_MS[FIT_MODEL].values()))
    res = least_squares(lambda v: np.log(_curve(FIT_MODEL, v) / ref), x0=[0.5, 20.0],
                        bounds=([b[1] for b in BOUNDS], [b[2] for b in BOUNDS]))
    return np.asarray(res.x)


def report(values: np.ndarray) -> str:
    lines = ["| model | role | " + " | ".join(f"B={b}" for b in AIC_STATIC_GEN_MS[FIT_MODEL]) + " |",
             "|---|---|" + "---|" * len(AIC_STATIC_GEN_MS[FIT_MODEL])]
    for model, ref in AIC_STATIC_GEN_MS.items():
        ours = _curve(model, values)
        role = "fitted" if model == FIT_MODEL else "predicted"
        cells = [f"{o:.2f} / {r:.2f} ({o / r - 1:+.0%})" for o, r in zip(ours, ref.values())]
        lines.append(f"| {model} | {role} | " + " | ".join(cells) + " |")
    fitted = ", ".join(f"{name} = {v:.3g}" for (name, _, _), v in zip(BOUNDS, values))
    return (f"Fitted on {FIT_MODEL} (six batches): {fitted}.\n\n"
            "TPOT in ms, moesim / aiconfigurator static_gen (error):\n\n" + "\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stdout", action="store_true", help="print only, write nothing")
    a = ap.parse_args()
    text = "# Fused runtime against aiconfigurator over the batch\n\n" + (__doc__ or "").split("\n\n", 2)[2] + "\n" \
        + report(fit())
    print(text)
    if not a.stdout:
        write_text_atomic(text, OUT)


if __name__ == "__main__":
    main()

"""A profile's own measurements, in the formats ``moesim calibrate device`` reads: the round trip
(fit them, recover the profile's numbers) that tests the fit, and example logs for the docs.

``llama_bench_json`` prices each test with the same operator costs the fit uses
(:func:`moesim.calibrate.dense_anchor.dense_prefill_s`) and writes llama-bench's ``-o json``
records; ``fio_json`` writes ``fio --output-format=json`` of direct reads at the rates of
:func:`moesim.cost.flash.read_rate_GBps`. Synthetic: never a measurement of a device.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from moesim.calibrate.bench_models import BENCH_MODELS
from moesim.calibrate.dense_anchor import dense_prefill_s
from moesim.config.device import MobileNPUProfile
from moesim.cost.flash import read_rate_GBps
from moesim.cost.params import cpu_backend, npu_backend, ufs_params

__all__ = ["llama_bench_json", "fio_json"]


def _record(model_type: str, unit: str, n_prompt: int, n_gen: int, ts: float) -> dict[str, Any]:
    htp = unit == "htp"
    return {"build_commit": "synthetic", "backends": "HTP" if htp else "CPU", "model_type": model_type,
            "n_ubatch": 512, "n_gpu_layers": 99 if htp else 0, "devices": "HTP0" if htp else "none",
            "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": 0, "avg_ts": round(ts, 6), "stddev_ts": 0.0}


def llama_bench_json(profile: MobileNPUProfile, model: str = "qwen3 4B", units: Sequence[str] = ("cpu", "htp"),
                     prompts: Sequence[int] = (128, 512, 2048), gen: int = 128) -> str:
    """llama-bench ``-o json`` of ``model`` (a key of :data:`BENCH_MODELS`) on ``profile``: pp at
    ``prompts`` on each unit, and CPU tg``gen``."""
    m = BENCH_MODELS[model]
    records = []
    for unit in units:
        be = cpu_backend(profile) if unit == "cpu" else npu_backend(profile, "llamacpp")
        for n in prompts:
            records.append(_record(f"{model} Q4_0", unit, n, 0, n / dense_prefill_s(m.spec, m.ffn, n, be)))
        if unit == "cpu" and gen:
            nbytes = m.decode_shape(1.0, "synthetic").bytes_per_token()
            records.append(_record(f"{model} Q4_0", unit, 0, gen,
                                   profile.cpu.require("q4_0_gemv_GBps", profile.name) * 1e9 / nbytes))
    return json.dumps(records, indent=2) + "\n"


def fio_json(profile: MobileNPUProfile, sizes_KiB: Sequence[int] = (4, 128, 512),
             depths: Sequence[int] = (1, 2)) -> str:
    """``fio --output-format=json`` of direct random reads of ``sizes_KiB`` at ``depths`` on ``profile``'s UFS."""
    ufs = ufs_params(profile, into_arena=False)
    jobs = []
    for kib in sizes_KiB:
        for q in depths:
            rate = read_rate_GBps(kib * 1024, q, ufs) * 1e9
            jobs.append({"jobname": f"randread-{kib}k-q{q}",
                         "job options": {"rw": "randread", "bs": f"{kib}k", "iodepth": str(q), "direct": "1",
                                         "ioengine": "libaio"},
                         "read": {"bw_bytes": int(round(rate)), "iops": rate / (kib * 1024)}})
    return json.dumps({"fio version": "synthetic", "jobs": jobs}, indent=2) + "\n"

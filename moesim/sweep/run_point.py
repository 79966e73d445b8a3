"""One sweep point -> one flat row: inputs, every metric of the workload's ``--json``, provenance.

Importable by worker processes (local or Dask): the task is plain data and so is the row.
Nested metric dicts are flattened with dots (``memory_gib.arena``); lists become JSON text.
"""

from __future__ import annotations

import json
import time
from typing import Any

from moesim import __version__
from moesim.errors import InputError
from moesim.config.loading import validate_data
from moesim.config.profiles import AnyProfile, load_profile, override_profile, profile_hash
from moesim.config.prefill import PrefillRun
from moesim.config.specdecode import SpecDecodeRun, parse_predictor, parse_routing

__all__ = ["run_point", "flatten_metrics", "POLICY_OPTIONS"]

#: policy options of a prefill grid and the policies that take them; elsewhere they are ignored
POLICY_OPTIONS = {"group_size": {"estream", "naive"}, "banks": {"estream"}, "queue_depth": {"estream", "layer-b2"},
                  "prefetch": {"estream"}, "ubatch_tokens": {"cpu", "mmap"}}


def flatten_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1, 2]"}``."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_metrics(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            out[name] = value
    return out


def _profile(device: str, overrides: dict[str, float]) -> AnyProfile:
    profile = load_profile(device)
    return override_profile(profile, overrides, note="sweep axis") if overrides else profile


def _prefill(params: dict[str, Any], overrides: dict[str, float]) -> dict[str, Any]:
    from moesim.simulate.prefill import mobile_profile, simulate_prefill

    kind = params.get("policy", "estream")
    policy = {"kind": kind, **{k: params[k] for k in POLICY_OPTIONS if params.get(k) is not None
                               and kind in POLICY_OPTIONS[k]}}
    keys = ("model", "device", "tokens", "memory_budget_GiB", "trace", "seed")
    data: dict[str, Any] = {k: params[k] for k in keys if k in params}
    run = validate_data(PrefillRun, {"model": "olmoe-1b-7b", "device": "sd8-elite-gen5", "tokens": 1024,
                                     **data, "policy": policy})
    profile = mobile_profile(_profile(run.device, overrides))
    return simulate_prefill(run, profile=profile).metrics


def _specdecode(params: dict[str, Any], overrides: dict[str, float]) -> dict[str, Any]:
    from moesim.simulate.specdecode import gpu_profile, simulate_specdecode

    data = {k: v for k, v in params.items() if k not in ("predictor", "routing", "depth", "width")}
    data["predictor"] = parse_predictor(params.get("predictor", "oracle"))
    data["routing"] = parse_routing(params.get("routing", "mixture"))
    data["tree"] = {k: params[k] for k in ("depth", "width") if k in params}
    run = validate_data(SpecDecodeRun, data)
    profile = gpu_profile(_profile(run.device, overrides))
    return simulate_specdecode(run, profile=profile).metrics


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point. A run the inputs make impossible (a budget below the minimum,
    a model that does not fit) is a result: ``status = "error"`` and the message."""
    params: dict[str, Any] = task["params"]
    plain = {k: v for k, v in params.items() if "." not in k}
    overrides = {k: float(v) for k, v in params.items() if "." in k}
    row: dict[str, Any] = {**params, "workload": task["workload"], "point.index": task["index"],
                           "point.id": task["id"]}
    wall0 = time.perf_counter()
    try:
        simulate = _prefill if task["workload"] == "prefill" else _specdecode
        metrics = simulate(plain, overrides)
        row.update({"status": "ok", "error": None})
        row.update(flatten_metrics(metrics))
    except InputError as exc:
        row.update({"status": "error", "error": str(exc),
                    "provenance.moesim_version": __version__,
                    "provenance.profile_hash": profile_hash(_profile(plain.get("device", _default_device(task)),
                                                                    overrides))})
    row["point.wall_s"] = time.perf_counter() - wall0
    return row


def _default_device(task: dict[str, Any]) -> str:
    return "sd8-elite-gen5" if task["workload"] == "prefill" else "h200x8-hf"

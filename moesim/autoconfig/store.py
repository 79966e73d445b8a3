"""Stored service-time profiles on disk, keyed by model, device profile, prompt routing.

A profile is saved as ``<key>.npz`` in ``$MOESIM_CACHE_DIR`` (default ``$XDG_CACHE_HOME/moesim``,
else ``~/.cache/moesim``)
under ``profiles/``: the float64 service times round-trip exactly, so a selection from a
stored profile equals one from a fresh profile. Writes are atomic (:mod:`moesim.files`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from moesim.cost.ops import OpCost
from moesim.cost.pipeline import ServiceTimes
from moesim.files import atomic_path
from moesim.inputs import is_regular
from moesim.traces.synth_cache import cache_root

__all__ = ["cache_dir", "profile_key", "save_service_times", "load_service_times"]

_VERSION = 1


def cache_dir() -> Path:
    return cache_root() / "profiles"


def profile_key(model: str, profile_hash: str, routing: np.ndarray, tokens: int) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(routing).tobytes()).hexdigest()[:16]
    return f"{model}-{profile_hash}-{tokens}-{digest}-v{_VERSION}"


def save_service_times(st: ServiceTimes, key: str) -> Path:
    costs = np.array([[(c.mat_ns, c.vec_ns, c.overhead_ns) for c in layer] for layer in st.expert_costs],
                     dtype=np.float64)
    path = cache_dir() / f"{key}.npz"
    with atomic_path(path) as tmp, tmp.open("wb") as fh:     # a file object: savez adds no .npz suffix
        np.savez(fh, counts=st.counts, costs=costs, non_ffn_ns=np.array(st.non_ffn_ns, dtype=np.int64),
                 scalars=np.array([st.n_tokens, st.expert_B, st.tail_ns, st.latency_ns, st.num_dense_layers],
                                  dtype=np.int64),
                 rates=np.array([st.B_per_ns, st.call_overhead_ns], dtype=np.float64), model=np.array(st.model))
    return path


def load_service_times(key: str) -> ServiceTimes | None:
    path = cache_dir() / f"{key}.npz"
    if not is_regular(path):         # missing, or a FIFO or device put there: never waited on
        return None
    try:
        with np.load(path) as z:
            n_tokens, expert_B, tail_ns, latency_ns, dense = (int(v) for v in z["scalars"])
            bw, call = (float(v) for v in z["rates"])
            costs = tuple(tuple(OpCost(float(m), float(v), float(o)) for m, v, o in layer) for layer in z["costs"])
            return ServiceTimes(model=str(z["model"]), n_tokens=n_tokens, expert_B=expert_B,
                                non_ffn_ns=tuple(int(v) for v in z["non_ffn_ns"]), tail_ns=tail_ns,
                                latency_ns=latency_ns, B_per_ns=bw, call_overhead_ns=call, counts=z["counts"].copy(),
                                expert_costs=costs, num_dense_layers=dense)
    except (OSError, KeyError, ValueError):
        return None          # a damaged cache entry is rebuilt, never trusted

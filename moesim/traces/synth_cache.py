"""An on-disk cache of synthetic routing: the fitted generator parameters and the traces.

Fitting the generator to its target statistics costs seconds per model (27 generator runs);
generating a prompt from fitted parameters costs a fraction of that. Both are kept as
``.npz`` files in ``synth/`` under the user's cache folder (:func:`cache_root`):

- ``fit-<key>.npz``: the fitted :class:`GenParams` and the statistics of the fit run, keyed by
  the generator version, the model's full parameters (a hash of the resolved model, not its
  name), the target statistics and the seed;
- ``trace-<key>.npz``: the expert ids of one trace, keyed by the fit key and the token count.

The package ships the fits of the catalog models that have no real trace, for the default
statistics and seed 0 (``moesim/data/synth/``, made by ``traces/make_synth_fits.py``), so
their first run skips the fit too; a shipped fit is found by the same key, so a changed model
or generator simply does not find it.

An entry is used only when it reads back whole with its own key, shapes and value ranges;
anything else (a truncated, corrupt or foreign file) is ignored and regenerated. A cache
folder that cannot be written is not an error: the work is simply not kept. Writes are
atomic (:mod:`moesim.files`), so two processes never see half an entry. The arrays round-trip
exactly, so a cached trace is byte-identical to a generated one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from moesim.errors import MoesimError
from moesim.files import atomic_path
from moesim.inputs import is_regular
from moesim.traces.synth_fit import Measured
from moesim.traces.synth_gen import GenParams

__all__ = ["CACHE_ENV", "BUNDLED_FITS", "cache_root", "fit_key", "fit_name", "load_fit", "save_fit", "load_experts",
           "save_experts"]

CACHE_ENV = "MOESIM_CACHE_DIR"
#: fits shipped with the package (read only)
BUNDLED_FITS = Path(__file__).resolve().parent.parent / "data" / "synth"
_MEASURED = ("pi", "coverage32", "coverage128", "union4", "reuse")


def cache_root() -> Path:
    """``$MOESIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/moesim``, else ``~/.cache/moesim``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "moesim"


def _folder() -> Path:
    return cache_root() / "synth"


def fit_key(generator: str, model: dict[str, Any], stats: dict[str, Any] | None, seed: int) -> str:
    """The key of a fit: a hash of everything the fitted parameters depend on (``model`` is the
    model's JSON dump, ``ModelSpec.model_dump(mode="json")``)."""
    blob = json.dumps({"generator": generator, "model": model, "stats": stats, "seed": seed}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _save(name: str, key: str, arrays: dict[str, npt.NDArray[Any]], folder: Path | None = None) -> None:
    try:
        with atomic_path((folder or _folder()) / name) as tmp, tmp.open("wb") as fh:   # a file object: no .npz added
            np.savez(fh, **{"key": np.array(key), **arrays})  # type: ignore[arg-type]
    except (OSError, MoesimError):
        pass                         # an unwritable cache folder only means no caching


def _load(name: str, key: str, folder: Path | None = None) -> dict[str, npt.NDArray[Any]] | None:
    path = (folder or _folder()) / name
    if not is_regular(path):         # missing, or a FIFO or device put there: never waited on
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {n: z[n] for n in z.files}
    except Exception:                # missing, unreadable or corrupt: regenerate, never trust it
        return None
    if "key" not in arrays or arrays["key"].shape != () or str(arrays.pop("key")) != key:
        return None
    return arrays


def fit_name(key: str) -> str:
    return f"fit-{key}.npz"


def save_fit(key: str, params: GenParams, achieved: Measured, folder: Path | None = None) -> None:
    """Keep a fit in the user's cache (or in ``folder``)."""
    scalars = np.array([params.rho, params.ws_frac, params.leak], dtype=np.float64)
    _save(fit_name(key), key, {"logw": params.logw, "k": np.array(params.k, dtype=np.int64), "scalars": scalars,
                                  **{f"m_{n}": np.asarray(getattr(achieved, n), dtype=np.float64) for n in _MEASURED}},
          folder)


def load_fit(key: str, n_layers: int, n_exp: int, k: int) -> tuple[GenParams, Measured] | None:
    """The stored fit (the user's cache, then the shipped fits), or None when absent or not
    exactly what ``key`` promises."""
    z = _load(fit_name(key), key)
    if z is None:
        z = _load(fit_name(key), key, BUNDLED_FITS)
    try:
        if z is None or int(z["k"]) != k or z["logw"].shape != (n_layers, n_exp) or z["scalars"].shape != (3,):
            return None
        logw, scalars = z["logw"].astype(np.float64), z["scalars"].astype(np.float64)
        measured = {n: z[f"m_{n}"].astype(np.float64) for n in _MEASURED}
    except (KeyError, TypeError, ValueError):
        return None
    if not np.isfinite(logw).all() or not np.isfinite(scalars).all() or measured["pi"].shape != (n_layers, n_exp) \
            or any(measured[n].shape != (n_layers,) for n in _MEASURED[1:]):
        return None
    rho, ws_frac, leak = (float(v) for v in scalars)
    return GenParams(logw=logw, k=k, rho=rho, ws_frac=ws_frac, leak=leak), Measured(**measured)


def _trace_name(key: str, n_tokens: int) -> str:
    return f"trace-{key}-{n_tokens}.npz"


def save_experts(key: str, n_tokens: int, experts: npt.NDArray[np.int16]) -> None:
    _save(_trace_name(key, n_tokens), key, {"experts": experts})


def load_experts(key: str, n_tokens: int, shape: tuple[int, int, int], n_exp: int) -> npt.NDArray[np.int16] | None:
    """The stored [tokens, layers, k] expert ids, or None when absent or damaged."""
    z = _load(_trace_name(key, n_tokens), key)
    if z is None or "experts" not in z:
        return None
    experts = z["experts"]
    if experts.dtype != np.int16 or experts.shape != shape or (experts.size and (
            int(experts.min()) < 0 or int(experts.max()) >= n_exp)):
        return None
    out: npt.NDArray[np.int16] = np.ascontiguousarray(experts)
    return out

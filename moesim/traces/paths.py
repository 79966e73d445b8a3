"""Where the third-party traces and the bundled synthetic trace live.

The shared traces are read at run time, never copied into the project: from
``$MOESIM_SHARED_TRACES`` when set, else ``../shared/traces`` relative to the repository
root (the folder above the ``moesim`` package).
"""

from __future__ import annotations

import os
from pathlib import Path

from moesim.errors import InputError

__all__ = ["SHARED_TRACES_ENV", "shared_traces_dir", "bundled_trace_path", "BUNDLED_MODEL"]

SHARED_TRACES_ENV = "MOESIM_SHARED_TRACES"
BUNDLED_MODEL = "olmoe-1b-7b"
_PACKAGE = Path(__file__).resolve().parent.parent


def shared_traces_dir() -> Path:
    """The folder with the third-party traces. The default may not exist (runs then use synthetic
    routing, and say so); a folder named by ``$MOESIM_SHARED_TRACES`` must exist, or the run is
    refused: a typo there would otherwise turn every real trace into synthetic routing unnoticed."""
    env = os.environ.get(SHARED_TRACES_ENV)
    if env:
        path = Path(env)
        if not path.is_dir():
            raise InputError(SHARED_TRACES_ENV, "must name an existing folder of real traces (unset it to use "
                             f"{_PACKAGE.parent.parent / 'shared' / 'traces'})", env)
        return path
    return _PACKAGE.parent.parent / "shared" / "traces"


def bundled_trace_path() -> Path:
    """The small synthetic OLMoE trace shipped in the package (regenerate: traces/make_bundled.py)."""
    return _PACKAGE / "data" / f"{BUNDLED_MODEL}.synthetic.parquet"

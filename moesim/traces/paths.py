"""Where the third-party traces and the bundled synthetic trace live.

The shared traces are read at run time, never copied into the project: from
``$MOESIM_SHARED_TRACES`` when set, else ``../shared/traces`` relative to the repository
root (the folder above the ``moesim`` package).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SHARED_TRACES_ENV", "shared_traces_dir", "bundled_trace_path", "BUNDLED_MODEL"]

SHARED_TRACES_ENV = "MOESIM_SHARED_TRACES"
BUNDLED_MODEL = "olmoe-1b-7b"
_PACKAGE = Path(__file__).resolve().parent.parent


def shared_traces_dir() -> Path:
    """The folder with the third-party traces (it may not exist)."""
    env = os.environ.get(SHARED_TRACES_ENV)
    if env:
        return Path(env)
    return _PACKAGE.parent.parent / "shared" / "traces"


def bundled_trace_path() -> Path:
    """The small synthetic OLMoE trace shipped in the package (regenerate: traces/make_bundled.py)."""
    return _PACKAGE / "data" / f"{BUNDLED_MODEL}.synthetic.parquet"

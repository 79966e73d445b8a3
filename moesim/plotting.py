"""The matplotlib preamble of every plot: imported only when a plot is asked for, on the
non-interactive Agg backend, and saved atomically with reproducible bytes.

It sits low in the layers (beside :mod:`moesim.config`) because its users do:
``moesim.autoconfig.plot`` is below ``moesim.report``, and the CLI is above both.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from moesim.errors import InputError
from moesim.files import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["FIGURE_SUFFIXES", "check_figure_path", "pyplot", "save_figure"]

#: the file types a plot can be written to, chosen by the path's suffix
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_figure_path(path: str | Path, option: str) -> Path:
    """``path`` as a Path; InputError naming ``option`` unless it ends in a figure suffix."""
    out = Path(path)
    if out.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(option, f"must end in {', '.join(FIGURE_SUFFIXES[:-1])} or {FIGURE_SUFFIXES[-1]}",
                         str(path))
    return out


def pyplot(option: str, path: str | Path) -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend; InputError naming ``option`` (the option that
    asked for the plot) when matplotlib, an optional dependency, is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(option, "needs matplotlib: pip install 'moesim[plot]'", str(path)) from None
    return plt


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` atomically in the format of the path's suffix, then close it. PNG files
    carry no software version, so the same figure gives the same bytes."""
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format=fmt, metadata={"Software": None} if fmt == "png" else None)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return out

"""Importers from the third-party trace formats into :class:`RoutingTrace`.

One function per format, in one dict. Every importer validates (expert ids in range,
exactly k distinct ids per token and layer, every recorded layer present for every kept
token, finite weights), raises a one-line :class:`InputError` naming file and line on
anything malformed, and stores an :class:`ImportReport` (what it read, dropped and what
is missing) in ``trace.meta.import_report``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from moesim.config.catalog import load_model
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.inputs import exists
from moesim.traces.importers._common import ImportReport
from moesim.traces.importers.flame import import_flame
from moesim.traces.importers.gnf4 import import_gnf4
from moesim.traces.importers.mixtral import import_mixtral
from moesim.traces.importers.nvmoe import import_nvmoe
from moesim.traces.importers.vllm_logger import import_vllm_logger
from moesim.traces.trace import RoutingTrace

__all__ = ["FORMATS", "import_trace", "ImportReport", "import_report"]

Importer = Callable[[Path, ModelSpec], RoutingTrace]

#: format name (CLI ``--format``) -> importer
FORMATS: dict[str, Importer] = {
    "nvmoe": import_nvmoe,
    "gnf4": import_gnf4,
    "mixtral-jsonl": import_mixtral,
    "flame-npz": import_flame,
    "vllm-logger": import_vllm_logger,
}


def import_trace(src: str | Path, fmt: str, model: str | Path | ModelSpec, *,
                 segment_lengths: Sequence[int] | None = None) -> RoutingTrace:
    """Read ``src`` (a file or folder) in format ``fmt`` as a trace of ``model``.

    ``segment_lengths`` (``nvmoe`` only) sets the workload boundaries the file does not store.
    """
    if fmt not in FORMATS:
        raise InputError("format", f"must be one of {', '.join(FORMATS)}", fmt)
    model = model if isinstance(model, ModelSpec) else load_model(model)
    path = Path(src)
    if not exists(path):
        raise InputError("source", "must be an existing file or folder", str(path))
    if fmt == "nvmoe":
        return import_nvmoe(path, model, segment_lengths)
    if segment_lengths is not None:
        raise InputError("segments", f"(segment lengths) only apply to the nvmoe format, not {fmt}", segment_lengths)
    return FORMATS[fmt](path, model)


def import_report(trace: RoutingTrace) -> ImportReport | None:
    """The import report stored in a trace's metadata, if it was imported."""
    data = trace.meta.import_report
    return None if data is None else ImportReport.model_validate(data)

"""What the workloads need from a device, as protocols (Ciw's plug-ins as protocols): DRAM, flash,
an NPU's matrix and vector units, the CPU, the NPU's expert arena and the OS page cache, each the
numbers a workload actually reads. Prefill (``simulate/prefill.py``, ``policies/prefill/``, the
cost functions it calls) is typed against :class:`PrefillDevice`, and decode
(``simulate/decode/``, ``policies/decode/memory.py``, ``cost/decode_backend.py``) against
:class:`DecodeDevice`, not a profile class: both share the :class:`StreamingDevice` sections
(what :mod:`moesim.cost.params` prices and reads with); prefill adds the phone baselines' sections
and the power figures, decode an NPU with its one-token rates (:class:`DecodeNPU`). The phone
profile (:class:`~moesim.config.phone.MobileNPUProfile`) is both, and any other object with these
numbers (a laptop NPU with NVMe flash, built in Python) runs prefill and decode too; one that lacks
a number is refused before the run, naming it (:func:`lacking`, asked by
:func:`moesim.config.profiles.prefill_device` and :func:`~moesim.config.profiles.decode_device`).

The numbers keep the names of the profile sections that first held them (``hmx_*`` for the
matrix unit, ``hvx_*`` for the vector unit, after the Hexagon HTP); another accelerator gives its
own units' numbers under those names. A number a device does not know is None, and
``require(name, profile)`` raises :class:`~moesim.errors.NotFittedError` naming it (as
:meth:`moesim.config.sections.Section.require` does) when a run needs it.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from functools import cache
from typing import Protocol, runtime_checkable

from moesim.config.phone import AdrenoSection, PowerSection, QNNSection, UncertaintySection

__all__ = ["Required", "DRAM", "Flash", "MatrixVectorUnit", "DecodeNPU", "CPU", "Arena", "PageCache", "ProfileData",
           "StreamingDevice", "PrefillDevice", "DecodeDevice", "numbers", "lacking"]


class Required(Protocol):
    def require(self, name: str, profile: str = ...) -> float:
        """The value of the field ``name``; NotFittedError (naming ``profile``) when it is not known."""
        ...


class DRAM(Required, Protocol):
    """The device's DRAM: what the run may use, its peak rate, the runtime's own memory."""

    @property
    def usable_GiB(self) -> float: ...
    @property
    def peak_bw_GBps(self) -> float: ...
    @property
    def runtime_overhead_MiB(self) -> float | None: ...


class Flash(Required, Protocol):
    """The storage the experts stream from (UFS on a phone, NVMe on a laptop): t = L + b / R per read."""

    @property
    def peak_read_bw_GBps(self) -> float: ...
    @property
    def effective_read_bw_GBps(self) -> float | None: ...
    @property
    def read_bw_low_GBps(self) -> float | None: ...
    @property
    def read_bw_high_GBps(self) -> float | None: ...
    @property
    def read_latency_us(self) -> float | None: ...
    @property
    def queue_slots_count(self) -> int: ...
    @property
    def default_queue_depth_count(self) -> int: ...


class MatrixVectorUnit(Required, Protocol):
    """The NPU: a matrix unit (``hmx_*``), a vector unit (``hvx_*``), its on-chip memory
    (``vtcm_MiB``) filled by DMA, and what a call into it costs (moesim.cost.params.npu_backend)."""

    @property
    def clock_GHz(self) -> float | None: ...
    @property
    def hvx_contexts_count(self) -> int: ...
    @property
    def hvx_vector_B(self) -> int: ...
    @property
    def hvx_efficiency_ratio(self) -> float | None: ...
    @property
    def hmx_tile_rows_count(self) -> int: ...
    @property
    def hmx_tile_cols_count(self) -> int: ...
    @property
    def hmx_fp16_TFLOPS(self) -> float | None: ...
    @property
    def llamacpp_hmx_ratio(self) -> float | None: ...
    @property
    def q4_0_dequant_GBps(self) -> float | None: ...
    @property
    def dma_GBps(self) -> float | None: ...
    @property
    def vtcm_MiB(self) -> float: ...
    @property
    def experts_double_buffered(self) -> bool: ...
    @property
    def mla_absorbed(self) -> bool: ...
    @property
    def attention_unit(self) -> str: ...
    @property
    def mla_attention_unit(self) -> str | None: ...
    @property
    def attention_softmax_instr_per_score_ratio(self) -> float | None: ...
    @property
    def call_overhead_us(self) -> float | None: ...
    @property
    def group_dispatch_us(self) -> float | None: ...
    @property
    def graph_overhead_us(self) -> float | None: ...


class CPU(Required, Protocol):
    """The application CPU (the CPU and mmap baselines): its cores and product rates."""

    @property
    def cores(self) -> int: ...
    @property
    def q4_0_gemm_GFLOPS(self) -> float | None: ...
    @property
    def attention_GFLOPS(self) -> float | None: ...
    @property
    def q4_0_gemv_GBps(self) -> float | None: ...
    @property
    def routed_gemv_GFLOPS(self) -> float | None: ...
    @property
    def l2_per_core_KiB(self) -> float | None: ...
    @property
    def unpacked_q4_0_rate_ratio(self) -> float | None: ...


class Arena(Protocol):
    """The fixed-address DRAM the NPU reads streamed experts from."""

    @property
    def max_mapped_GiB(self) -> float: ...
    @property
    def ready_latency_us(self) -> float: ...


class PageCache(Required, Protocol):
    """The OS page cache as the mmap baseline and a cold load see it."""

    @property
    def readahead_KiB(self) -> float: ...
    @property
    def buffered_read_bw_GBps(self) -> float | None: ...
    @property
    def buffered_read_bw_low_GBps(self) -> float | None: ...
    @property
    def buffered_read_bw_high_GBps(self) -> float | None: ...


class ProfileData(Protocol):
    """A device as data: a name, and numbers that dump to JSON (their hash identifies them in a result)."""

    @property
    def name(self) -> str: ...

    def model_dump(self, *, mode: str = ...) -> Mapping[str, object]: ...


class StreamingDevice(ProfileData, Protocol):
    """The sections both workloads read: DRAM, the flash the experts stream from, the NPU, the
    CPU, the arena, the OS page cache (``runtime``) and the prediction bands (``uncertainty``:
    None where a device has none, then its results have no intervals). The backends and reads of
    :mod:`moesim.cost.params` take this much."""

    @property
    def memory(self) -> DRAM: ...
    @property
    def flash(self) -> Flash: ...
    @property
    def npu(self) -> MatrixVectorUnit: ...
    @property
    def cpu(self) -> CPU: ...
    @property
    def arena(self) -> Arena: ...
    @property
    def runtime(self) -> PageCache: ...
    @property
    def uncertainty(self) -> UncertaintySection | None: ...


@runtime_checkable
class PrefillDevice(StreamingDevice, Protocol):
    """Everything prefill reads of a device: the streaming sections, and ``adreno`` and ``qnn``,
    the phone baselines' own sections (the mobile GPU, QNN's context binaries), and ``power``, the
    power figures: None where a device has none (then its results have no energy, and those
    baselines are refused)."""

    @property
    def power(self) -> PowerSection | None: ...
    @property
    def adreno(self) -> AdrenoSection | None: ...
    @property
    def qnn(self) -> QNNSection | None: ...


class DecodeNPU(MatrixVectorUnit, Protocol):
    """The NPU as one-token decode reads it besides: the rate its vector unit reads quantised
    weights from DRAM at, and each layer's dispatch (moesim.cost.decode_backend); None where the
    device does not know them, and decode runs the prefill tile pipeline."""

    @property
    def decode_weight_GBps(self) -> float | None: ...
    @property
    def decode_layer_overhead_us(self) -> float | None: ...


@runtime_checkable
class DecodeDevice(StreamingDevice, Protocol):
    """Everything decode reads of a device: the streaming sections, with an NPU that has its decode
    rates (:class:`DecodeNPU`). No baseline of decode needs a phone's own section."""

    @property
    def npu(self) -> DecodeNPU: ...


def numbers(capability: type) -> dict[str, object]:
    """The numbers (and sections) of the protocol ``capability`` and its protocol bases, in their
    order, each with the type it returns: what a device of that kind has."""
    return {name: kind for name, kind in _members(capability).items() if kind is not None}


def lacking(device: object, capability: type) -> str | None:
    """The dotted name of the first member of the protocol ``capability`` that ``device`` does not
    have, its sections' members looked for in them (``npu.decode_weight_GBps``); None when it has
    them all. A number the device does not know is there, as None: only an absent one counts
    (``isinstance`` with a runtime-checkable protocol looks at the sections' names alone)."""
    for name, kind in _members(capability).items():
        if not hasattr(device, name):
            return name
        inner = lacking(getattr(device, name), kind) if isinstance(kind, type) and _is_protocol(kind) else None
        if inner is not None:
            return f"{name}.{inner}"
    return None


def _is_protocol(kind: type) -> bool:
    return kind is not Protocol and bool(getattr(kind, "_is_protocol", False))


@cache
def _members(capability: type) -> dict[str, object]:
    """A protocol's members and its protocol bases', in their order: a property's return type, a
    method's None (a subclass's property replaces its base's)."""
    out: dict[str, object] = {}
    for klass in reversed(capability.__mro__):
        if not _is_protocol(klass):
            continue
        for name, value in vars(klass).items():
            if isinstance(value, property):
                out[name] = typing.get_type_hints(value.fget)["return"]
            elif callable(value) and not name.startswith("_"):
                out[name] = None
    return out

"""HVX packet model: a lower bound on HVX time for Q4_0 dequantisation and integer dot products.

The native Hexagon reference (``native_ref/hexagon``, docs/hexagon.md) runs real integer
HVX kernels under qemu-hexagon and counts their executed packets exactly. The counts are
linear in a few shape features; the coefficients are fitted by
:mod:`moesim.calibrate.hvx` and stored as data in ``hvx_packets.toml`` next to this module
(with the CSV they were fitted from). A Hexagon thread issues at most one packet per
cycle, so ``packets / clock`` is a lower bound on one HVX context's time for *these*
kernels: no stalls, no memory, DMA or VTCM timing, no HMX. Pure functions, no SimPy.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from moesim.errors import InputError

__all__ = ["PacketModel", "FEATURES", "MODEL_PATH", "Q4_0_BLOCK_B", "load_packet_models", "features",
           "predict_packets", "dequant_packets", "hvx_dequant_lower_bound_ns", "hvx_dequant_GBps_limit",
           "gemm_packets", "hvx_gemm_lower_bound_ns", "hvx_gemm_int8_TOPS_limit"]

MODEL_PATH = Path(__file__).with_name("hvx_packets.toml")
Q4_0_BLOCK_B = 18            # GGUF Q4_0: fp16 scale + 32 x 4 bit per 32 weights
_DEQUANT_STEP = 8            # the dequantisation kernels work on 8 blocks (one vector of nibbles)
_TILE_BLOCKS = 32            # the dot/GEMM kernels work on tiles of 32 blocks per row

_Dims = Mapping[str, int]


def _unrolled(iterations: int, unroll: int) -> list[float]:
    """A loop the compiler unrolled ``unroll`` times: whether its main loop runs, its passes,
    whether its remainder loop runs, its remainder iterations (each part has its own set-up)."""
    passes, rest = divmod(iterations, unroll)
    return [float(passes > 0), passes, float(rest > 0), rest]


def _names(it: str, unroll: int) -> tuple[str, ...]:
    return (f"[{it}>={unroll}]", f"({it})//{unroll}", f"[({it})%{unroll}>0]", f"({it})%{unroll}")


def _gemm(d: _Dims) -> list[float]:
    t4, t1, g = d["T"] // 4, d["T"] % 4, d["nb"] // _TILE_BLOCKS
    return [1.0, t4 + t1, d["R"] * t4, d["R"] * t1, d["R"] * t4 * g, d["R"] * t1 * g]


def _scatter(d: _Dims) -> list[float]:
    per_row = _unrolled(d["H"] // 64, 4)        # int16 vectors a row, 4 a pass
    return [1.0, d["n"], *(d["n"] * f for f in per_row)]


#: kernel -> (feature names, feature function of the shape); packets = coefficients . features.
#: The unroll factors are the ``clang loop unroll_count`` pragmas of native_ref/hexagon/kernels:
#: change both together (a test fits the model to fresh counts).
FEATURES: dict[str, tuple[tuple[str, ...], Callable[[_Dims], list[float]]]] = {
    "q4_dequant_i8": (("1", *_names("nb/8", 8)), lambda d: [1.0, *_unrolled(d["nb"] // _DEQUANT_STEP, 8)]),
    "q4_dequant_i16": (("1", *_names("nb/8", 4)), lambda d: [1.0, *_unrolled(d["nb"] // _DEQUANT_STEP, 4)]),
    "q4q8_dot": (("1", *_names("nb/32", 4)), lambda d: [1.0, *_unrolled(d["nb"] // _TILE_BLOCKS, 4)]),
    "q4_gemm": (("1", "T//4+T%4", "R*(T//4)", "R*(T%4)", "R*(T//4)*nb/32", "R*(T%4)*nb/32"), _gemm),
    "route_gather": (("1", "n", "n*H/128"), lambda d: [1.0, d["n"], d["n"] * d["H"] / 128]),
    "route_scatter_add": (("1", "n", *(f"n*{x}" for x in _names("H/64", 4))), _scatter),
}


@dataclass(frozen=True, kw_only=True)
class PacketModel:
    kernel: str
    features: tuple[str, ...]
    coefficients: tuple[float, ...]
    source: str                  # the CSV the coefficients were fitted from
    heldout_max_rel_error: float

    def packets(self, dims: _Dims) -> float:
        return math.fsum(c * f for c, f in zip(self.coefficients, features(self.kernel, dims)))


def features(kernel: str, dims: _Dims) -> list[float]:
    if kernel not in FEATURES:
        raise InputError("kernel", f"must be one of {', '.join(FEATURES)}", kernel)
    return FEATURES[kernel][1](dims)


@cache
def _load(path: Path) -> dict[str, PacketModel]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise InputError(str(path), f"must be a readable packet-model TOML file ({err})", show_value=False) from None
    models = {}
    for kernel, table in data.get("kernels", {}).items():
        names = tuple(table["features"])
        if kernel not in FEATURES or names != FEATURES[kernel][0]:
            raise InputError(f"{path.name}: kernels.{kernel}.features",
                             f"must be {list(FEATURES.get(kernel, ((),))[0])}", list(names))
        models[kernel] = PacketModel(kernel=kernel, features=names,
                                     coefficients=tuple(float(c) for c in table["coefficients"]),
                                     source=str(data.get("source", "?")),
                                     heldout_max_rel_error=float(table["heldout_max_rel_error"]))
    return models


def load_packet_models(path: Path | None = None) -> dict[str, PacketModel]:
    """The fitted models (default: the committed ``hvx_packets.toml``), by kernel."""
    return _load((path or MODEL_PATH).resolve())


def predict_packets(kernel: str, dims: _Dims, path: Path | None = None) -> float:
    models = load_packet_models(path)
    if kernel not in models:
        raise InputError("kernel", f"has no fitted packet model in {(path or MODEL_PATH).name}", kernel)
    return models[kernel].packets(dims)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise InputError(name, "must be > 0", value)


def dequant_packets(n_blocks: float) -> float:
    """Packets of one HVX context dequantising ``n_blocks`` Q4_0 blocks to int16 fixed point
    (the integer stand-in for the fp16 the HMX path consumes; same output width)."""
    if n_blocks <= 0:
        return 0.0
    step = _DEQUANT_STEP * math.ceil(n_blocks / _DEQUANT_STEP)
    return predict_packets("q4_dequant_i16", {"nb": step})


def hvx_dequant_lower_bound_ns(n_bytes: float, clock_GHz: float, contexts: int) -> float:
    """Lower bound on the time to dequantise ``n_bytes`` of Q4_0 (18 B per 32 weights) split
    evenly over ``contexts`` HVX contexts at ``clock_GHz``, one packet per cycle per context."""
    _positive("clock_GHz", clock_GHz)
    _positive("contexts", contexts)
    if n_bytes <= 0:
        return 0.0
    return dequant_packets(math.ceil(n_bytes / Q4_0_BLOCK_B / contexts)) / clock_GHz


def hvx_dequant_GBps_limit(clock_GHz: float, contexts: int) -> float:
    """The dequantisation rate the bound allows for large tensors, in Q4_0 GB/s (= bytes/ns):
    an upper bound on the HVX dequantisation throughput of these kernels."""
    _positive("clock_GHz", clock_GHz)
    _positive("contexts", contexts)
    per_pass = load_packet_models()["q4_dequant_i16"].coefficients[2]   # packets per 4 x 8 blocks
    return 4 * _DEQUANT_STEP * Q4_0_BLOCK_B / per_pass * clock_GHz * contexts


def gemm_packets(tokens: int, rows: int, row_len: int) -> float:
    """Packets of the Q4_0 x int8 GEMM kernel for ``tokens`` x (``rows`` x ``row_len``) on one
    context; ``row_len`` is padded to whole tiles of 32 blocks (1024 weights)."""
    if tokens <= 0 or rows <= 0:
        return 0.0
    _positive("row_len", row_len)
    nb = _TILE_BLOCKS * math.ceil(row_len / (32 * _TILE_BLOCKS))
    return predict_packets("q4_gemm", {"R": rows, "nb": nb, "T": tokens})


def hvx_gemm_lower_bound_ns(tokens: int, rows: int, row_len: int, clock_GHz: float, contexts: int) -> float:
    """Lower bound on the integer-HVX GEMM time with the rows split over ``contexts``."""
    _positive("clock_GHz", clock_GHz)
    _positive("contexts", contexts)
    return gemm_packets(tokens, math.ceil(rows / contexts), row_len) / clock_GHz


def hvx_gemm_int8_TOPS_limit(clock_GHz: float, contexts: int) -> float:
    """The int8 rate (tera-ops per second, a multiply-add is 2 ops) the bound allows for the
    GEMM kernel's large shapes with full token tiles: 4 tokens x 1024 MACs per
    ``R*(T/4)*nb/32`` unit. An upper bound on these kernels' HVX int8 throughput."""
    _positive("clock_GHz", clock_GHz)
    _positive("contexts", contexts)
    per_unit = load_packet_models()["q4_gemm"].coefficients[4]
    return 2.0 * 4 * 1024 / per_unit * clock_GHz * contexts / 1e3

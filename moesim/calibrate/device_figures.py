"""Measured figures of a user's phone, each with the function that predicts it from a profile
(``moesim calibrate device``).

Which rates each log fits (the groups, fitted in this order, each on the profile the previous
ones produced):

- ``cpu-tg``: llama-bench CPU token generation -> ``cpu.q4_0_gemv_GBps`` (weights read per token
  over the time of a token, :class:`moesim.calibrate.dense_anchor.DenseDecode`);
- ``cpu-pp``: CPU prompt processing at two or more lengths -> ``cpu.q4_0_gemm_GFLOPS`` and
  ``cpu.attention_GFLOPS``, priced by :func:`moesim.calibrate.dense_anchor.dense_prefill_s` on the
  CPU backend;
- ``ufs``: fio reads at two or more request sizes -> ``ufs.effective_read_bw_GBps`` (R) and
  ``ufs.read_latency_us`` (L) of ``rate(b, Q) = min(R, Q b / (L + b / R))`` (:mod:`moesim.cost.flash`);
- ``htp``: HTP prompt processing (and TTFT logs) -> the three HTP rates ``calibrate estream`` fits
  (:data:`moesim.calibrate.estream.FIT_FIELDS`), priced like its llama.cpp anchor.

Rows moesim cannot price are listed with the reason, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moesim.calibrate.bench_logs import BenchRow
from moesim.calibrate.bench_models import BenchModel, bench_model
from moesim.calibrate.dense_anchor import dense_prefill_s
from moesim.calibrate.estream import FIT_FIELDS
from moesim.calibrate.io_logs import FioPoint, TTFTPoint
from moesim.config.device import MobileNPUProfile
from moesim.cost.flash import read_rate_GBps
from moesim.cost.params import cpu_backend, npu_backend, ufs_params
from moesim.errors import InputError

if TYPE_CHECKING:
    from moesim.config.prefill import EStreamPolicy

__all__ = ["Figure", "FieldSpec", "Excluded", "GROUPS", "group_fields", "bench_figures", "fio_figures",
           "ttft_figures", "unique_figures", "HVX_ROWS_BELOW", "MAX_TTFT_SLOTS"]

#: llama.cpp's HTP backend runs batches under 32 rows on its HVX vector-dot path, not HMX (dense_anchor)
HVX_ROWS_BELOW = 32
#: the fit simulates every TTFT row at each of its steps (60-200 of them): a prefill costs about 0.3 us a routed
#: expert slot (tokens x MoE layers x top-k) here (OLMoE 4K, 0.5 M slots: 0.17 s), so the rows together may hold
#: 2**21 slots, about 0.7 s a step and a fit within about 30 s (measured: OLMoE 4K 13 s, Qwen3-30B-A3B 4K, 1.57 M
#: slots, the largest MoE the EStream paper prefilled, 23 s); OLMoE up to 16K tokens. A GPU-server MoE at phone
#: prompt lengths (Qwen3-235B-A22B at 4K: 3.1 M) is refused before the first step.
MAX_TTFT_SLOTS = 1 << 21
GROUPS = ("cpu-tg", "cpu-pp", "ufs", "htp")


@dataclass(frozen=True)
class Figure:
    """One measured number and how a profile predicts it."""

    name: str              # "htp:pp512", "ufs:512KiB@q1", "ttft:olmoe-1b-7b:4096"
    group: str
    measured: float
    unit: str              # "tok/s", "GB/s", "s"
    source: str            # "FILE: line N"
    predict: Callable[[MobileNPUProfile], float]


@dataclass(frozen=True)
class FieldSpec:
    field: str             # "section.name"
    low: float
    high: float
    why: str


@dataclass(frozen=True)
class Excluded:
    source: str
    test: str
    reason: str


def group_fields(group: str, base: MobileNPUProfile) -> tuple[FieldSpec, ...]:
    """The fitted fields of ``group`` and their physical bounds (some from the base profile's spec)."""
    if group == "cpu-tg":
        peak_bw = base.memory.peak_bw_GBps
        return (FieldSpec("cpu.q4_0_gemv_GBps", 1.0, peak_bw,
                          f"at most the base's LPDDR peak memory.peak_bw_GBps ({peak_bw:g} GB/s, spec)"),)
    if group == "cpu-pp":
        floor = max(10.0, base.cpu.routed_gemv_GFLOPS or 0.0)
        return (FieldSpec("cpu.q4_0_gemm_GFLOPS", floor, 5000.0,
                          f"{floor:g}: the base's routed GEMV, never faster than the GEMM; 5,000: above the int8 "
                          "matrix issue rate of 8 phone cores at 4.6 GHz x 128 ops a cycle"),
                FieldSpec("cpu.attention_GFLOPS", 1.0, 5000.0, "1 GFLOPS to the GEMM's upper bound"))
    if group == "ufs":
        peak = base.ufs.peak_read_bw_GBps
        return (FieldSpec("ufs.effective_read_bw_GBps", 0.05, peak,
                          f"at most the base's interface peak ufs.peak_read_bw_GBps ({peak:g} GB/s, spec)"),
                FieldSpec("ufs.read_latency_us", 0.1, 1000.0, "a positive request latency under 1 ms"))
    assert group == "htp", group
    return tuple(FieldSpec(f, low, high, why) for f, low, high, why in FIT_FIELDS)


#: the fields that name one measurement, by group (a figure measured twice is one measurement counted twice)
_SAME_TEST = {"cpu-tg": "test", "cpu-pp": "test", "ufs": "bs and iodepth", "htp": "test"}


def unique_figures(figures: Sequence[Figure]) -> list[Figure]:
    """``figures`` once no two measure the same thing (in one log or across logs): a measurement counted
    twice would shrink the 90% intervals without any new evidence."""
    seen: dict[str, Figure] = {}
    for f in figures:
        if f.name in seen:
            field = "model and tokens" if f.name.startswith("ttft:") else _SAME_TEST[f.group]
            raise InputError(field, f"must name each measurement once ({f.name} is also at {seen[f.name].source}; "
                             "give one run of each test)", f.name, source=f.source)
        seen[f.name] = f
    return list(figures)


def bench_figures(rows: Sequence[BenchRow]) -> tuple[list[Figure], list[Excluded]]:
    """Figures of llama-bench rows (CPU pp, CPU tg, HTP pp) and the rows left out, with why."""
    figures: list[Figure] = []
    excluded: list[Excluded] = []
    models = {r.model_type for r in rows if r.unit != "other"}
    for r in rows:
        why = _why_excluded(r)
        if why:
            excluded.append(Excluded(r.source, r.test, why))
            continue
        m = bench_model(r.model_type, r.source)
        suffix = f"/{m.spec.name}" if len(models) > 1 else ""
        name = f"{r.unit}:{r.test}{suffix}"
        if r.n_gen:
            nbytes = m.decode_shape(r.avg_ts, r.source).bytes_per_token()
            figures.append(Figure(name, "cpu-tg", r.avg_ts, "tok/s", r.source, _tg_predict(nbytes)))
            continue
        group = "cpu-pp" if r.unit == "cpu" else "htp"
        figures.append(Figure(name, group, r.avg_ts, "tok/s", r.source, _pp_predict(r, m)))
    return unique_figures(figures), excluded


def _tg_predict(nbytes: int) -> Callable[[MobileNPUProfile], float]:
    """Generated tokens per second reading ``nbytes`` of weights a token at the CPU's weight rate."""
    def predict(p: MobileNPUProfile) -> float:
        return p.cpu.require("q4_0_gemv_GBps", p.name) * 1e9 / nbytes
    return predict


def _fio_predict(block_B: int, depth: int) -> Callable[[MobileNPUProfile], float]:
    def predict(p: MobileNPUProfile) -> float:
        return read_rate_GBps(block_B, depth, ufs_params(p, into_arena=False))
    return predict


def _pp_predict(r: BenchRow, m: BenchModel) -> Callable[[MobileNPUProfile], float]:
    """Prompt tokens per second of row ``r`` on a profile's CPU or HTP."""
    def predict(p: MobileNPUProfile) -> float:
        be = cpu_backend(p) if r.unit == "cpu" else npu_backend(p, "llamacpp")
        return r.n_prompt / dense_prefill_s(m.spec, m.ffn, r.n_prompt, be, r.n_ubatch)
    return predict


def _why_excluded(r: BenchRow) -> str:
    if r.unit == "other":
        return (f"ran on {r.backend or 'another accelerator'} (a GPU backend): moesim's phone profile has no rate "
                "for it")
    if r.n_prompt and r.n_gen:
        return "a combined pp+tg test: give pp and tg tests separately"
    if r.n_depth:
        return "a test at a KV-cache depth (n_depth > 0): priced only from an empty cache"
    if r.unit == "htp" and r.n_gen:
        return ("HTP token generation: its weight rate and per-layer dispatch need two models to separate "
                "(calibrate estream's decode anchors); not fitted")
    if r.unit == "htp" and r.n_prompt < HVX_ROWS_BELOW:
        return f"fewer than {HVX_ROWS_BELOW} prompt tokens run llama.cpp's HVX vector-dot path, not HMX"
    if r.unit == "htp" and r.n_ubatch < HVX_ROWS_BELOW:
        return (f"micro-batches of fewer than {HVX_ROWS_BELOW} rows (n_ubatch) run llama.cpp's HVX vector-dot "
                "path, not HMX")
    return ""


def _size(n: int) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def fio_figures(points: Sequence[FioPoint]) -> list[Figure]:
    figures = [Figure(f"ufs:{_size(pt.block_B)}@q{pt.queue_depth}", "ufs", pt.read_GBps, "GB/s", pt.source,
                      _fio_predict(pt.block_B, pt.queue_depth))
               for pt in points]
    return unique_figures(figures)


def ttft_figures(points: Sequence[TTFTPoint]) -> list[Figure]:
    """TTFT rows, priced by a simulated EStream prefill (prefetch during non-FFN work); a run the
    simulator refuses (a group larger than the model's experts, say) names the row."""
    from moesim.config.catalog import load_model
    from moesim.config.loading import validate_data
    from moesim.config.prefill import EStreamPolicy

    figures, slots = [], 0
    for pt in points:
        try:
            spec = load_model(pt.model)
        except InputError as exc:
            raise InputError("model", exc.rule, pt.model, source=pt.source) from None
        slots += pt.tokens * spec.num_moe_layers * spec.moe.top_k
        if slots > MAX_TTFT_SLOTS:
            raise InputError("tokens", f"must keep the TTFT rows within {MAX_TTFT_SLOTS:,} routed expert slots "
                             f"together (tokens x MoE layers x top-k; {pt.model} has {spec.num_moe_layers} x "
                             f"{spec.moe.top_k}): the fit simulates every row at each step", pt.tokens,
                             source=pt.source)
        policy = validate_data(EStreamPolicy, {"prefetch": "non-ffn", "group_size": pt.group_size, "banks": pt.banks},
                               source=pt.source)
        figures.append(Figure(f"ttft:{pt.model}:{pt.tokens}", "htp", pt.ttft_s, "s", pt.source,
                              _ttft_predict(pt, policy)))
    return unique_figures(figures)


def _ttft_predict(pt: TTFTPoint, policy: EStreamPolicy) -> Callable[[MobileNPUProfile], float]:
    def predict(p: MobileNPUProfile) -> float:
        from moesim.config.prefill import PrefillRun
        from moesim.simulate.prefill import simulate_prefill

        try:
            run = PrefillRun(model=pt.model, device=p.name, tokens=pt.tokens, policy=policy)
            return float(simulate_prefill(run, profile=p).to_dict()["ttft_s"])
        except InputError as exc:
            raise InputError(exc.field, exc.rule, exc.value, source=pt.source, show_value=exc.show_value) from None
    return predict

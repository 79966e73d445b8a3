"""``decode/`` cases: phone decode with experts on flash against published figures.

None of these figures was used to set a number of the profile (the CPU's decode rate comes
from a dense model, ``cpu.q4_0_gemv_GBps``), so every case is a held-out prediction. The
settings follow the source as closely as the catalog allows; what differs is stated in the
case's source text and in docs/background/decode-figures.md:

* BigMoeOnEdge (github.com/Helldez/BigMoeOnEdge, docs/benchmarks*.md): llama.cpp-based expert
  streaming on the CPU of a OnePlus 15R (SoC not named, 11.3 GB), an LRU expert cache of
  ``--cache-mb``, 4 read lanes (here: UFS queue depth 4), flash measured at 1,809.9 MiB/s for one
  reader of 4 MiB random reads (here: ``ufs.effective_read_bw_GBps = 1.898``), 256-token greedy
  decode after a short prompt. Experts as stored there (``expert_format``): MXFP4 (gpt-oss),
  Q4_K (Q4_K_M's base format), Q5_K (Q5_K_M's).
* TurboSparse (arXiv 2406.05955, Table 9): stock llama.cpp, Mixtral-8x7B INT4, OnePlus 12
  (24 GB, 19 GB usable, UFS 4.0): 0.5 tok/s, mmap demand paging (the page cache as the cache).
* llama.cpp's Snapdragon docs: OLMoE-1B-7B Q4_0 decode on the HTP of an 8 Elite Gen 5, 45.69 tok/s
  (an early build, two HTP sessions): the NPU decode path, whose two rates come from two dense
  models' decode on a v81 phone (``htp.decode_weight_GBps``, ``htp.decode_layer_overhead_us``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from moesim.config.decode import DecodeRun
from moesim.simulate.decode import simulate_decode
from moesim.validate.registry import Case

__all__ = ["decode_cases", "decode_rate_runs"]

_BIGMOE = ("BigMoeOnEdge (github.com/Helldez/BigMoeOnEdge @ 2d4f2b1, {doc}): OnePlus 15R, CPU, 4 lanes, "
           "{what} (docs/background/decode-figures.md section 1.1)")
_FLASH = {"ufs.effective_read_bw_GBps": 1.898}
MiB = 2**20


#: the routed experts' storage in each source's files (their K-quant "M" mixes store some tensors
#: in Q6_K: the base format is a slight underestimate of their bytes)
_FORMAT = {"gpt-oss-120b": "MXFP4", "qwen3-30b-a3b": "Q4_K", "lfm2.5-8b-a1b": "Q5_K"}


@cache
def _run(model: str, cache_mib: float | None, policy: str = "lru", queue_depth: int = 4,
         backend: str = "cpu", tokens: int = 96) -> dict[str, Any]:
    data: dict[str, object] = {"model": model, "tokens": tokens, "context": 64, "warmup_tokens": 32,
                            "cache_policy": policy, "queue_depth": queue_depth, "backend": backend,
                            "expert_format": _FORMAT.get(model, "Q4_0") if backend == "cpu" else "Q4_0"}
    if policy in ("lru", "mmap"):
        data["cache_GiB"] = (cache_mib or 0) * MiB / 2**30
    if policy != "mmap" and backend == "cpu" and policy != "resident":
        data["overrides"] = dict(_FLASH)
    return simulate_decode(DecodeRun.model_validate(data)).to_dict()


@dataclass(frozen=True, kw_only=True)
class _Spec:
    """One case's figure and the decode run that predicts it."""

    name: str
    ref: float
    source: str
    metric: str
    run: tuple[Any, ...]
    unit: str
    tolerance: float
    kind: str
    miss: str

    def case(self) -> Case:
        def predict() -> float:
            return float(_run(*self.run)[self.metric]) / (MiB if self.unit == "MiB" else 1)
        return Case(name=self.name, reference=self.ref, source=self.source, tolerance=self.tolerance,
                    tolerance_kind=self.kind, predict=predict, fitted_to=False, unit=self.unit,  # type: ignore[arg-type]
                    expect="miss" if self.miss else "pass", why=self.miss)


def _case(name: str, ref: float, source: str, metric: str, *run: Any, unit: str = "tok/s",
          tolerance: float = 0.25, kind: str = "relative", miss: str = "") -> _Spec:
    """``miss``: the reason a case is a known miss (and where it is explained); "" = expected to pass."""
    return _Spec(name=name, ref=ref, source=source, metric=metric, run=run, unit=unit, tolerance=tolerance,
                 kind=kind, miss=miss)


_WHERE = "docs/decode.md, 'Validation against published decode figures'"
_OSS_ROUTING = (f"moesim's gpt-oss-120b trace reuses experts from token to token far more than BigMoeOnEdge's "
                f"prompt did, and moesim has no trace of that prompt ({_WHERE})")


def _specs() -> list[_Spec]:
    oss = _BIGMOE.format(doc="docs/benchmarks-gpt-oss.md", what="gpt-oss-120b top-4, 256 tokens, overlap")
    qwen = _BIGMOE.format(doc="docs/benchmarks.md", what="Qwen3-30B-A3B Q4_K_M, 256 tokens, overlap; moesim has "
                          "no real Qwen3-30B-A3B trace: synthetic routing")
    lfm = _BIGMOE.format(doc="docs/bench-data/2026-07-20-sidecar", what="LFM2.5-8B-A1B Q5_K_M, 96 tokens; "
                         "synthetic routing")
    return [
        _case("decode/gpt-oss-120b-no-cache", 0.711, oss, "tokens_per_s", "gpt-oss-120b", None, "none",
              miss=f"+31%: that phone's throttled 4-thread CPU computes several times slower than the rate "
                   f"measured on an 8 Elite Gen 5 ({_WHERE})"),
        _case("decode/gpt-oss-120b-no-cache-read-per-token", 1817.0, oss, "ufs_bytes_per_token",
              "gpt-oss-120b", None, "none", unit="MiB", tolerance=0.10),
        _case("decode/gpt-oss-120b-lru-2000mib", 0.998, oss, "tokens_per_s", "gpt-oss-120b", 2000.0,
              miss=f"2.4x fast: {_OSS_ROUTING}"),
        _case("decode/gpt-oss-120b-lru-2000mib-hit-rate", 0.271, oss, "cache_hit_rate", "gpt-oss-120b", 2000.0,
              unit="", tolerance=0.10, kind="absolute", miss=f"hit rate 0.67 vs 0.27: {_OSS_ROUTING}"),
        _case("decode/qwen3-30b-a3b-lru-2000mib-hit-rate", 0.53, qwen, "cache_hit_rate", "qwen3-30b-a3b", 2000.0,
              unit="", tolerance=0.10, kind="absolute"),
        _case("decode/qwen3-30b-a3b-lru-4000mib-hit-rate", 0.76, qwen, "cache_hit_rate", "qwen3-30b-a3b", 4000.0,
              unit="", tolerance=0.10, kind="absolute",
              miss=f"-0.11: synthetic routing (moesim has no real Qwen3-30B-A3B trace) decides the hit rate "
                   f"({_WHERE})"),
        _case("decode/qwen3-30b-a3b-lru-4000mib", 3.98, qwen, "tokens_per_s", "qwen3-30b-a3b", 4000.0),
        _case("decode/lfm2.5-8b-a1b-lru-3000mib", 12.969, lfm, "tokens_per_s", "lfm2.5-8b-a1b", 3000.0),
        _case("decode/mixtral-8x7b-mmap", 0.5, "TurboSparse (arXiv 2406.05955) Table 9: llama.cpp, Mixtral-47B INT4, "
              "OnePlus 12 (19 GB usable, UFS 4.0); here the 8 Elite Gen 5 profile with a 15 GiB page cache",
              "tokens_per_s", "mixtral-8x7b", 15 * 1024.0, "mmap",
              miss=f"+60%: TurboSparse's Snapdragon 8 Gen 3 and UFS 4.0 are slower than the profile's, and no "
                   f"page-cache thrash of the non-expert weights is modelled; the faults now read at the 2 GB/s "
                   f"small-folio cap of the page cache (+114% at the device's 3.0 GB/s before) ({_WHERE})"),
        _case("decode/olmoe-1b-7b-npu-resident", 45.69, "llama.cpp docs/backend/snapdragon/README.md: OLMoE-1B-7B "
              "Q4_0 eval on the HTP of an 8 Elite Gen 5 (early build, two HTP sessions)", "tokens_per_s",
              "olmoe-1b-7b", None, "resident", 4, "npu"),
    ]


def decode_cases() -> list[Case]:
    return [s.case() for s in _specs()]


def decode_rate_runs() -> list[tuple[Case, Callable[[], dict[str, Any]]]]:
    """The tokens/s cases, each with the run that predicts it (called: its result, ``to_dict``;
    the busy shares in ``utilization`` say what bounds it; moesim.validate.intervals)."""
    return [(s.case(), partial(_run, *s.run)) for s in _specs() if s.metric == "tokens_per_s"]

"""The load phase of a fresh process: how long a runtime takes to read its resident weights
before it can take a prompt, with the page cache cold or warm (pure).

What each prefill policy's runtime loads and by which path is the policy's floor
(:func:`moesim.policies.prefill.plan.plan_floor`); this module prices it. Two paths:

- ``page-cache``: a buffered read (llama.cpp's mmap with MAP_POPULATE, or fread). Cold, the
  file comes from flash at the buffered sequential rate, ``t = bytes / R_buffered`` (never
  faster than the flash: ``R_buffered <= R_peak``); warm, its pages are already cached and the
  runtime copies them out (each byte read and written once on the LPDDR5X bus),
  ``t = 2 bytes / R_DRAM``: a lower bound (page-table set-up and a repack are not counted);
- ``direct``: O_DIRECT reads bypass the page cache, so cold and warm cost the same flash read,
  ``t = latency + bytes / R_ufs`` (one large sequential request, no bank maintenance).

The load never overlaps the prompt: every runtime finishes it before it accepts one (MAP_POPULATE
and fread return when the data is in memory, the NPU binds its resident weights before the first
graph runs), so a run whose TTFT counts it adds it in series, and the prefill's measure stage
does that rather than a SimPy phase that would only shift every span (docs/background/
prefill-model.md, "The measurement protocol"). Reads that do overlap compute (streamed experts,
mmap faults of experts) are simulated by the workloads, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moesim.config.capabilities import PrefillDevice
from moesim.config.prefill import PageCache
from moesim.cost.energy import RunActivity
from moesim.cost.params import ufs_params
from moesim.errors import NotFittedError

__all__ = ["LoadPath", "LoadRates", "LoadPhase", "load_phase", "load_rates", "PricedLoad", "price_load"]

#: How a runtime reads its resident weights at load: through the page cache, or with direct I/O.
LoadPath = Literal["page-cache", "direct"]


@dataclass(frozen=True, kw_only=True)
class LoadRates:
    """The rates a load runs at, in bytes per ns (= GB/s), and the direct read's request latency."""

    buffered_B_per_ns: float      # flash through the page cache, sequential (cold)
    direct_B_per_ns: float        # flash with O_DIRECT, large sequential reads
    direct_latency_ns: float
    copy_B_per_ns: float          # a copy out of the page cache (warm): bytes per ns copied

    def __post_init__(self) -> None:
        for name in ("buffered_B_per_ns", "direct_B_per_ns", "copy_B_per_ns"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.direct_latency_ns < 0:
            raise ValueError(f"direct_latency_ns must be >= 0, got {self.direct_latency_ns}")


@dataclass(frozen=True, kw_only=True)
class LoadPhase:
    """A priced load: the bytes the runtime loads, how many of them came from flash, the time."""

    path: LoadPath
    loaded_B: int
    flash_B: int
    ns: float


def load_phase(loaded_B: int, path: LoadPath, page_cache: PageCache, rates: LoadRates) -> LoadPhase:
    """The load of ``loaded_B`` bytes by ``path`` with the page cache ``page_cache``.

    >>> r = LoadRates(buffered_B_per_ns=2.0, direct_B_per_ns=4.0, direct_latency_ns=25_000.0, copy_B_per_ns=40.0)
    >>> load_phase(4_000_000_000, "page-cache", "cold", r).ns / 1e9   # 4 GB at 2 GB/s
    2.0
    >>> load_phase(4_000_000_000, "page-cache", "warm", r).ns / 1e9   # a copy at 40 GB/s
    0.1
    >>> [load_phase(4_000_000_000, "direct", cache, r).ns / 1e9 for cache in ("cold", "warm")]
    [1.000025, 1.000025]
    """
    if loaded_B < 0:
        raise ValueError(f"loaded_B must be >= 0, got {loaded_B}")
    if loaded_B == 0:
        return LoadPhase(path=path, loaded_B=0, flash_B=0, ns=0.0)
    if path == "direct":
        return LoadPhase(path=path, loaded_B=loaded_B, flash_B=loaded_B,
                         ns=rates.direct_latency_ns + loaded_B / rates.direct_B_per_ns)
    if page_cache == "cold":
        return LoadPhase(path=path, loaded_B=loaded_B, flash_B=loaded_B, ns=loaded_B / rates.buffered_B_per_ns)
    return LoadPhase(path=path, loaded_B=loaded_B, flash_B=0, ns=loaded_B / rates.copy_B_per_ns)


def load_rates(p: PrefillDevice, end: Literal["nominal", "slow", "fast"] = "nominal") -> LoadRates:
    """The rates of a load at ``end`` of their ranges. Buffered: ``runtime.buffered_read_bw_GBps``
    (its ``_low_`` / ``_high_`` figures at the slow / fast end), at most ``ufs.peak_read_bw_GBps``;
    direct: the UFS rate of :func:`moesim.cost.params.ufs_params` without bank maintenance, times
    the ends of the measured large-read range (``ufs.read_bw_low_GBps`` / ``_high_``) over R; the
    warm copy: half the LPDDR5X peak, at every end. An end never lies on the wrong side of the
    nominal rate (a what-if that sets a rate outside its measured range gets that side's end at
    the rate it set), so the interval always holds the nominal time.

    >>> from moesim.config.profiles import load_profile, override_profile
    >>> p = override_profile(load_profile("sd8-elite-gen5"), {"ufs.read_bw_low_GBps": 3.9})   # above R
    >>> [round(load_rates(p, end).direct_B_per_ns, 3) for end in ("slow", "nominal", "fast")]
    [3.697, 3.697, 4.0]
    """
    rt = p.runtime
    buffered = rt.require("buffered_read_bw_GBps", p.name)
    direct = ufs_params(p, into_arena=False)
    r = p.flash.effective_read_bw_GBps or p.flash.peak_read_bw_GBps
    ratio = 1.0
    if end == "slow":
        buffered = min(buffered, rt.buffered_read_bw_low_GBps or buffered)
        ratio = min(1.0, (p.flash.read_bw_low_GBps or r) / r)
    elif end == "fast":
        buffered = max(buffered, rt.buffered_read_bw_high_GBps or buffered)
        ratio = max(1.0, (p.flash.read_bw_high_GBps or r) / r)
    return LoadRates(buffered_B_per_ns=min(buffered, p.flash.peak_read_bw_GBps),
                     direct_B_per_ns=min(direct.B_per_ns * ratio, p.flash.peak_read_bw_GBps),
                     direct_latency_ns=direct.latency_ns, copy_B_per_ns=p.memory.peak_bw_GBps / 2)


@dataclass(frozen=True, kw_only=True)
class PricedLoad:
    """A run's load phase: nominal, its time at the slow and fast ends of its rates, and whether
    the run's TTFT counts it (``ttft_from = "launch"``). ``phase`` is None when the profile lacks a
    rate the load needs and the TTFT does not count it (the result reports ``load_s = null``)."""

    phase: LoadPhase | None
    slow_s: float
    fast_s: float
    counted: bool

    @property
    def s(self) -> float:
        return 0.0 if self.phase is None else self.phase.ns / 1e9

    def counted_s(self) -> float:
        """What the TTFT adds for the load: its time when counted, else nothing."""
        return self.s if self.counted else 0.0

    def add_to_interval(self, interval: tuple[float, float] | None) -> tuple[float, float] | None:
        """A request's 90% interval with the counted load in series (its fast end with the low end)."""
        if interval is None or not self.counted:
            return interval
        return interval[0] + self.fast_s, interval[1] + self.slow_s

    def activity(self, end: str, npu_in_use: bool) -> RunActivity | None:
        """What the counted load keeps busy at energy end ``end`` ("low", "nominal", "high"): the
        flash while it reads, no engine computing (the CPU at its idle figure, which allows a
        loader thread; the NPU session open and idle); each loaded byte written once into DRAM,
        or read and written once by a warm copy."""
        if not self.counted or self.phase is None or self.phase.loaded_B == 0:
            return None
        seconds = {"low": self.fast_s, "high": self.slow_s}.get(end, self.s)
        from_flash = self.phase.flash_B > 0
        return RunActivity(seconds, 0.0, 0.0, seconds if from_flash else 0.0,
                           self.phase.loaded_B * (1 if from_flash else 2), npu_in_use)


def price_load(loaded_B: int, path: LoadPath, page_cache: PageCache, counted: bool,
               p: PrefillDevice) -> PricedLoad:
    """The load of ``loaded_B`` bytes by ``path`` at the profile's nominal, slow and fast rates.
    A profile without the buffered rate cannot price a load: an error when the TTFT counts it,
    else a load of ``phase = None``."""
    try:
        nominal = load_phase(loaded_B, path, page_cache, load_rates(p))
    except NotFittedError:
        if counted:
            raise
        return PricedLoad(phase=None, slow_s=0.0, fast_s=0.0, counted=False)
    slow = load_phase(loaded_B, path, page_cache, load_rates(p, "slow"))
    fast = load_phase(loaded_B, path, page_cache, load_rates(p, "fast"))
    return PricedLoad(phase=nominal, slow_s=slow.ns / 1e9, fast_s=fast.ns / 1e9, counted=counted)

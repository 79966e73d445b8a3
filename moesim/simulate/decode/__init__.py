"""``simulate_decode``: decode on a phone with an expert cache in DRAM (the entry point).

The stages, as prefill's: resolve and plan (:func:`plan_decode`: a frozen :class:`DecodePlan`
with the resolved model, device and tokens, the memory by part, the expert cache's size and the
predictors), replay (:func:`replay_decode`: one SimPy process) and result
(:func:`measure_decode`: the :class:`~moesim.results.DecodeResult`'s metrics). The smallest
cache a run may have is one rule, :func:`moesim.policies.decode.memory.smallest_cache_slots`,
which the auto-configurator (:mod:`moesim.autoconfig.decode`) asks too.
"""

from __future__ import annotations

import time

from moesim.config.capabilities import DecodeDevice
from moesim.config.decode import DecodeRun
from moesim.cost.decode_backend import cpu_decode_backend, npu_decode_backend
from moesim.policies.decode.memory import decode_memory, expert_bytes
from moesim.progress import Update, phase
from moesim.results import DecodeResult
from moesim.simulate.decode.measure import measure_decode
from moesim.simulate.decode.plan import DecodePlan, plan_decode
from moesim.simulate.decode.replay import DecodeReplayed, replay_decode
from moesim.traces.trace import RoutingTrace

__all__ = ["simulate_decode", "plan_decode", "DecodePlan", "replay_decode", "DecodeReplayed", "measure_decode",
           "decode_memory", "cpu_decode_backend", "npu_decode_backend", "expert_bytes"]


def simulate_decode(run: DecodeRun, trace: RoutingTrace | None = None, *,
                    profile: DecodeDevice | None = None, progress: Update | None = None) -> DecodeResult:
    """Simulate ``run.tokens`` decode steps of ``run.model`` on a phone with an expert cache;
    ``progress(done, total)`` is called after every step with the tokens decoded so far.
    ``profile`` replaces ``run.device`` with an in-memory profile or any other device with the
    numbers decode reads (:class:`~moesim.config.capabilities.DecodeDevice`); ``run.overrides``
    apply to a profile (:func:`~moesim.config.profiles.decode_device`)."""
    wall0 = time.perf_counter()
    plan = plan_decode(run, trace, profile=profile)
    phase("simulating")
    replayed = replay_decode(plan, progress)
    return DecodeResult(measure_decode(plan, replayed, wall0), spans=replayed.spans,
                        accesses=replayed.measured.accesses)

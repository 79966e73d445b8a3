"""The auto-configurator on real hardware: its choice from the calibrated host profile
against an exhaustive *measured* sweep of the native executor over the same space.

The reproduction of the published evaluation (BRIEF.md section 1) on a machine we have:
every (G, B, Q) of the largest budget's space is run on the executor (rounds round-robin,
fastest round kept); per budget, the choice's measured makespan is compared with the best
measured one, and optionally the two are run alternately head to head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moesim.calibrate.host import executor_model, host_backend, host_ufs
from moesim.config.device import HostProfile
from moesim.config.model import ModelSpec
from moesim.cost.maxplus import evaluate
from moesim.cost.ops import expert_op
from moesim.cost.pipeline import ServiceTimes
from moesim.errors import InputError
from moesim.policies.prefill.search import StoredProfile, StreamSetting, build_profile, select, space
from moesim.simulate.prefill import routing_counts
from moesim.units import ns

__all__ = ["SweepCase", "host_service_times", "sweep"]


def host_service_times(p: HostProfile, model: ModelSpec, routing: np.ndarray, nonffn_dim: int) -> ServiceTimes:
    be, ufs = host_backend(p), host_ufs(p)
    counts = routing_counts(routing, model.moe.num_routed_experts)
    n = routing.shape[0]
    kernel_ns = ns(2.0 * n * nonffn_dim * nonffn_dim / p.cpu.require("nonffn_GFLOPS", p.name))
    costs = tuple(tuple(expert_op(int(t), model, be) for t in row) for row in counts.tolist())
    return ServiceTimes(model=model.name, n_tokens=n, expert_B=model.expert_bytes("q4_0"),
                        non_ffn_ns=tuple([kernel_ns] * model.num_layers), tail_ns=0, latency_ns=ns(ufs.latency_ns),
                        B_per_ns=ufs.B_per_ns, call_overhead_ns=be.call_overhead_ns, counts=counts, expert_costs=costs,
                        num_dense_layers=0)


@dataclass(frozen=True, kw_only=True)
class SweepCase:
    """One memory budget: the auto-configurator's choice against the measured exhaustive sweep.

    ``samples`` holds every configuration's measured makespans (s), one per round; a
    configuration's measured time is its fastest round (interference only adds time)."""

    arena_experts: int
    chosen: StreamSetting
    predicted_s: float
    best: StreamSetting
    samples: dict[StreamSetting, list[float]]
    predicted: dict[StreamSetting, float]   # the max-plus evaluator's makespan (s) of every configuration
    duel: tuple[list[float], list[float]] | None = None   # chosen vs best, alternating runs after the sweep

    @property
    def duel_p(self) -> float | None:
        """Two-sided sign test over the alternating runs (pairs in run order): the probability of a
        split at least this uneven if the two configurations were equally fast."""
        if self.duel is None:
            return None
        from scipy.stats import binomtest

        wins = sum(a < b for a, b in zip(*self.duel))
        return float(binomtest(wins, len(self.duel[0])).pvalue)

    @property
    def indistinguishable(self) -> bool:
        """The chosen configuration is the measured minimum, or the alternating runs cannot tell
        it from the measured minimum (sign test p > 0.05)."""
        p = self.duel_p
        return self.chosen == self.best or (p is not None and p > 0.05)

    def measured(self, cfg: StreamSetting) -> float:
        return min(self.samples[cfg])

    @property
    def chosen_measured_s(self) -> float:
        return self.measured(self.chosen)

    @property
    def best_measured_s(self) -> float:
        return self.measured(self.best)

    @property
    def configs(self) -> int:
        return len(self.samples)

    @property
    def regret(self) -> float:
        return self.chosen_measured_s / self.best_measured_s - 1.0

    @property
    def resolution(self) -> float:
        """The sweep's resolution: median over configurations of (second fastest round /
        fastest round - 1), i.e. how far one configuration's own repeats disagree."""
        gaps = [sorted(v)[1] / min(v) - 1.0 for v in self.samples.values() if len(v) > 1]
        return float(np.median(gaps)) if gaps else float("nan")

    def round_minima(self) -> list[StreamSetting]:
        """The measured minimum of each round alone: does the exhaustive sweep reproduce itself?"""
        rounds = min(len(v) for v in self.samples.values())
        return [min(self.samples, key=lambda c: (self.samples[c][r], c)) for r in range(rounds)]


def _check_sweep(repeats: int, duel_rounds: int, arena_experts: list[int]) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError("repeats", "must be an integer >= 1", repeats)
    if isinstance(duel_rounds, bool) or not isinstance(duel_rounds, int) or duel_rounds < 0:
        raise InputError("duel_rounds", "must be an integer >= 0", duel_rounds)
    if not arena_experts or any(n < 1 for n in arena_experts):
        raise InputError("arena_experts", "must be a non-empty list of integers >= 1", arena_experts)


def _duel(run: Callable[[StreamSetting], float], a: StreamSetting, b: StreamSetting,
          rounds: int) -> tuple[list[float], list[float]]:
    """``a`` and ``b`` run alternately ``rounds`` times each: their times, in order."""
    a_runs: list[float] = []
    b_runs: list[float] = []
    for _ in range(rounds):
        a_runs.append(run(a))
        b_runs.append(run(b))
    return a_runs, b_runs


def sweep(p: HostProfile, shape: tuple[int, int, int, int, int], routing: np.ndarray, arena_experts: list[int],
          workdir: Path, repeats: int = 2, duel_rounds: int = 0) -> list[SweepCase]:
    """Measure every configuration of the largest budget's space ``repeats`` times (round-robin),
    then for each budget compare the auto-configurator's choice with the measured best; with
    ``duel_rounds``, also run the choice and the best alternately that many times each."""
    from moesim.native.cpu import ExecutorConfig, ExpertShape, pack_experts, run_executor

    _check_sweep(repeats, duel_rounds, arena_experts)
    layers, experts, hidden, inter, k = shape
    model = executor_model(layers, experts, hidden, inter, k)
    profile: StoredProfile = build_profile(host_service_times(p, model, routing, hidden))
    workdir.mkdir(parents=True, exist_ok=True)
    packed = pack_experts(workdir / f"pack-{layers}x{experts}-{hidden}x{inter}.bin",
                          ExpertShape(layers, experts, hidden, inter))

    def run(cfg: StreamSetting) -> float:
        ecfg = ExecutorConfig(group_size=cfg.group_size, banks=cfg.banks, queue_depth=cfg.queue_depth,
                              prefetch="non-ffn")
        return run_executor(packed, routing, ecfg, workdir=workdir / "runs").makespan_s

    samples: dict[StreamSetting, list[float]] = {}
    everything = sorted(space(profile, max(arena_experts) * profile.st.expert_B))
    for _ in range(repeats):          # round-robin over configurations: drift hits all alike
        for cfg in everything:
            samples.setdefault(cfg, []).append(run(cfg))

    duels: dict[tuple[StreamSetting, StreamSetting], tuple[list[float], list[float]]] = {}
    return [_case(profile, samples, n_exp, run, duel_rounds, duels) for n_exp in arena_experts]


def _case(profile: StoredProfile, samples: dict[StreamSetting, list[float]], n_exp: int,
          run: Callable[[StreamSetting], float], duel_rounds: int,
          duels: dict[tuple[StreamSetting, StreamSetting], tuple[list[float], list[float]]]) -> SweepCase:
    """The auto-configurator's choice at an arena of ``n_exp`` experts against the measured best
    (and their duel, run once per pair and kept in ``duels``)."""
    budget = n_exp * profile.st.expert_B
    choice = select(profile, budget)
    assert choice is not None
    mine = {cfg: samples[cfg] for cfg in space(profile, budget)}
    assert choice.config in mine, "the auto-configurator chose outside its own search space"
    best = min(mine, key=lambda c: (min(mine[c]), profile.arena_B(c)))
    predicted = {c: evaluate(profile.inputs[c.group_size], c.banks, c.queue_depth, "non-ffn") / 1e9 for c in mine}
    pair = (choice.config, best)
    if duel_rounds and choice.config != best and pair not in duels:
        duels[pair] = _duel(run, choice.config, best, duel_rounds)
    return SweepCase(arena_experts=n_exp, chosen=choice.config, predicted_s=choice.ttft_ns / 1e9, best=best,
                     samples=mine, predicted=predicted, duel=duels.get(pair))

"""``cpu-moe/`` cases: the CPU policy against public llama.cpp CPU prompt-processing figures of
MoE models (issue 25, hypothesis 2), none of which was used to fit the CPU rates.

No llama.cpp (or MNN) CPU prefill figure of an MoE model on a Snapdragon 8 Elite, 8 Elite Gen 5
or 8 Gen 3 phone was found (docs/background/phone-figures.md section 9, with what was searched).
What is public is on other Oryon / llama.cpp hosts, so each case says which profile prices it
and why:

- **OLMoE on a Snapdragon X Elite** (laptop, 12 first-generation Oryon cores, 10 threads; llama.cpp
  PR #11666): no bundled profile describes that SoC; ``sd8-elite`` has no routed-expert rate
  (``cpu.routed_gemv_GFLOPS``), so the figure is priced on ``sd8-elite-gen5``, the only profile
  that has one. A cross-device check, recorded as a miss with its size and cause.
- **OLMoE over a dense Llama-3.1-8B on the X Elite** (llama.cpp PRs #11666 and #8672, 10 threads):
  the same kind of ratio on Oryon cores, two builds six months apart.
- **Qwen3-30B-A3B over dense Qwen3-4B on one CPU** (SpacemiT A100, RISC-V, 8 threads, llama.cpp's
  SpacemiT docs): a ratio of two figures of one runtime on one CPU, compared with the same ratio
  of moesim's CPU policy on ``sd8-elite-gen5``; it tests the form of the CPU model (routed
  experts one GEMV per routed token at the fitted rate, dense products at the GEMM rate), not
  its absolute rates.

Predictions run moesim's ``cpu`` policy (every weight resident, TTFT from the request) and the
dense CPU prefill of :func:`moesim.calibrate.dense_anchor.dense_prefill_s`.
"""

from __future__ import annotations

from functools import cache

from moesim.config.prefill import CPUPolicy, PrefillRun
from moesim.simulate.prefill import simulate_prefill
from moesim.validate.phones import _prefill_rate
from moesim.validate.registry import Case

__all__ = ["cpu_moe_cases"]

_DEVICE = "sd8-elite-gen5"
_FIGS = "docs/background/phone-figures.md section 9"

#: llama.cpp PR #11666 (2025-02-05, max-krasnyansky): OLMoE A1.7B Q4_0 (3.66 GiB, 6.92 B) on a
#: Snapdragon X Elite's CPU, 10 threads, llama-bench pp128 (before the PR's change; after: 534.85)
X_ELITE_OLMOE_PP128 = 544.64
#: llama.cpp PR #8672 (threadpool, 2024-08, max-krasnyansky): llama-cli, Windows arm64 build (the thread's
#: X Elite), --no-mmap -t 6 -tb 10, llama-v3.1 Q4_0_4_8 (8B), prompt eval of 16 tokens
X_ELITE_LLAMA_3_1_8B_PP16 = 183.33
#: llama.cpp docs/build-riscv64-spacemit.md (SpacemiT A100, 8 threads, n_ubatch 128, fa 1, mmap 0):
#: llama-bench pp128 of qwen3moe 30B.A3B Q4_0 and of qwen3 4B Q4_0
SPACEMIT_QWEN3_30B_A3B_PP128 = 57.88
SPACEMIT_QWEN3_4B_PP128 = 79.74


@cache
def _cpu_rate(model: str, tokens: int) -> float:
    """Prompt tokens per second of moesim's ``cpu`` policy on the reference phone."""
    run = PrefillRun(model=model, device=_DEVICE, tokens=tokens, policy=CPUPolicy())
    return tokens / simulate_prefill(run).metrics.ttft_s


def _moe_over_dense(moe: str, dense: str, tokens: int) -> float:
    return _cpu_rate(moe, tokens) / _prefill_rate(_DEVICE, "cpu", dense, tokens)


def cpu_moe_cases() -> list[Case]:
    """Ratios only: the figures come from other SoCs (a laptop, a RISC-V board), so they test the CPU
    policy's form (routed experts against dense products), not the phone's rates. The X Elite's OLMoE
    rate itself, 5.6x moesim's on the phone, is in phone-figures.md section 9, not a case."""
    return [
        Case(name="cpu-moe/x-elite/olmoe-1b-7b-pp128-over-llama-3.1-8b-pp16",
             reference=X_ELITE_OLMOE_PP128 / X_ELITE_LLAMA_3_1_8B_PP16,
             source="llama.cpp on a Snapdragon X Elite CPU, 10 (batch) threads: OLMoE A1.7B Q4_0 pp128 544.64 tok/s "
                    "(PR #11666, 2025-02) over dense Llama-3.1-8B Q4_0_4_8, 16-token prompt 183.33 tok/s (PR #8672, "
                    "2024-08; Windows arm64 build), 2.97; here the same ratio of moesim's CPU policy on "
                    f"sd8-elite-gen5 (a ratio: the form, not the rates) ({_FIGS})",
             tolerance=0.25, tolerance_kind="relative",
             predict=lambda: _cpu_rate("olmoe-1b-7b", 128) / _prefill_rate(_DEVICE, "cpu", "llama-3.1-8b", 16),
             fitted_to=False, unit="x"),
        Case(name="cpu-moe/spacemit-a100/qwen3-30b-a3b-over-qwen3-4b-pp128",
             reference=SPACEMIT_QWEN3_30B_A3B_PP128 / SPACEMIT_QWEN3_4B_PP128,
             source="llama.cpp docs/build-riscv64-spacemit.md: SpacemiT A100 CPU (RISC-V), 8 threads, llama-bench "
                    "pp128 of Qwen3-30B-A3B Q4_0 (57.88 tok/s) over dense Qwen3-4B Q4_0 (79.74 tok/s), 0.726; here "
                    f"the same ratio of moesim's CPU policy on sd8-elite-gen5 (a ratio: the form, not the rates) "
                    f"({_FIGS})",
             tolerance=0.25, tolerance_kind="relative",
             predict=lambda: _moe_over_dense("qwen3-30b-a3b", "qwen3-4b", 128), fitted_to=False, unit="x"),
    ]

"""What a run may ask for: upper bounds on run sizes, checked before any work starts.

A prompt of ``N`` tokens is an ``[N, moe_layers, k]`` routing array plus the per-layer
working copies the simulator makes (expert counts, the trace assembly, int64 views): about
``16 x moe_layers x k`` bytes a token. :func:`check_prompt_tokens` refuses a prompt whose
arrays would need more than half of this machine's physical memory, with a message that
says so, instead of running out of memory minutes later.

A phone decode is simulated event by event: every routed expert slot of every decoded token
(``tokens x moe_layers x top_k``, the warm-up tokens included) is a cache look-up, perhaps a
UFS read and an expert product, 6-45 events and timeline spans. Measured here (one core,
mixtral-8x7b, olmoe-1b-7b, qwen3-30b-a3b, deepseek-v3.1; LRU, LFU, mmap, no cache, CPU and
HTP, speculation up to an 8 x 8 tree) a slot costs 26-154 us and 0.5-3.6 KB; the documented
maximum of 100,000 tokens could not run (mixtral-8x7b: over 200 s and 7 GB, and nothing on
the screen while it ran). The decision: a decode run is held to :data:`MAX_DECODE_SLOTS` slots
(:func:`decode_size_rule`, applied by :class:`moesim.config.decode.DecodeRun` itself, so the
CLI, grids, saved results and the Python API refuse it before the first event); a run at the
budget took 11-20 s and 0.6-0.9 GB here: 4,096 tokens of mixtral-8x7b (an 8 x 8 tree with
ecospec too), 2,048 of olmoe-1b-7b with no cache, 564 of deepseek-v3.1. The token fields' own
bound is that budget (what a one-layer top-1 model may run).
"""

from __future__ import annotations

import os

from moesim.errors import InputError

__all__ = ["machine_memory_B", "BYTES_PER_ROUTED_SLOT", "max_prompt_tokens", "check_prompt_tokens",
           "MAX_DECODE_SLOTS", "max_decode_tokens", "decode_size_rule"]

BYTES_PER_ROUTED_SLOT = 16      # int16 routing + int64 working copies, with headroom
_SHARE = 0.5                    # of physical memory a run's arrays may take


def machine_memory_B() -> int:
    """Physical memory of this machine in bytes (8 GiB if the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def max_prompt_tokens(moe_layers: int, top_k: int, memory_B: int | None = None) -> int:
    """The longest prompt whose routing arrays fit in half of ``memory_B`` (this machine).

    >>> max_prompt_tokens(16, 8, 16 << 30)
    4194304
    """
    memory = machine_memory_B() if memory_B is None else memory_B
    return int(memory * _SHARE) // (BYTES_PER_ROUTED_SLOT * moe_layers * top_k)


def check_prompt_tokens(tokens: int, model_name: str, moe_layers: int, top_k: int) -> None:
    limit = max_prompt_tokens(moe_layers, top_k)
    if tokens > limit:
        raise InputError("tokens", f"must be <= {limit:,} for {model_name} on this machine (its routing arrays "
                         f"need ~{BYTES_PER_ROUTED_SLOT * moe_layers * top_k:,} B a token; half of the "
                         f"{machine_memory_B() / 2**30:.0f} GiB of memory)", tokens)


#: the most routed expert slots ((tokens + warm-up tokens) x MoE layers x top-k) one decode run
#: simulates: 2**18 take 11-20 s and 0.6-0.9 GB here (26-154 us and 0.5-3.6 KB a slot, see above)
MAX_DECODE_SLOTS = 1 << 18


def max_decode_tokens(moe_layers: int, top_k: int) -> int:
    """The most tokens (decoded and warm-up together) a decode of a model with ``moe_layers``
    layers of ``top_k`` routed experts may simulate.

    >>> max_decode_tokens(32, 2), max_decode_tokens(16, 8)
    (4096, 2048)
    """
    return MAX_DECODE_SLOTS // (moe_layers * top_k)


def decode_size_rule(tokens: int, model_name: str, moe_layers: int, top_k: int, decoded: int | None = None
                     ) -> str | None:
    """The rule a decode of ``tokens`` tokens breaks, or None where it may run: at most
    :data:`MAX_DECODE_SLOTS` routed slots. ``decoded``: ``tokens`` are the warm-up tokens, decoded
    before that many measured ones, which share the budget.

    >>> decode_size_rule(4096, "mixtral-8x7b", 32, 2) is None
    True
    >>> decode_size_rule(200, "mixtral-8x7b", 32, 2, decoded=4000)[:58]
    'must be <= 96 for mixtral-8x7b with 4,000 tokens to decode'
    """
    limit = max_decode_tokens(moe_layers, top_k) - (decoded or 0)
    if tokens <= limit:
        return None
    beside = "" if decoded is None else f" with {decoded:,} tokens to decode"
    return (f"must be <= {max(limit, 0):,} for {model_name}{beside} ({moe_layers} MoE layers x top-{top_k}): a decode "
            f"simulates at most {MAX_DECODE_SLOTS:,} routed expert slots, warm-up included (each a cache look-up, "
            "maybe a read and a product: about 20 s and 1 GB; moesim.limits)")

"""What this machine can hold: upper bounds on run sizes, checked before any work starts.

A prompt of ``N`` tokens is an ``[N, moe_layers, k]`` routing array plus the per-layer
working copies the simulator makes (expert counts, the trace assembly, int64 views): about
``16 x moe_layers x k`` bytes a token. :func:`check_prompt_tokens` refuses a prompt whose
arrays would need more than half of this machine's physical memory, with a message that
says so, instead of running out of memory minutes later.
"""

from __future__ import annotations

import os

from moesim.errors import InputError

__all__ = ["machine_memory_B", "BYTES_PER_ROUTED_SLOT", "max_prompt_tokens", "check_prompt_tokens"]

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

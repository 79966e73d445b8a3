"""Run configurations: one pydantic model per prefill policy, in a discriminated union.

Checks that need the model or the device (group size vs expert count, queue depth vs
the UFS queue) happen when the run is resolved, with the same one-line errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import Field, PositiveInt

from moesim.config.base import Finite, Frozen
from moesim.config.catalog import DEFAULT_MODEL, DEFAULT_PHONE_DEVICE
from moesim.config.schema import Flat, unflatten
from moesim.errors import InputError

__all__ = ["Prefetch", "PREFETCH_POINTS", "PageCache", "TTFTFrom", "EStreamPolicy", "ResidentPolicy", "NaivePolicy",
           "LayerB2Policy", "CPUPolicy", "MmapPolicy", "GPUResidentPolicy", "QNNSwitchPolicy", "PrefillPolicy",
           "PrefillRun", "POLICY_MODELS", "POLICY_NAMES", "COMPARE_DEFAULT_POLICIES", "PolicyName",
           "policy_options", "build_policy"]

#: When a streamed layer's expert reads may start (the prefetch point): once the layer's
#: non-FFN operators have started, once its routing is known, or when compute asks for a group.
Prefetch = Literal["non-ffn", "after-routing", "on-demand"]
PREFETCH_POINTS: tuple[Prefetch, ...] = get_args(Prefetch)
#: The page cache when the process starts: dropped (``cold``, the paper's protocol: "fresh
#: processes with the page cache dropped"), or holding what an identical previous run read (``warm``).
PageCache = Literal["cold", "warm"]
#: Where the time to first token starts: when the loaded process receives the prompt
#: (``request``), or when the process starts, its load phase counted (``launch``);
#: docs/background/prefill-model.md, "The measurement protocol".
TTFTFrom = Literal["request", "launch"]


class EStreamPolicy(Finite):
    """Expert streaming through B banks of G experts with Q reads in flight."""

    kind: Literal["estream"] = "estream"
    group_size: PositiveInt | None = Field(None, description="experts per group; None = default rule")
    banks: Annotated[int, Field(ge=2)] | None = Field(None, description="banks in the arena; None = default rule")
    queue_depth: PositiveInt | None = Field(None, description="reads in flight; None = the profile's default")
    prefetch: Prefetch = Field("non-ffn", description="when a layer's reads may start")


class ResidentPolicy(Finite):
    """All experts resident in DRAM; the NPU never waits for I/O."""

    kind: Literal["resident"] = "resident"


class NaivePolicy(Finite):
    """Load a group, then compute it: one buffer, no overlap."""

    kind: Literal["naive"] = "naive"
    group_size: PositiveInt = 1


class LayerB2Policy(Finite):
    """Two layer-sized buffers: the next layer's experts load while this one computes."""

    kind: Literal["layer-b2"] = "layer-b2"
    queue_depth: PositiveInt | None = None


class CPUPolicy(Finite):
    """llama.cpp-like execution on the CPU cores with all weights resident."""

    kind: Literal["cpu"] = "cpu"
    ubatch_tokens: PositiveInt = Field(512, description="prompt tokens per forward (llama.cpp n_ubatch)")
    source_mapped: bool = Field(
        True, description="the GGUF stays mapped after its matrix weights are copied into the CPU repack buffer, "
                          "so its pages count in physical memory beside the copy (llama.cpp's default mmap + repack "
                          "on ARM: issues #16761, #19578); false: --no-mmap, or PR #24156's --reclaim-mmap-source")


class MmapPolicy(Finite):
    """llama.cpp-like CPU execution with experts demand-paged from a memory-mapped file."""

    kind: Literal["mmap"] = "mmap"
    ubatch_tokens: PositiveInt = Field(512, description="prompt tokens per forward (llama.cpp n_ubatch)")


class GPUResidentPolicy(Finite):
    """Baseline: every weight resident in DRAM, the prompt in micro-batches on the mobile GPU
    (llama.cpp's OpenCL backend on Adreno; the profile's ``[adreno]`` section)."""

    kind: Literal["gpu-resident"] = "gpu-resident"
    ubatch_tokens: PositiveInt = Field(512, description="prompt tokens per forward (llama.cpp n_ubatch)")


class QNNSwitchPolicy(Finite):
    """Baseline: QNN on the HTP with precompiled static graphs: the prompt in fixed-size graph
    passes, every expert computed on every token of a pass, the model split into context binaries
    that are switched in when a pass needs one that is not loaded (the profile's ``[qnn]`` section)."""

    kind: Literal["qnn-switch"] = "qnn-switch"


PrefillPolicy = Annotated[
    EStreamPolicy | ResidentPolicy | NaivePolicy | LayerB2Policy | CPUPolicy | MmapPolicy | GPUResidentPolicy
    | QNNSwitchPolicy,
    Field(discriminator="kind"),
]
#: the policy models, in the union's order
POLICY_MODELS: tuple[type[Frozen], ...] = get_args(get_args(PrefillPolicy)[0])
#: the policies' ``kind`` values, in the union's order
POLICY_NAMES: tuple[str, ...] = tuple(m.model_fields["kind"].default for m in POLICY_MODELS)
#: the six policies every phone profile prices (EStream and its CPU-and-NPU baselines); ``moesim compare``
#: without --policies runs every policy of :data:`POLICY_NAMES` the profile prices, these and the
#: mobile-GPU and QNN baselines (gpu-resident, qnn-switch) where the profile has their sections
COMPARE_DEFAULT_POLICIES: tuple[str, ...] = ("estream", "resident", "naive", "layer-b2", "cpu", "mmap")
#: a policy name as a pydantic field type: the Literal of :data:`POLICY_NAMES` (``str`` to mypy,
#: which cannot read a Literal built at run time)
if TYPE_CHECKING:
    PolicyName = str
else:
    PolicyName = Literal[POLICY_NAMES]


def policy_options() -> dict[str, frozenset[str]]:
    """Each policy option (a field of a policy model other than ``kind``) -> the policies that take it.

    >>> {name: sorted(kinds) for name, kinds in policy_options().items()}  # doctest: +NORMALIZE_WHITESPACE
    {'group_size': ['estream', 'naive'], 'banks': ['estream'], 'queue_depth': ['estream', 'layer-b2'],
     'prefetch': ['estream'], 'ubatch_tokens': ['cpu', 'gpu-resident', 'mmap'], 'source_mapped': ['cpu']}
    """
    takes: dict[str, set[str]] = {}
    for model, kind in zip(POLICY_MODELS, POLICY_NAMES):
        for name in model.model_fields:
            if name != "kind":
                takes.setdefault(name, set()).add(kind)
    return {name: frozenset(kinds) for name, kinds in takes.items()}


def build_policy(kind: str, options: Mapping[str, object], *, strict: bool = True) -> dict[str, object]:
    """The ``policy`` data of a :class:`PrefillRun` of policy ``kind`` from option values
    (None = not given); the values are validated with the run.

    An option that ``kind`` does not take raises :class:`InputError`, named as on the command
    line; with ``strict=False`` it is dropped instead (a sweep axis applies to the policies
    that take it and is ignored by the others).

    >>> build_policy("naive", {"group_size": 4, "banks": None})
    {'kind': 'naive', 'group_size': 4}
    >>> build_policy("resident", {"banks": 3})
    Traceback (most recent call last):
    moesim.errors.InputError: --banks applies to policy estream, not resident, got 3
    """
    takes = policy_options()
    for name, value in options.items():
        if value is not None and name not in takes:
            raise InputError(f"--{name.replace('_', '-')}", f"is not an option of any prefill policy "
                             f"({', '.join(takes)})", value)
    policy = unflatten(PrefillRun, {"policy": kind, **options}, strict=strict)["policy"]
    assert isinstance(policy, dict), policy
    return policy


class PrefillRun(Finite):
    """Everything one prefill simulation needs, fully resolved names included; the defaults are
    those of ``moesim prefill`` (and of a prefill grid), so that each exists once."""

    model: str = DEFAULT_MODEL
    device: str = DEFAULT_PHONE_DEVICE
    tokens: Annotated[int, Field(gt=0, le=2**31 - 1)] = Field(1024, description="prompt length")
    #: a policy's options are parameters of their own names (``group_size``), not ``policy_group_size``
    policy: Annotated[PrefillPolicy, Flat(prefix="")] = Field(default_factory=EStreamPolicy)
    memory_budget_GiB: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = None
    trace: str | None = Field(None, description="canonical trace file; None = the model's default source")
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    kv_retention: Literal["all-layers", "current-layer"] = Field(
        "all-layers", description="NPU policies: keep every layer's K/V for the decoding that follows (the "
                                  "brief's memory formula), or only the current layer's (a prefill-only service)")
    page_cache: PageCache = Field(
        "cold", description="the page cache at process start: dropped (the paper's protocol) or warm (holding "
                            "what an identical previous run read)")
    ttft_from: TTFTFrom = Field(
        "request", description="TTFT from the prompt's arrival at the loaded process, or from process launch "
                               "(the load phase counted)")
    overrides: dict[str, float] = Field(default_factory=dict,
                                        description="profile numbers changed for a what-if: {'section.field': value}")

"""The GPU-server profile (``kind = "gpu-server"``): GPUs with HBM, with a separate *runtime*
section so that the software (a Transformers per-expert loop, a fused MoE kernel) can be swapped
in a what-if."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from moesim.config.phone_units import MemorySection
from moesim.config.sections import ProfileBase, Section

__all__ = ["GPUSection", "CodePathSection", "WeightOnlyKernel", "GPURuntimeSection", "GPUServerProfile"]


class GPUSection(Section):
    """One GPU model, replicated ``gpus_count`` times, with HBM and NVLink."""

    model: str
    gpus_count: PositiveInt
    sm_count: PositiveInt
    hbm_capacity_GiB: PositiveFloat
    hbm_peak_bw_TBps: PositiveFloat
    # a STREAM-like measurement exists for some GPUs only (none public for H20): pending elsewhere
    hbm_measured_read_bw_TBps: PositiveFloat | None = None
    hbm_measured_triad_bw_TBps: PositiveFloat | None = None
    bf16_dense_TFLOPS: PositiveFloat
    fp8_dense_TFLOPS: PositiveFloat
    nvlink_bw_GBps: PositiveFloat
    # the interconnect as collectives see it (docs/background/gpu-communication.md; moesim.cost.comm)
    collective_base_us: PositiveFloat | None = Field(
        None, description="latency of a collective over 2 GPUs less one doubling step: alpha(p) = base + "
                          "per_doubling x log2(p) inside a node")
    collective_per_doubling_us: NonNegativeFloat | None = Field(
        None, description="latency added each time the group doubles (one more step of the algorithm)")
    allreduce_busbw_GBps: PositiveFloat | None = Field(
        None, description="bus bandwidth of an all-reduce or all-to-all inside a node (nccl-tests busbw)")
    gpus_per_node_count: PositiveInt | None = Field(None, description="GPUs joined by NVLink in one node")
    internode_latency_us: PositiveFloat | None = Field(
        None, description="latency of a collective that crosses nodes (InfiniBand)")
    internode_bw_GBps: PositiveFloat | None = Field(
        None, description="per-GPU bandwidth of a collective that crosses nodes (one NIC a GPU)")

    @model_validator(mode="after")
    def _measured_below_peak(self) -> GPUSection:
        for name in ("hbm_measured_read_bw_TBps", "hbm_measured_triad_bw_TBps"):
            if getattr(self, name) is not None and getattr(self, name) > self.hbm_peak_bw_TBps:
                raise ValueError(f"{name} must be <= hbm_peak_bw_TBps ({self.hbm_peak_bw_TBps}), "
                                 f"got {getattr(self, name)}")
        if self.fp8_dense_TFLOPS < self.bf16_dense_TFLOPS:
            raise ValueError(f"fp8_dense_TFLOPS must be >= bf16_dense_TFLOPS ({self.bf16_dense_TFLOPS}), "
                             f"got {self.fp8_dense_TFLOPS}")
        return self


class CodePathSection(Section):
    """One MoE code path of the runtime (``[runtime.paths.NAME]``): what one forward launches,
    how often the host waits for the GPU, and which experts it reads, counted from the code
    (docs/background/specdecode-evidence.md section 1; docs/specdecode.md, "Verification paths")."""

    description: str = ""
    experts_read: Literal["hit", "all"] = Field(
        description="hit: only the experts some token routes to are read; all: every routed expert of every MoE "
                    "layer is read and computed whatever the routing (the cost does not depend on the union)")
    expert_format: str | None = Field(
        None, description="the format the experts are read in when it differs from the model's own (a "
                          "dequantized checkpoint: BF16); None = the model's native format")
    launches_per_layer_count: NonNegativeInt = Field(
        description="kernels launched per decoder layer outside the MoE block (attention, norms, residuals)")
    syncs_per_layer_count: NonNegativeInt
    launches_per_moe_layer_count: NonNegativeInt = Field(
        description="kernels of the MoE block's fixed part (router, top-k, masks) per MoE layer")
    syncs_per_moe_layer_count: NonNegativeInt
    launches_per_scanned_expert_count: NonNegativeInt | None = Field(
        None, description="kernels per routed expert visited by a loop over all experts, hit or not (None: no scan)")
    syncs_per_scanned_expert_count: NonNegativeInt | None = None
    launches_per_hit_expert_count: NonNegativeInt | None = Field(
        None, description="kernels per expert that received a token (None: no per-expert work)")
    syncs_per_hit_expert_count: NonNegativeInt | None = None

    def count(self, name: str) -> int:
        """A count of this path, 0 when it is not given (the path has no such loop)."""
        value = getattr(self, f"{name}_count")
        return 0 if value is None else int(value)

    @property
    def syncs_every_layer(self) -> bool:
        """Whether the host waits for the GPU inside every layer (then host and GPU time add up)."""
        return sum(self.count(n) for n in ("syncs_per_layer", "syncs_per_moe_layer", "syncs_per_scanned_expert",
                                           "syncs_per_hit_expert")) > 0


class WeightOnlyKernel(BaseModel):
    """A MoE kernel that dequantizes its expert weights (the tensor cores cannot read the format)."""

    model_config = ConfigDict(extra="forbid")
    dequant_TOPS: PositiveFloat = Field(
        description="trillions of weights one GPU dequantizes a second: the expert reads take the longer of "
                    "their bytes and their dequantization")
    extra_moe_layer_us: NonNegativeFloat = Field(
        description="fixed time of each MoE layer's kernel beyond a native-format kernel's (which "
                    "per_layer_fixed_us holds)")


class GPURuntimeSection(Section):
    """The serving software, separate from the hardware (BRIEF.md section 2).

    Either the generic form (``per_active_expert_us``, ``per_layer_fixed_us``) or code paths:
    ``paths`` (one per MoE implementation, counted from the code), priced by the host costs
    ``per_op_us``, ``host_sync_us``, ``layer_host_us`` and ``verify_layer_us``, and
    ``path_by_model`` (model name -> path; ``default_path`` for the others)."""

    kind: Literal["transformers-loop", "fused-moe"]
    parallelism: Literal["layer-split", "tensor-parallel"]
    per_active_expert_us: PositiveFloat | None = None
    per_layer_fixed_us: PositiveFloat | None = None
    per_step_fixed_ms: PositiveFloat | None = None
    hbm_efficiency_ratio: Annotated[float, Field(gt=0, le=1)] | None = None
    per_op_us: PositiveFloat | None = Field(None, description="one eager op: Python, dispatcher and kernel launch")
    host_sync_us: PositiveFloat | None = Field(None, description="one blocking device-to-host copy and stream sync")
    layer_host_us: NonNegativeFloat | None = Field(
        None, description="host work per decoder layer beyond its ops (module calls, device-map hooks)")
    verify_layer_us: NonNegativeFloat | None = Field(
        None, description="extra host work per decoder layer of a forward over more than one token (tree mask, "
                          "cache bookkeeping of the verified tokens)")
    tensor_parallel_count: PositiveInt | None = Field(
        None, description="GPUs one forward spans, each layer split over them (TensorRT-LLM's tp_size; "
                          "tensor-parallel runtimes; None: every GPU of the profile)")
    expert_parallel_count: PositiveInt | None = Field(
        None, description="ways the routed experts are split inside those GPUs (moe_ep_size; divides "
                          "tensor_parallel_count; None: 1, every expert split over every GPU)")
    moe_all_to_all_count: PositiveInt | None = Field(
        None, description="GPUs each MoE layer exchanges tokens with by a dispatch and a combine all-to-all "
                          "(wide-EP engines such as DeepEP; each holds 1/count of the experts; attention stays "
                          "tensor parallel) instead of the block's all-reduce; divides tensor_parallel_count; "
                          "None: none")
    moe_parallel: Literal["tensor", "expert"] | None = Field(
        None, description="how the MoE block splits the experts over the forward's GPUs when "
                          "expert_parallel_count is not given: 'tensor' (default) splits every expert over every "
                          "GPU, 'expert' gives each GPU whole experts, 1/tensor_parallel_count of them "
                          "(TensorRT-LLM moe_ep_size = tp_size); the GPU holding the most of a step's experts "
                          "sets its pace")
    weight_only: dict[str, WeightOnlyKernel] = Field(
        default_factory=dict,
        description="expert format -> the MoE kernel of a format the tensor cores cannot read (MXFP4 on "
                    "Hopper: weight-only w4a16), which dequantizes every weight it reads")
    allreduce_base_us: PositiveFloat | None = Field(
        None, description="the engine's own all-reduce kernel (one-shot: each GPU reads every peer's buffer), "
                          "latency at 1 GPU of the fit alpha(p) = base + per_doubling x log2(p); None: NCCL's, "
                          "from the gpu section")
    allreduce_per_doubling_us: NonNegativeFloat | None = Field(
        None, description="the engine all-reduce's latency added per doubling of the GPUs")
    allreduce_peer_GBps: PositiveFloat | None = Field(
        None, description="the engine all-reduce's read rate of one peer's buffer: time = alpha(p) + (p - 1) x "
                          "bytes / rate")
    paths: dict[str, CodePathSection] = Field(default_factory=dict)
    path_by_model: dict[str, str] = Field(default_factory=dict, description="model name -> the path it runs")
    default_path: str | None = Field(None, description="the path of a model path_by_model does not name")

    @model_validator(mode="after")
    def _allreduce_whole(self) -> GPURuntimeSection:
        names = ("allreduce_base_us", "allreduce_per_doubling_us", "allreduce_peer_GBps")
        given = [n for n in names if getattr(self, n) is not None]
        if given and len(given) < len(names):
            missing = next(n for n in names if n not in given)
            raise ValueError(f"{missing} must be set with {given[0]} (the engine all-reduce needs all of "
                             f"{', '.join(names)}), got none")
        return self

    @model_validator(mode="after")
    def _paths_named(self) -> GPURuntimeSection:
        for model, path in [*self.path_by_model.items(), *([("default_path", self.default_path)]
                                                            if self.default_path is not None else [])]:
            if path not in self.paths:
                raise ValueError(f"path_by_model.{model} must name one of paths ({', '.join(self.paths) or 'none'}), "
                                 f"got {path!r}")
        return self

    def path_of(self, model: str) -> tuple[str, CodePathSection] | None:
        """The code path ``model`` runs on this runtime (None: the generic form)."""
        name = self.path_by_model.get(model, self.default_path)
        return None if name is None else (name, self.paths[name])


class GPUServerProfile(ProfileBase):
    """GPUs with HBM running batch-1 speculative decoding (EcoSpec's hardware)."""

    kind: Literal["gpu-server"]
    gpu: GPUSection
    memory: MemorySection
    runtime: GPURuntimeSection

    @model_validator(mode="after")
    def _cross(self) -> GPUServerProfile:
        hbm_GBps = self.gpu.hbm_peak_bw_TBps * 1000
        if hbm_GBps <= self.memory.peak_bw_GBps:
            raise ValueError(f"gpu.hbm_peak_bw_TBps must exceed host memory.peak_bw_GBps "
                             f"({self.memory.peak_bw_GBps} GB/s), got {self.gpu.hbm_peak_bw_TBps}")
        rt = self.runtime
        if rt.parallelism != "tensor-parallel":
            for name in ("tensor_parallel_count", "expert_parallel_count"):
                if getattr(rt, name) not in (None, 1):
                    raise ValueError(f"runtime.{name} needs runtime.parallelism 'tensor-parallel' (a layer-split "
                                     f"runtime runs one GPU at a time), got {getattr(rt, name)}")
        tp, ep = self.parallel_layout()
        if tp > self.gpu.gpus_count:
            raise ValueError(f"runtime.tensor_parallel_count must be <= gpu.gpus_count ({self.gpu.gpus_count}), "
                             f"got {tp}")
        if tp % ep:
            raise ValueError(f"runtime.expert_parallel_count must divide tensor_parallel_count ({tp}), got {ep}")
        a2a = rt.moe_all_to_all_count
        if a2a is not None and rt.expert_parallel_count not in (None, a2a):
            raise ValueError(f"runtime.expert_parallel_count must equal moe_all_to_all_count ({a2a}) when both are "
                             f"set (the all-to-all group holds the experts), got {rt.expert_parallel_count}")
        return self

    def parallel_layout(self) -> tuple[int, int]:
        """(GPUs one forward spans, ways its experts are split among them): (1, 1) on a layer-split
        runtime; else the runtime's counts, every GPU and no expert split by default."""
        rt = self.runtime
        if rt.parallelism != "tensor-parallel":
            return 1, 1
        tp = rt.tensor_parallel_count or self.gpu.gpus_count
        return tp, rt.moe_all_to_all_count or rt.expert_parallel_count or (tp if rt.moe_parallel == "expert" else 1)

    def weight_gpus(self) -> int:
        """GPUs whose HBM holds the weights: those one forward spans on a tensor-parallel runtime,
        every GPU of the profile on a layer-split one."""
        return self.parallel_layout()[0] if self.runtime.parallelism == "tensor-parallel" else self.gpu.gpus_count

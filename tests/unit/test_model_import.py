"""``moesim models import config.json``: the catalog rebuilt from public config.json fields, families
outside the catalog imported and simulated, and bad configs refused in one line naming the field.

Each dict holds the fields of the public ``config.json`` that the importer reads (values as published on
Hugging Face; the repository is named above each). Fields the importer ignores are left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from moesim.config.catalog import load_model
from moesim.config.formats import WeightFormat
from moesim.config.hf_import import ImportFormats, model_from_hf_config, model_toml
from moesim.errors import InputError

# ----- the catalog's twelve models ---------------------------------------------------------------------


def _gpt_oss(num_hidden_layers: int, num_local_experts: int) -> dict[str, Any]:
    """openai/gpt-oss-120b and openai/gpt-oss-20b publish the same fields but for depth and expert count."""
    return {
        "model_type": "gpt_oss", "head_dim": 64, "hidden_size": 2880, "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * (num_hidden_layers // 2), "num_attention_heads": 64,
        "num_experts_per_tok": 4, "num_hidden_layers": num_hidden_layers, "num_key_value_heads": 8,
        "num_local_experts": num_local_experts, "sliding_window": 128, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 201088,
        "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"],
                                "quant_method": "mxfp4"}}


CATALOG_CONFIGS: dict[str, dict[str, Any]] = {
    # allenai/OLMoE-1B-7B-0924
    "olmoe-1b-7b": {
        "model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024, "num_attention_heads": 16,
        "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16, "num_key_value_heads": 16,
        "tie_word_embeddings": False, "vocab_size": 50304},
    # deepseek-ai/DeepSeek-V2-Lite
    "deepseek-v2-lite": {
        "model_type": "deepseek_v2", "first_k_dense_replace": 1, "hidden_size": 2048, "intermediate_size": 10944,
        "kv_lora_rank": 512, "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_routed_experts": 64,
        "n_shared_experts": 2, "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
        "num_key_value_heads": 16, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400},
    # deepseek-ai/DeepSeek-V3.1
    "deepseek-v3.1": {
        "model_type": "deepseek_v3", "first_k_dense_replace": 3, "hidden_size": 7168, "intermediate_size": 18432,
        "kv_lora_rank": 512, "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
        "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "vocab_size": 129280,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "weight_block_size": [128, 128]}},
    # Qwen/Qwen3-30B-A3B
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe", "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 2048,
        "intermediate_size": 6144, "mlp_only_layers": [], "moe_intermediate_size": 768, "num_attention_heads": 32,
        "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936},
    # Qwen/Qwen3-235B-A22B
    "qwen3-235b-a22b": {
        "model_type": "qwen3_moe", "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 4096,
        "intermediate_size": 12288, "mlp_only_layers": [], "moe_intermediate_size": 1536, "num_attention_heads": 64,
        "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94, "num_key_value_heads": 4,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936},
    # Qwen/Qwen1.5-MoE-A2.7B
    "qwen1.5-moe-a2.7b": {
        "model_type": "qwen2_moe", "decoder_sparse_step": 1, "hidden_size": 2048, "intermediate_size": 5632,
        "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4,
        "num_hidden_layers": 24, "num_key_value_heads": 16, "shared_expert_intermediate_size": 5632,
        "sliding_window": 32768, "use_sliding_window": False, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 151936},
    # mistralai/Mixtral-8x7B-v0.1
    "mixtral-8x7b": {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000},
    # ibm-granite/granite-3.0-3b-a800m-instruct
    "granite-3.0-3b-a800m": {
        "model_type": "granitemoe", "hidden_size": 1536, "intermediate_size": 512, "num_attention_heads": 24,
        "num_experts_per_tok": 8, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 40,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 49155},
    # openai/gpt-oss-120b
    "gpt-oss-120b": _gpt_oss(num_hidden_layers=36, num_local_experts=128),
    # openai/gpt-oss-20b
    "gpt-oss-20b": _gpt_oss(num_hidden_layers=24, num_local_experts=32),
    # LiquidAI/LFM2-8B-A1B (the catalog's LFM2.5-8B-A1B keeps its shape)
    "lfm2.5-8b-a1b": {
        "model_type": "lfm2_moe", "conv_L_cache": 3, "hidden_size": 2048, "intermediate_size": 7168,
        "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv",
                        "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv",
                        "full_attention", "conv", "conv", "full_attention", "conv", "conv"],
        "moe_intermediate_size": 1792, "num_attention_heads": 32, "num_dense_layers": 2, "num_experts": 32,
        "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "vocab_size": 65536},
    # CMU-FLAME/FLAME-MoE-290M-1.3B: no transformers config.json is published (a Megatron checkpoint); these
    # are the training script's values (NUM_LAYERS 9, HIDDEN_SIZE 1024, FFN_HIDDEN_SIZE 5472,
    # MOE_FFN_HIDDEN_SIZE 704, MOE_LAYER_FREQ [0]*1+[1]*8, 16 heads) in config.json's field names, with the
    # catalog's top-6, two shared experts and padded vocabulary
    "flame-moe-290m": {
        "hidden_size": 1024, "intermediate_size": 5472, "moe_intermediate_size": 704,
        "moe_layer_freq": [0] + [1] * 8, "n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 16,
        "num_experts_per_tok": 6, "num_hidden_layers": 9, "tie_word_embeddings": False, "vocab_size": 50304},
}

_WHO = {"name", "display_name", "hf_repo", "provenance", "notes", "eagle3_draft"}


@pytest.mark.parametrize("name", sorted(CATALOG_CONFIGS))
def test_catalog_model_rebuilt_from_its_config(name: str) -> None:
    catalog = load_model(name)
    got = model_from_hf_config(CATALOG_CONFIGS[name], name=name, source=f"{name}/config.json")
    assert (got.num_moe_layers, got.num_dense_layers, got.num_attention_layers) == \
        (catalog.num_moe_layers, catalog.num_dense_layers, catalog.num_attention_layers)
    assert (got.moe.num_routed_experts, got.moe.num_shared_experts, got.moe.top_k) == \
        (catalog.moe.num_routed_experts, catalog.moe.num_shared_experts, catalog.moe.top_k)
    for recipe in ("native", "q4_0"):
        assert got.expert_bytes(recipe) == catalog.expert_bytes(recipe)
        assert got.bytes_by_class(recipe) == catalog.bytes_by_class(recipe)
    assert got.model_dump(exclude=_WHO) == catalog.model_dump(exclude=_WHO)


@pytest.mark.parametrize("name", sorted(CATALOG_CONFIGS))
def test_written_toml_loads_back_unchanged(name: str, tmp_path: Path) -> None:
    model = model_from_hf_config(CATALOG_CONFIGS[name], name=f"{name}-copy", source="config.json")
    path = tmp_path / f"{name}-copy.toml"
    path.write_text(model_toml(model))
    assert load_model(path) == model


# ----- families outside the catalog -----------------------------------------------------------------------

OUTSIDE_CONFIGS: dict[str, dict[str, Any]] = {
    # zai-org/GLM-4.5-Air (glm4_moe: one leading dense layer, one shared expert, 46 layers + 1 MTP layer)
    "glm-4.5-air": {
        "model_type": "glm4_moe", "first_k_dense_replace": 1, "head_dim": 128, "hidden_size": 4096,
        "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 128, "n_shared_experts": 1,
        "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 46, "num_key_value_heads": 8,
        "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "vocab_size": 151552},
    # meta-llama/Llama-4-Scout-17B-16E (llama4: the language model in text_config, a shared expert per layer)
    "llama-4-scout-17b-16e": {
        "model_type": "llama4", "tie_word_embeddings": False,
        "text_config": {
            "model_type": "llama4_text", "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
            "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
            "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
            "num_local_experts": 16, "torch_dtype": "bfloat16", "vocab_size": 202048}},
    # microsoft/Phi-3.5-MoE-instruct (phimoe: Mixtral-like fields)
    "phi-3.5-moe": {
        "model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400, "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 16,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32064},
}

# (MoE layers, dense layers, routed, shared, top-k, expert intermediate, attention heads x kv heads x head dim)
OUTSIDE_SHAPES = {
    "glm-4.5-air": (45, 1, 128, 1, 8, 1408, (96, 8, 128)),
    "llama-4-scout-17b-16e": (48, 0, 16, 1, 1, 8192, (40, 8, 128)),
    "phi-3.5-moe": (32, 0, 16, 0, 2, 6400, (32, 8, 128)),
}
# published total parameters, billions (model cards): ours within 3% (Llama 4 counts its vision encoder too)
OUTSIDE_TOTAL_B = {"glm-4.5-air": 106, "llama-4-scout-17b-16e": 109, "phi-3.5-moe": 41.9}


@pytest.mark.parametrize("name", sorted(OUTSIDE_CONFIGS))
def test_family_outside_the_catalog(name: str) -> None:
    m = model_from_hf_config(OUTSIDE_CONFIGS[name], name=name, source="config.json")
    a = m.attention
    assert a.kind == "gqa"
    assert (m.num_moe_layers, m.num_dense_layers, m.moe.num_routed_experts, m.moe.num_shared_experts, m.moe.top_k,
            m.moe.expert_intermediate_size, (a.num_heads, a.num_kv_heads, a.head_dim)) == OUTSIDE_SHAPES[name]
    assert m.total_params() / 1e9 == pytest.approx(OUTSIDE_TOTAL_B[name], rel=0.03)
    assert m.expert_bytes() == 3 * m.hidden_size * m.moe.expert_intermediate_size * 2     # BF16


def _write_config(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(OUTSIDE_CONFIGS[name]))
    return path


#: GLM-4.5-Air's first run fits its synthetic routing (128 experts x 45 layers: about 4 s), so it runs with -m slow
SIMULATED = ["llama-4-scout-17b-16e", "phi-3.5-moe", pytest.param("glm-4.5-air", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", SIMULATED)
def test_imported_model_runs_prefill_and_decode(name: str, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / f"{name}.toml"
    res = run_cli("models", "import", str(_write_config(tmp_path, name)), "-o", str(toml))
    assert res.code == 0, res.err
    assert res.out.startswith(f"wrote {toml}: {name}, ")
    for argv in (["prefill", "--tokens", "8", "--json"], ["decode", "--tokens", "4", "--context", "64", "--json"]):
        res = run_cli(*argv, "--model", str(toml))
        assert res.code == 0, res.err
        assert json.loads(res.out)["config"]["model"] == str(toml.resolve())


# ----- refusals: one line naming the field, exit 2 --------------------------------------------------------

REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    # Qwen/Qwen3-8B: a dense model
    "dense": ({"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,
               "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
               "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936},
              "num_experts must be set (num_experts / num_local_experts / n_routed_experts / moe_num_experts): a MoE "
              "config names its expert count, this one has none (a dense model?)"),
    # Qwen/Qwen3-Next-80B-A3B-Instruct: three layers in four are Gated DeltaNet
    "linear attention": ({"model_type": "qwen3_next", "decoder_sparse_step": 1, "full_attention_interval": 4,
                          "head_dim": 256, "hidden_size": 2048, "intermediate_size": 5120, "mlp_only_layers": [],
                          "moe_intermediate_size": 512, "num_attention_heads": 16, "num_experts": 512,
                          "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
                          "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
                          "vocab_size": 151936},
                         "full_attention_interval must be 1: the other layers are linear attention (Gated DeltaNet), "
                         "which moesim cannot price, got 4"),
    # ibm-granite/granite-4.0-h-small: 36 Mamba-2 and 4 attention layers (the kinds as published; their order here
    # is not, the refusal reads only the kinds)
    "mamba": ({"model_type": "granitemoehybrid", "hidden_size": 4096, "intermediate_size": 768,
               "layer_types": ["mamba"] * 36 + ["attention"] * 4, "num_attention_heads": 32, "num_experts_per_tok": 10,
               "num_hidden_layers": 40, "num_key_value_heads": 8, "num_local_experts": 72,
               "shared_intermediate_size": 1536, "tie_word_embeddings": True, "vocab_size": 100352},
              "layer_types must hold only attention and short-conv layers ('mamba' layers cannot be priced by moesim), "
              "got 'mamba'"),
    "contradiction": ({**CATALOG_CONFIGS["lfm2.5-8b-a1b"], "first_k_dense_replace": 3},
                      "first_k_dense_replace must equal num_dense_layers (2) when both are set, got 3"),
    "top-k": ({**CATALOG_CONFIGS["mixtral-8x7b"], "num_experts_per_tok": 9},
              "moe.top_k must be <= num_routed_experts (8), got 9"),
    "fp8 blocks": ({**CATALOG_CONFIGS["deepseek-v3.1"], "quantization_config": {"quant_method": "fp8",
                                                                                 "weight_block_size": [1, 128]}},
                   "quantization_config.weight_block_size must be [128, 128] (moesim's FP8 has one scale per 128 x 128 "
                   "block; or give --format), got [1, 128]"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_in_one_line(case: str, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    config, message = REFUSED[case]
    with pytest.raises(InputError) as err:
        model_from_hf_config(config, name="m", source="config.json")
    assert message in str(err.value)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    res = run_cli("models", "import", str(path), "-o", str(tmp_path / "m.toml"))
    assert (res.code, res.out) == (2, "")
    assert res.err.count("\n") == 1 and message in res.err
    assert not (tmp_path / "m.toml").exists()


def test_formats_given_by_the_caller() -> None:
    """What config.json cannot say: a quantised deployment's formats (--format, --expert-format)."""
    config = CATALOG_CONFIGS["qwen3-30b-a3b"]
    m = model_from_hf_config(config, name="m", source="config.json",
                             formats=ImportFormats(default=WeightFormat.Q8_0, expert=WeightFormat.Q4_K))
    assert m.native_formats == model_from_hf_config(config, name="m", source="x").native_formats.model_copy(
        update={"default": WeightFormat.Q8_0, "expert": WeightFormat.Q4_K})
    assert m.expert_bytes() == 3 * 2048 * 768 // 256 * 144


def test_model_option_takes_a_config_json(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _write_config(tmp_path, "phi-3.5-moe")
    res = run_cli("models", "--model", str(path), "--json")
    assert res.code == 0, res.err
    (record,) = json.loads(res.out)["models"]
    assert (record["name"], record["moe"]["num_routed_experts"]) == ("phi-3.5-moe", 16)


def test_import_keeps_a_file_that_is_not_a_model(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "notes.toml"
    out.write_text("# my notes\n")
    res = run_cli("models", "import", str(_write_config(tmp_path, "phi-3.5-moe")), "-o", str(out))
    assert res.code == 2 and "is not a model TOML" in res.err
    assert out.read_text() == "# my notes\n"


def test_catalog_listing_unchanged_by_the_group(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("models")
    assert res.code == 0 and res.out.splitlines()[0].startswith("model ")
    assert len(res.out.splitlines()) == 2 + 12


def test_docs_example_is_what_the_import_writes(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """docs/import-models.md runs its commands on the committed docs/examples/glm-4.5-air.toml: it must be
    what importing the committed config.json writes."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "examples"
    assert docs.joinpath("glm-4.5-air", "config.json").is_file()
    res = run_cli("models", "import", "docs/examples/glm-4.5-air/config.json", "--hf-repo", "zai-org/GLM-4.5-Air")
    assert res.code == 0, res.err
    assert res.out == docs.joinpath("glm-4.5-air.toml").read_text()
    assert json.loads(docs.joinpath("glm-4.5-air", "config.json").read_text()) == {
        "architectures": ["Glm4MoeForCausalLM"], **OUTSIDE_CONFIGS["glm-4.5-air"]}

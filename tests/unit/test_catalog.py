"""The model catalog: all twelve models, bytes computed from shapes, provenance present."""

import json

import pytest

from moesim.config.catalog import list_models, load_model, model_names
from moesim.config.model import TensorClass

NAMES = ["olmoe-1b-7b", "deepseek-v2-lite", "qwen3-30b-a3b", "mixtral-8x7b", "lfm2.5-8b-a1b",
         "qwen3-235b-a22b", "gpt-oss-120b", "gpt-oss-20b", "deepseek-v3.1", "qwen1.5-moe-a2.7b",
         "granite-3.0-3b-a800m", "flame-moe-290m"]

# BRIEF.md section 6 and the trace SOURCE.md files: hidden, expert ffn, experts, top-k, MoE layers, shared
SHAPES = {
    "olmoe-1b-7b": (2048, 1024, 64, 8, 16, 0),
    "deepseek-v2-lite": (2048, 1408, 64, 6, 26, 2),
    "qwen3-30b-a3b": (2048, 768, 128, 8, 48, 0),
    "mixtral-8x7b": (4096, 14336, 8, 2, 32, 0),
    "lfm2.5-8b-a1b": (2048, 1792, 32, 4, 22, 0),
    "qwen3-235b-a22b": (4096, 1536, 128, 8, 94, 0),
    "gpt-oss-120b": (2880, 2880, 128, 4, 36, 0),
    "deepseek-v3.1": (7168, 2048, 256, 8, 58, 1),
    "gpt-oss-20b": (2880, 2880, 32, 4, 24, 0),
    "qwen1.5-moe-a2.7b": (2048, 1408, 60, 4, 24, 1),
    "granite-3.0-3b-a800m": (1536, 512, 40, 8, 32, 0),
    "flame-moe-290m": (1024, 704, 64, 6, 8, 2),
}

# Published total parameter counts (model cards), in billions; ours must be within 1.5%.
PUBLISHED_TOTAL_B = {
    "olmoe-1b-7b": 6.9, "deepseek-v2-lite": 15.7, "qwen3-30b-a3b": 30.5, "mixtral-8x7b": 46.7,
    "lfm2.5-8b-a1b": 8.3, "qwen3-235b-a22b": 235.0, "gpt-oss-120b": 116.8, "gpt-oss-20b": 20.9,
    "deepseek-v3.1": 671.0, "qwen1.5-moe-a2.7b": 14.3, "granite-3.0-3b-a800m": 3.3, "flame-moe-290m": 1.3,
}


def test_catalog_has_exactly_the_twelve_models() -> None:
    assert sorted(NAMES) == model_names()


@pytest.mark.parametrize("name", NAMES)
def test_shape_matches_brief(name: str) -> None:
    m = load_model(name)
    got = (m.hidden_size, m.moe.expert_intermediate_size, m.moe.num_routed_experts, m.moe.top_k,
           m.num_moe_layers, m.moe.num_shared_experts)
    assert got == SHAPES[name]


@pytest.mark.parametrize("name", NAMES)
def test_q4_0_expert_bytes_follow_the_arithmetic(name: str) -> None:
    m = load_model(name)
    weights = 3 * m.hidden_size * m.moe.expert_intermediate_size
    assert m.expert_bytes("q4_0") == weights * 18 // 32


def test_named_expert_sizes() -> None:
    assert load_model("olmoe-1b-7b").expert_bytes("q4_0") == 3_538_944
    assert load_model("deepseek-v2-lite").expert_bytes("q4_0") == 4_866_048
    # BRIEF.md: "one DeepSeek-V3.1 expert is 44 MB in FP8" (plus 128x128-block scales)
    assert load_model("deepseek-v3.1").expert_bytes() == 3 * 7168 * 2048 + 3 * 16 * 56 * 4
    # MXFP4, 17 bytes per 32 weights
    assert load_model("gpt-oss-120b").expert_bytes() == 3 * 2880 * 2880 * 17 // 32


@pytest.mark.parametrize("name", NAMES)
def test_total_params_match_model_cards(name: str) -> None:
    total_b = load_model(name).total_params() / 1e9
    assert total_b == pytest.approx(PUBLISHED_TOTAL_B[name], rel=0.015)


@pytest.mark.parametrize("name", NAMES)
def test_resident_is_everything_but_routed_experts(name: str) -> None:
    m = load_model(name)
    for recipe in ("native", "q4_0"):
        by = m.bytes_by_class(recipe)
        experts = m.num_moe_layers * m.moe.num_routed_experts * m.expert_bytes(recipe)
        assert by[TensorClass.EXPERT] == experts
        assert m.resident_non_expert_bytes(recipe) + experts == m.total_weight_bytes(recipe)
        assert m.resident_non_expert_bytes(recipe) > 0
    assert len(m.provenance) > 20


def test_olmoe_experts_are_most_of_the_weights() -> None:
    m = load_model("olmoe-1b-7b")
    share = m.bytes_by_class("q4_0")[TensorClass.EXPERT] / m.total_weight_bytes("q4_0")
    assert 0.91 <= share <= 0.96  # BRIEF.md: experts are 91-95% of the weights


def test_models_json_lists_all(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("models", "--json")
    assert res.code == 0
    data = json.loads(res.out)
    assert sorted(m["name"] for m in data["models"]) == sorted(NAMES)
    olmoe = next(m for m in data["models"] if m["name"] == "olmoe-1b-7b")
    assert olmoe["bytes"]["q4_0"]["expert_B"] == 3_538_944
    assert olmoe["provenance"]


def test_user_model_file(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = (load_model("olmoe-1b-7b").model_dump_json())
    data = json.loads(src)
    data["name"] = "olmoe-wide"
    data["moe"]["expert_intermediate_size"] = 2048
    lines = [f'{k} = {json.dumps(v)}' for k, v in data.items() if not isinstance(v, dict) and v is not None]
    for table in ("attention", "moe", "native_formats"):
        lines.append(f"[{table}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in data[table].items() if v is not None]
    path = tmp_path / "olmoe-wide.toml"
    path.write_text("\n".join(lines) + "\n")
    res = run_cli("models", "--model", str(path), "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["models"][0]["bytes"]["q4_0"]["expert_B"] == 2 * 3_538_944


def test_bad_model_file_is_one_line_exit_2(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.toml"
    text = (load_model.__module__ and "")  # keep flake quiet
    base = "\n".join(['name = "bad"', 'display_name = "x"', 'hf_repo = "x/y"', 'provenance = "made up for a test"',
                      "num_layers = 4", "hidden_size = 64", "vocab_size = 100",
                      '[attention]', 'kind = "gqa"', "num_heads = 4", "num_kv_heads = 3", "head_dim = 16",
                      "[moe]", "num_routed_experts = 8", "top_k = 2", "expert_intermediate_size = 32",
                      "[native_formats]", 'default = "BF16"'])
    path.write_text(text + base + "\n")
    res = run_cli("models", "--model", str(path))
    assert res.code == 2
    assert res.err.count("\n") == 1
    assert "attention.num_heads must be a multiple of num_kv_heads, got 4 and 3" in res.err


def test_all_models_load() -> None:
    assert len(list_models()) == 12

"""Issue 23 (items 3 and 10): a refusal names the number the user, the profile or the model file
actually set (never "memory_budget_GiB ... got None"); profile and model numbers are held to
their physical ranges when loaded; a data file cannot pass for a bundled one; a result names
its files so that it re-runs from any folder; ``$MOESIM_SHARED_TRACES`` must name a folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moesim.config.catalog import CATALOG_DIR, load_model
from moesim.config.profiles import load_profile, profile_dir
from moesim.cost.memory import MemoryBreakdown, arena_refusal
from moesim.traces.paths import SHARED_TRACES_ENV
from moesim.units import MiB

_OLMOE = (CATALOG_DIR / "olmoe-1b-7b.toml").read_text().replace('name = "olmoe-1b-7b"', 'name = "my-olmoe"')

CAUSES = [
    # (arguments, what the one line must contain)
    (("prefill", "--tokens", "150000"),
     ["tokens must be fewer: the KV cache and activations alone take", "over memory.usable_GiB = 15.1 "
      "(profile sd8-elite-gen5), got 150000"]),
    (("autoconfig", "--tokens", "150000", "--memory-budget-gib", "14"), ["tokens must be fewer", "got 150000"]),
    (("prefill", "--tokens", "64", "--banks", "100000"),
     ["banks needs 329.590 GiB of arena even with groups of 1 expert",
      "over arena.max_mapped_GiB = 3.5 (profile sd8-elite-gen5), got 100000"]),
    (("prefill", "--tokens", "64", "--group-size", "4", "--banks", "100000"),
     ["banks needs 1318.359 GiB of arena (100000 banks x 4 experts), over arena.max_mapped_GiB = 3.5 "
      "(profile sd8-elite-gen5), got 100000"]),
    (("prefill", "--tokens", "64", "--set", "arena.max_mapped_GiB=0.001"),
     ["arena.max_mapped_GiB (--set on profile sd8-elite-gen5) must hold the smallest arena of olmoe-1b-7b, "
      "2 banks x 1 expert = 0.007 GiB, got 0.001"]),
    (("prefill", "--tokens", "64", "--set", "memory.runtime_overhead_MiB=15400"),
     ["memory.runtime_overhead_MiB (--set on profile sd8-elite-gen5) leaves no room", "got 15400.0"]),
    (("prefill", "--tokens", "64", "--set", "memory.runtime_overhead_MiB=1e12"),
     ["memory.runtime_overhead_MiB must be <= 67,108,864 (physical range", "got 1000000000000.0"]),
    (("prefill", "--tokens", "64", "--set", "memory.runtime_overhead_MiB=1e6"),
     ["memory.runtime_overhead_MiB must be <= capacity_GiB x 1024 (16384 MiB), got 1000000.0"]),
    (("prefill", "--tokens", "64", "--set", "htp.clock_GHz=2150"), ["htp.clock_GHz must be <= 10 (physical range"]),
    # a denormal rate made every time overflow (an internal error), 1e-30 gave joules by the 1e29
    (("prefill", "--tokens", "64", "--set", "ufs.effective_read_bw_GBps=2.2e-311"),
     ["ufs.effective_read_bw_GBps must be >= 0.001 (physical range", "got 2.2e-311"]),
    (("prefill", "--tokens", "64", "--set", "htp.hmx_fp16_TFLOPS=1e-12"),
     ["htp.hmx_fp16_TFLOPS must be >= 1e-06 (physical range", "got 1e-12"]),
    (("prefill", "--tokens", "64", "--memory-budget-gib", "0.3"), ["--memory-budget-gib must be >= ", "got 0.3"]),
    (("decode", "--device", "h200x8-hf"), ["device must be a mobile-npu profile for decode"]),
    (("decode", "--model", "olmoe-1b-7b", "--context", "120000", "--tokens", "4"),
     ["context + tokens + warmup_tokens (120000 + 4 + 0) must be fewer: the KV cache takes 14.65 GiB",
      "over memory.usable_GiB = 15.1 (profile sd8-elite-gen5), got 120000"]),
]


def _one_line(res) -> str:  # type: ignore[no-untyped-def]
    assert res.code == 2, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moesim: error: "), res.err
    assert "got None" not in lines[0] and "Traceback" not in res.err
    return str(lines[0])


@pytest.mark.parametrize(("args", "parts"), CAUSES, ids=[" ".join(a) for a, _ in CAUSES])
def test_refusal_names_what_was_set(run_cli, args: tuple[str, ...], parts: list[str]) -> None:  # type: ignore[no-untyped-def]
    line = _one_line(run_cli(*args))
    for part in parts:
        assert part in line, line


def test_compare_row_names_the_cause(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--tokens", "64", "--policies", "estream,resident", "--set", "arena.max_mapped_GiB=0.001")
    assert "arena.max_mapped_GiB (--set on profile sd8-elite-gen5) must hold" in res.out + res.err


def _mib(n: float) -> int:
    return int(n * MiB)


@pytest.mark.parametrize(("base", "kwargs", "field", "part"), [
    # the model's weights are the largest part: blame the model
    (MemoryBreakdown(_mib(60_000), 0, _mib(10), _mib(20), _mib(200)), {}, "model",
     "does not fit phone: its resident weights alone take 58.594 GiB"),
    # the budget is below what the run needs outside the arena
    (MemoryBreakdown(_mib(300), 0, _mib(50), _mib(128), _mib(200)), {"budget_GiB": 0.5}, "memory_budget_GiB",
     "must be >= 0.669 GiB"),
    # a fixed group size whose two banks do not fit the budget's room
    (MemoryBreakdown(_mib(300), 0, _mib(50), _mib(128), _mib(200)), {"budget_GiB": 1.0, "group_size": 64},
     "group_size", "needs 0.422 GiB of arena with 2 banks (3.38 MiB an expert), over the 0.338 GiB "
                   "memory_budget_GiB = 1 leaves"),
])
def test_arena_refusal_blames_the_binding_number(base: MemoryBreakdown, kwargs: dict[str, float], field: str,
                                                 part: str) -> None:
    err = arena_refusal(base, model="m", device="phone", tokens=64, expert_B=3_538_944, usable_GiB=15.1,
                        max_mapped_GiB=3.5, **kwargs)  # type: ignore[arg-type]
    assert err.field == field and part in str(err), str(err)


@pytest.mark.parametrize(("old", "new", "part"), [
    ("hidden_size = 2048", "hidden_size = 10000000000", "hidden_size must be less than or equal to 65536 (the "
                                                        "residual width; published: PaLM-540B 18,432"),
    ("head_dim = 128", "head_dim = 5000", "attention.head_dim must be less than or equal to 1024 (published: at "
                                          "most 256, Gemma), got 5000"),
    ("num_layers = 16", "num_layers = 1000000", "num_layers must be less than or equal to 1024 (published: "
                                                "Llama-3.1-405B 126"),
    ("num_routed_experts = 64", "num_routed_experts = 100000", "moe.num_routed_experts must be less than or equal"),
    ("top_k = 8", "top_k = 1000", "moe.top_k must be less than or equal to 64"),
    ("expert_intermediate_size = 1024", "expert_intermediate_size = 200000\nnum_shared_experts = 0",
     "must give at most 1e+14 weights"),
])
def test_model_numbers_have_physical_ranges(run_cli, tmp_path: Path, old: str, new: str, part: str) -> None:  # type: ignore[no-untyped-def]
    text = _OLMOE.replace(old, new)
    if "200000" in new:     # in range one by one, absurd together
        text = text.replace("num_layers = 16", "num_layers = 1000").replace("num_routed_experts = 64",
                                                                             "num_routed_experts = 4000")
    path = tmp_path / "m.toml"
    path.write_text(text)
    line = _one_line(run_cli("prefill", "--tokens", "64", "--model", str(path)))
    assert f"{path}: " in line and part in line, line


@pytest.mark.parametrize(("kind", "option", "source", "name"), [
    ("profile", "--device", profile_dir() / "h200x8-hf.toml", "h200x8-hf"),
    ("model", "--model", CATALOG_DIR / "olmoe-1b-7b.toml", "olmoe-1b-7b"),
])
def test_a_file_cannot_take_a_bundled_name(run_cli, tmp_path: Path, kind: str, option: str, source: Path,  # type: ignore[no-untyped-def]
                                           name: str) -> None:
    path = tmp_path / "copy.toml"
    path.write_text(source.read_text())
    command = ("specdecode",) if kind == "profile" else ("prefill", "--tokens", "64")
    line = _one_line(run_cli(*command, option, str(path)))
    assert f"{path}: name must not be a bundled {kind}'s name" in line and f"got '{name}'" in line, line
    loaded = load_profile(source) if kind == "profile" else load_model(source)   # the bundled file itself loads
    assert loaded.name == name


def test_custom_model_gets_routing_of_its_own(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.toml"
    path.write_text(_OLMOE)
    res = run_cli("prefill", "--tokens", "16", "--model", str(path), "--json")
    assert res.code == 0, res.err
    trace = json.loads(res.out)["config"]["trace"]
    assert trace["synthetic"] is True and "synthetic generator" in trace["source"]


def test_missing_shared_traces_folder_is_refused(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "no-such-folder"
    monkeypatch.setenv(SHARED_TRACES_ENV, str(missing))
    line = _one_line(run_cli("prefill", "--tokens", "64"))
    assert f"{SHARED_TRACES_ENV} must name an existing folder of real traces" in line and str(missing) in line


def test_rerun_from_another_folder(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                   phone_profile_text: str) -> None:
    (tmp_path / "a" / "profiles").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "profiles" / "phone.toml").write_text(phone_profile_text)
    monkeypatch.chdir(tmp_path / "a")
    res = run_cli("prefill", "--tokens", "64", "--device", "profiles/phone.toml", "--json")
    assert res.code == 0, res.err
    saved = json.loads(res.out)
    assert saved["config"]["run"]["device"] == str(tmp_path / "a" / "profiles" / "phone.toml")
    (tmp_path / "r.json").write_text(res.out)
    monkeypatch.chdir(tmp_path / "b")
    again = run_cli("rerun", str(tmp_path / "r.json"))
    assert again.code == 0, again.err


"""native_ref/gpu/log_draft_routing.py (its pure parts) and moesim.calibrate.draft_routing, which reads its log."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moesim.calibrate import draft_routing as dr
from moesim.config.specdecode import DraftTree
from moesim.errors import InputError
from tests.traces_helpers import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "native_ref" / "gpu" / "log_draft_routing.py"
ldr = load_script(SCRIPT, "log_draft_routing")
LAYERS, K, EXPERTS = 6, 4, 64


def _fake_visit(seed: int):  # type: ignore[no-untyped-def]
    """A drafter whose top-8 after any path are distinct pseudo-random tokens, most probable first."""
    def visit(node):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng([seed, *node.path])
        toks = rng.choice(1000, size=8, replace=False)
        return [(int(t), -0.1 - r * (1.0 + 0.01 * node.id)) for r, t in enumerate(toks)]
    return visit


def _log(tmp_path: Path, share: float, sibling: float = 0.0, steps: int = 40) -> Path:
    """A synthetic log: greedy nodes route at random; a wrong node copies, per layer, the true token at its
    depth with probability ``share``, its first sibling with probability ``sibling``, else routes at random."""
    rng = np.random.default_rng(7)
    a = ldr.parse_args(["--depth", "3", "--width", "2", "--steps", str(steps)])
    lines = [ldr.header_line("toy-moe", LAYERS, K, EXPERTS, a, {"torch": "-", "transformers": "-"})]
    pos = 10
    for step in range(steps):
        nodes = ldr.build_tree(step, 3, 2, _fake_visit(step))
        true = {n.depth: n for n in nodes if n.greedy}
        first_child: dict[int, object] = {}
        for n in nodes:
            rows = []
            for layer in range(LAYERS):
                own = sorted(rng.choice(EXPERTS, size=K, replace=False).tolist())
                u = rng.random()
                sib = first_child.get(n.parent)
                if not n.greedy and u < share:
                    own = true[n.depth].experts[layer]
                elif not n.greedy and sib is not None and u < share + sibling:
                    own = sib.experts[layer]                               # type: ignore[attr-defined]
                rows.append(own)
            n.experts = rows
            first_child.setdefault(n.parent, n)
            lines.append(ldr.node_line(0, step, pos, n))
        pos += len(ldr.accepted(nodes))
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_tree_is_moesims_draft_tree_and_greedy_decoding_advances_depth_plus_one() -> None:
    for depth, width in ((3, 2), (2, 3), (4, 1)):
        nodes = ldr.build_tree(5, depth, width, _fake_visit(0))
        assert len(nodes) == DraftTree(depth=depth, width=width).n_nodes
        chain = [n for n in nodes if n.greedy]
        assert [n.depth for n in chain] == list(range(depth + 1))          # one greedy node per depth
        for n in chain[1:]:
            assert nodes[n.parent].greedy and n.token == nodes[n.parent].children[0][0]
        assert ldr.accepted(nodes) == [n.token for n in chain[1:]] + [chain[-1].children[0][0]]
    nodes = ldr.build_tree(5, 3, 2, _fake_visit(0))
    assert all(nodes[n.parent].id < n.id for n in nodes[1:])                 # parents come first


def test_router_modules_finds_qwen3_and_gpt_oss_routers_only() -> None:
    names = ["model.layers.0.mlp.gate", "model.layers.0.mlp.experts.3.gate_proj", "model.layers.10.mlp.gate",
             "model.layers.2.mlp.gate", "model.layers.1.mlp.router", "model.layers.1.self_attn.q_proj",
             "model.layers.1.mlp.shared_expert_gate", "lm_head"]
    assert ldr.router_modules(names) == [(0, "model.layers.0.mlp.gate"), (1, "model.layers.1.mlp.router"),
                                         (2, "model.layers.2.mlp.gate"), (10, "model.layers.10.mlp.gate")]


def test_arguments() -> None:
    a = ldr.parse_args([])
    assert (a.model, a.depth, a.width) == ("Qwen/Qwen3-30B-A3B", 3, 2)
    for bad in (["--steps", "0"], ["--width", "9"]):
        with pytest.raises(SystemExit):
            ldr.parse_args(bad)


def test_the_schema_is_the_readers() -> None:
    assert ldr.SCHEMA == dr.SCHEMA


def test_random_routing_gives_zero_shares(tmp_path: Path) -> None:
    log = dr.read_draft_log(_log(tmp_path, share=0.0))
    stats = dr.overlap_stats(log)
    base = K / EXPERTS                                                   # expected overlap of random top-k sets
    for kind in ("sibling", "parent_child", "wrong_vs_true", "random"):
        assert stats.overall[kind] == pytest.approx(base, abs=0.02), kind
        assert stats.by_layer[kind].shape == (LAYERS,)
    shares = dr.routing_shares(stats)
    assert shares["alternative_layer_share"] < 0.03 and shares["sibling_share"] < 0.03


def test_the_alternative_share_is_recovered(tmp_path: Path) -> None:
    stats = dr.overlap_stats(dr.read_draft_log(_log(tmp_path, share=0.5)))
    assert dr.routing_shares(stats)["alternative_layer_share"] == pytest.approx(0.5, abs=0.05)
    full = dr.routing_shares(dr.overlap_stats(dr.read_draft_log(_log(tmp_path, share=1.0))))
    assert full["alternative_layer_share"] == pytest.approx(1.0)


def test_the_sibling_share_is_recovered(tmp_path: Path) -> None:
    stats = dr.overlap_stats(dr.read_draft_log(_log(tmp_path, share=0.0, sibling=0.6)))
    # pairs of two wrong siblings copy with 0.6; a greedy node and its wrong sibling too (the wrong one copies)
    assert dr.routing_shares(stats)["sibling_share"] == pytest.approx(0.6, abs=0.08)
    # a wrong sibling of a greedy node shares with the true token too: the two measures are not independent
    assert 0.1 < dr.routing_shares(stats)["alternative_layer_share"] < dr.routing_shares(stats)["sibling_share"]


def test_same_file_same_report(tmp_path: Path) -> None:
    path = _log(tmp_path, share=0.3)
    r1 = dr.render_report(dr.read_draft_log(path), dr.overlap_stats(dr.read_draft_log(path)))
    r2 = dr.render_report(dr.read_draft_log(path), dr.overlap_stats(dr.read_draft_log(path)))
    assert r1 == r2 and "alternative_layer_share" in r1 and "wrong_vs_true" in r1


@pytest.mark.parametrize(("edit", "field"), [
    (lambda h, n: (h, {**n, "experts": n["experts"][:-1]}), "experts"),
    (lambda h, n: (h, {**n, "experts": [[0, 0, 1, 2]] + n["experts"][1:]}), "experts[0]"),
    (lambda h, n: (h, {**n, "greedy": 1}), "greedy"),
    (lambda h, n: (h, {k: v for k, v in n.items() if k != "depth"}), "depth"),
    (lambda h, n: ({**h, "schema": "x/0"}, n), "schema"),
    (lambda h, n: ({**h, "top_k": 0}, n), "top_k"),
])
def test_malformed_lines_are_one_line_errors_naming_line_and_field(tmp_path: Path, edit, field) -> None:  # type: ignore[no-untyped-def]
    lines = _log(tmp_path, share=0.0, steps=2).read_text().splitlines()
    header, node = edit(json.loads(lines[0]), json.loads(lines[3]))
    lines[0], lines[3] = json.dumps(header), json.dumps(node)
    with pytest.raises(InputError) as exc:
        dr.parse_draft_log(lines, source="log.jsonl")
    msg = str(exc.value)
    line = "line 1" if field in ("schema", "top_k") else "line 4"
    assert "\n" not in msg and f"log.jsonl {line}: {field}" in msg


def test_not_json_and_an_orphan_parent_and_an_empty_file() -> None:
    with pytest.raises(InputError, match="line 1: line must be one JSON object"):
        dr.parse_draft_log(["{oops"])
    good = json.dumps({"schema": dr.SCHEMA, "model": "m", "moe_layers": 1, "top_k": 1, "experts": 2, "depth": 1,
                       "width": 1, "drafter": "d"})
    orphan = json.dumps({"prompt": 0, "step": 0, "node": 1, "parent": 0, "depth": 1, "position": 3, "token": 1,
                         "greedy": False, "experts": [[0]]})
    with pytest.raises(InputError, match="line 2: parent must name a node listed before it"):
        dr.parse_draft_log([good, orphan])
    with pytest.raises(InputError, match="header line is missing"):
        dr.parse_draft_log([])


def test_cli_trace_draft_log(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = _log(tmp_path, share=1.0)
    res = run_cli("trace", "draft-log", str(path), "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["shares"]["alternative_layer_share"] == pytest.approx(1.0)
    assert len(doc["by_layer"]["random"]) == LAYERS and doc["pairs"]["random"] == dr.RANDOM_PAIRS
    text = run_cli("trace", "draft-log", str(path))
    assert text.code == 0 and "implied routing parameters" in text.out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": 1}\n')
    res = run_cli("trace", "draft-log", str(bad))
    assert res.code == 2 and res.err.count("\n") == 1 and "line 1: model is missing" in res.err
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x7fELF\x02\x01\xd0\xff")
    res = run_cli("trace", "draft-log", str(binary))
    assert res.code == 2 and res.err.count("\n") == 1 and "must be UTF-8 text" in res.err


def test_router_outputs_give_top_k_ids_when_torch_is_installed() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the GPU harness is optional)")
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0], [5.0, 0.0, 1.0, 4.0]])
    assert sorted(ldr._top_k_of(logits, 2, 4)[-1].tolist()) == [0, 3]                      # Qwen3-MoE: gate logits
    ids = torch.tensor([[1, 2], [3, 0]])
    assert ldr._top_k_of((logits.softmax(-1), ids), 2, 4)[-1].tolist() == [3, 0]          # GPT-OSS: (scores, ids)
    assert ldr._top_k_of(torch.zeros(2, 7), 2, 4) is None

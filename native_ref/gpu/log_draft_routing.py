"""Log the router's top-k experts for every node of a draft tree, on a lent GPU.

    python native_ref/gpu/log_draft_routing.py --out validation/draft_routing_qwen3-30b.jsonl
    python native_ref/gpu/log_draft_routing.py --model openai/gpt-oss-20b --out gpt-oss-20b.jsonl

Loads a Hugging Face MoE (default ``Qwen/Qwen3-30B-A3B``; ``openai/gpt-oss-20b`` / ``-120b`` work the
same way, or a local folder) in BF16 with ``device_map="auto"`` and decodes a few prompts greedily.
At every step it builds the draft tree of the EcoSpec paper's baselines (``--depth`` 3 steps x
``--width`` top-2, moesim's :class:`~moesim.config.specdecode.DraftTree`: at each depth the ``width``
most probable nodes of the previous depth get their top-``width`` tokens) **with the target itself as
the drafter**: a node's children are the target's own top-2 tokens after it. This is a stand-in:
EAGLE-3's drafts approximate the target's distribution, they are not it, so its wrong drafts are
the target's own second choices here. No EAGLE-3 head is loaded (its drafter code is not part of
Transformers).

Verification is exact and simple: every root-to-node path runs as its own forward over a copy of
the cached prefix, and forward hooks on the MoE routers (``mlp.gate`` of Qwen3-MoE / Mixtral /
OLMoE, ``mlp.router`` of GPT-OSS) record the top-k expert ids of the path's last position, i.e.
the node's token at its position, per MoE layer. A tree-masked single forward gives the same
routing (the router sees only the node's hidden state) but needs each model's mask plumbing.
The greedy chain of the tree (depth tokens) and the bonus token are then accepted, so the
decode advances ``depth + 1`` tokens a step, as greedy decoding would.

Output: JSONL, a header line (schema ``moesim.native_ref.gpu.draft_routing/1``) and one line per node:
prompt, step, node, parent (-1 for the root), depth, position, token, greedy (on the target's
greedy path), logprob (cumulative from the root) and experts (per MoE layer, the top-k ids).
``moesim.calibrate.draft_routing`` reads it. torch and transformers are imported only when logging,
so the pure parts (arguments, the tree, the router names, the lines) run without them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "moesim.native_ref.gpu.draft_routing/1"
DRAFTER = "target-top-k (stand-in for EAGLE-3: the target's own top-width tokens)"
MODELS = ("Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b", "openai/gpt-oss-120b")
PROMPTS = (
    "Explain, step by step, why the sky is blue during the day and red at sunset.",
    "Write a Python function that returns the n-th Fibonacci number using memoization.",
    "Summarize the causes of the French Revolution in four sentences.",
    "A train leaves at 9:40 and arrives at 13:05. How long is the journey? Show the arithmetic.",
)
#: the router of an MoE block: its last name part, under a block whose name ends like these
ROUTER_NAMES = ("gate", "router")
MOE_PARENTS = ("mlp", "block_sparse_moe", "moe", "feed_forward")


@dataclass
class Node:
    id: int
    parent: int          # -1 for the root
    depth: int
    token: int
    logprob: float       # cumulative from the root (the root's is 0)
    path: tuple[int, ...]  # tokens from the root to this node, both included
    children: list[tuple[int, float]] = field(default_factory=list)   # the top-width (token, logprob) after it
    greedy: bool = False
    experts: list[list[int]] = field(default_factory=list)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="router top-k of every draft-tree node, target as its own drafter")
    ap.add_argument("--model", default=MODELS[0], help=f"a Hugging Face repo ({', '.join(MODELS)}) or a folder")
    ap.add_argument("--prompts", type=Path, default=None, help="a text file, one prompt a line (default: 4 built in)")
    ap.add_argument("--steps", type=int, default=16, help="tree steps per prompt (each advances depth + 1 tokens)")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--chat", action="store_true", help="wrap each prompt in the tokenizer's chat template")
    ap.add_argument("--out", type=Path, required=False, default=None, help="the JSONL to write (default stdout)")
    a = ap.parse_args(argv)
    for name in ("steps", "depth", "width"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    if a.depth > 8 or a.width > 8:
        ap.error(f"--depth and --width must be <= 8 (moesim's DraftTree), got {a.depth} / {a.width}")
    return a


def build_tree(root_token: int, depth: int, width: int,
               visit: Callable[[Node], list[tuple[int, float]]]) -> list[Node]:
    """The draft tree of one step, breadth first. ``visit(node)`` runs the node (its routing is the
    caller's to record) and returns its top-``width`` (token, logprob) continuations, most probable
    first. At each depth the ``width`` most probable nodes of the previous depth (cumulative logprob,
    ties by id) are expanded; every node is visited, the deepest ones too (their top-1 is the bonus)."""
    root = Node(id=0, parent=-1, depth=0, token=root_token, logprob=0.0, path=(root_token,), greedy=True)
    nodes, level = [root], [root]
    root.children = visit(root)[:width]
    for d in range(1, depth + 1):
        expand = sorted(level, key=lambda n: (-n.logprob, n.id))[:width]
        nxt: list[Node] = []
        for parent in sorted(expand, key=lambda n: n.id):
            for rank, (tok, lp) in enumerate(parent.children[:width]):
                node = Node(id=len(nodes), parent=parent.id, depth=d, token=tok, logprob=parent.logprob + lp,
                            path=(*parent.path, tok), greedy=parent.greedy and rank == 0)
                node.children = visit(node)[:width]
                nodes.append(node)
                nxt.append(node)
        level = nxt
    return nodes


def accepted(nodes: Sequence[Node]) -> list[int]:
    """The tokens greedy decoding accepts after the step: the greedy chain below the root and the bonus
    (the deepest greedy node's top-1)."""
    chain = [n for n in nodes if n.greedy]
    deepest = max(chain, key=lambda n: n.depth)
    return [n.token for n in sorted(chain, key=lambda n: n.depth)[1:]] + [deepest.children[0][0]]


def router_modules(names: Sequence[str]) -> list[tuple[int, str]]:
    """(decoder layer, module name) of the MoE routers among ``names`` (``model.named_modules()``),
    by layer: a module ``...layers.N.<moe block>.gate|router`` (``gate_proj`` and the like excluded)."""
    out = []
    for name in names:
        parts = name.split(".")
        m = re.search(r"(?:^|\.)layers\.(\d+)\.", name)
        if m and len(parts) >= 2 and parts[-1] in ROUTER_NAMES and parts[-2] in MOE_PARENTS:
            out.append((int(m.group(1)), name))
    return sorted(out)


def node_line(prompt: int, step: int, position0: int, node: Node) -> str:
    """One JSONL line of a node (``position0``: the root's position in the prompt + generation)."""
    return json.dumps({"prompt": prompt, "step": step, "node": node.id, "parent": node.parent, "depth": node.depth,
                       "position": position0 + node.depth, "token": node.token, "greedy": node.greedy,
                       "logprob": round(node.logprob, 6), "experts": node.experts}, sort_keys=True)


def header_line(model: str, moe_layers: int, top_k: int, experts: int, a: argparse.Namespace,
                versions: dict[str, str]) -> str:
    return json.dumps({"schema": SCHEMA, "model": model, "moe_layers": moe_layers, "top_k": top_k,
                       "experts": experts, "depth": a.depth, "width": a.width, "drafter": DRAFTER,
                       "dtype": a.dtype, "steps": a.steps, **versions}, sort_keys=True)


# ----- logging (torch and transformers needed from here on) -----------------------------------
def _top_k_of(output: Any, k: int, experts: int) -> Any:
    """The router output's top-k ids, ``[tokens, k]``: an integer tensor of width k when the router
    returns one (GPT-OSS: (scores, indices)), else the top-k of its logits (Qwen3-MoE: an nn.Linear)."""
    import torch

    items = output if isinstance(output, (tuple, list)) else (output,)
    for t in items:
        if isinstance(t, torch.Tensor) and not t.is_floating_point() and t.shape[-1] == k:
            return t.reshape(-1, k)
    for t in items:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.shape[-1] == experts:
            return t.reshape(-1, experts).topk(k, dim=-1).indices
    return None


def run(a: argparse.Namespace) -> int:
    import copy

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not torch.cuda.is_available():
        raise SystemExit("log_draft_routing: torch sees no CUDA device (this script is for a lent GPU)")
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=getattr(torch, a.dtype), device_map="auto")
    model.eval()
    cfg = model.config
    k = int(getattr(cfg, "num_experts_per_tok", 0) or getattr(cfg, "experts_per_token", 0))
    experts = int(getattr(cfg, "num_experts", 0) or getattr(cfg, "num_local_experts", 0))
    routers = router_modules([n for n, _ in model.named_modules()])
    if not routers or k < 1 or experts < 1:
        raise SystemExit(f"log_draft_routing: {a.model} has no MoE routers this script recognizes "
                         f"(found {len(routers)}, top_k {k}, experts {experts})")
    modules = dict(model.named_modules())
    # the router module's output, or else the MoE block's router logits: GPT-OSS's MXFP4 kernel path
    # (integrations/mxfp4.py mlp_forward) applies the router's weight with F.linear, so no router hook fires
    last: dict[int, list[int]] = {}
    block_last: dict[int, list[int]] = {}

    def hook(i: int, into: dict[int, list[int]]) -> Callable[..., None]:
        def record(_mod: Any, _inp: Any, out: Any) -> None:
            ids = _top_k_of(out, k, experts)
            if ids is not None:
                into[i] = [int(e) for e in ids[-1].tolist()]   # the path's last position
        return record

    handles = [modules[name].register_forward_hook(hook(i, last)) for i, (_, name) in enumerate(routers)]
    handles += [modules[name.rsplit(".", 1)[0]].register_forward_hook(hook(i, block_last))
                for i, (_, name) in enumerate(routers)]
    texts = a.prompts.read_text().splitlines() if a.prompts else list(PROMPTS)
    texts = [t for t in texts if t.strip()]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # this checkout's moesim.files (stdlib only)
    from moesim.files import atomic_path

    with ExitStack() as stack:   # the log replaces --out once, atomically, when every node is written
        sink = stack.enter_context(stack.enter_context(atomic_path(a.out)).open("w")) if a.out else sys.stdout
        versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                    "device": torch.cuda.get_device_name(0), "hf_model": a.model}
        sink.write(header_line(a.model, len(routers), k, experts, a, versions) + "\n")
        dev = model.get_input_embeddings().weight.device
        eos_ids = tok.eos_token_id
        eos = set(eos_ids if isinstance(eos_ids, list) else [eos_ids]) - {None}
        cache: dict[str, Any] = {}        # the prompt's KV cache up to (not including) the root

        def visit(node: Node) -> list[tuple[int, float]]:
            last.clear()
            block_last.clear()
            out = model(torch.tensor([list(node.path)], device=dev),
                        past_key_values=copy.deepcopy(cache["prefix"]), use_cache=True)
            got = last if len(last) == len(routers) else block_last
            if len(got) != len(routers):
                raise SystemExit(f"log_draft_routing: {len(routers)} routers, but only {len(got)} gave top-{k} "
                                 f"ids or {experts}-wide router logits")
            node.experts = [got[i] for i in range(len(routers))]
            lp = torch.log_softmax(out.logits[0, -1].float(), dim=-1).topk(a.width)
            return [(int(t), float(v)) for v, t in zip(lp.values.tolist(), lp.indices.tolist(), strict=True)]

        with torch.inference_mode():
            for p, text in enumerate(texts):
                if a.chat:
                    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
                else:
                    ids = tok(text)["input_ids"]
                if len(ids) < 2:
                    print(f"log_draft_routing: prompt {p} has {len(ids)} token(s), skipped (needs >= 2)",
                          file=sys.stderr)
                    continue
                cache["prefix"] = model(torch.tensor([ids[:-1]], device=dev), use_cache=True).past_key_values
                root, pos = ids[-1], len(ids) - 1

                for step in range(a.steps):
                    nodes = build_tree(root, a.depth, a.width, visit)
                    for node in nodes:
                        sink.write(node_line(p, step, pos, node) + "\n")
                    new = accepted(nodes)
                    # the prefix grows by the root and the accepted chain; the bonus is the next root
                    cache["prefix"] = model(torch.tensor([[root, *new[:-1]]], device=dev),
                                            past_key_values=cache["prefix"], use_cache=True).past_key_values
                    root, pos = new[-1], pos + len(new)
                    if eos & set(new):
                        break
        for h in handles:
            h.remove()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

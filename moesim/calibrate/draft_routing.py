"""How the target routes the nodes of a draft tree, measured from a logged run.

``native_ref/gpu/log_draft_routing.py`` writes, on a lent GPU, one JSONL file: a header line
(schema :data:`SCHEMA`) and one line per tree node with its step, depth, parent, token, whether
it is on the target's greedy path, and per MoE layer the router's top-k expert ids. This module
reads it (one-line :class:`~moesim.errors.InputError` naming the line and the field) and measures
the overlap ``|A & B| / k`` of two nodes' top-k sets, by MoE layer, for:

* ``sibling``: two children of the same parent (same prefix, same position);
* ``parent_child``: a node and its parent (consecutive positions of one path);
* ``wrong_vs_true``: a node off the greedy path and the greedy node at the same depth of the same
  step (the true token at that position, T = 0);
* ``nearby_true``: two greedy-path tokens of one prompt at most :data:`NEARBY_WINDOW` positions apart
  (the ``nearby`` locality of :class:`~moesim.config.draft.MixtureRouting`);
* ``random``: two nodes of different steps drawn with a fixed seed (the baseline, no shared context).

:func:`routing_shares` maps them onto the parameters of moesim's routing families. A family that
copies a reference token's routing with probability ``s`` (per layer) and otherwise routes like a
random token has expected overlap ``s + (1 - s) b`` with that reference, ``b`` the random-pair
overlap, so ``s = (o - b) / (1 - b)``:

* ``alternative:layer_share`` from ``wrong_vs_true`` (reference: the true token at the position);
* the sibling share ``S`` (docs/background/specdecode-evidence.md section 7.2) from ``sibling``;
* the parent share from ``parent_child``;
* ``mixture``'s ``context_free_share`` ``c`` from ``wrong_vs_true`` = ``(1 - c) o_nearby + c b``:
  ``c = 1 - (o - b) / (o_nearby - b)``.

The kinds overlap: the wrong sibling of a greedy node is in ``sibling`` and in ``wrong_vs_true``, so a
sibling share alone raises the ``alternative`` estimate and the two are not independent parameters.

Pure: no torch, no file writes; the same file gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from moesim.errors import InputError
from moesim.inputs import parse_json, read_input_text

__all__ = ["SCHEMA", "NEARBY_WINDOW", "RANDOM_PAIRS", "DraftLog", "DraftNode", "read_draft_log", "parse_draft_log",
           "OverlapStats", "overlap_stats", "routing_shares", "render_report"]

SCHEMA = "moesim.native_ref.gpu.draft_routing/1"
#: the window of moesim's ``nearby`` / ``mixture`` routing (MixtureRouting.window default)
NEARBY_WINDOW = 8
#: random pairs drawn for the baseline (seed 0)
RANDOM_PAIRS = 4000
HEADER_KEYS = ("schema", "model", "moe_layers", "top_k", "experts", "depth", "width", "drafter")
NODE_KEYS = ("prompt", "step", "node", "parent", "depth", "position", "token", "greedy", "experts")
KINDS = ("sibling", "parent_child", "wrong_vs_true", "nearby_true", "random")

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class DraftNode:
    prompt: int
    step: int
    node: int
    parent: int          # -1 for the root
    depth: int
    position: int        # the token's position in its prompt + generation
    token: int
    greedy: bool
    experts: tuple[tuple[int, ...], ...]   # per MoE layer, the router's top-k ids


@dataclass(frozen=True)
class DraftLog:
    header: dict[str, Any]
    nodes: tuple[DraftNode, ...]

    @property
    def moe_layers(self) -> int:
        return int(self.header["moe_layers"])

    @property
    def top_k(self) -> int:
        return int(self.header["top_k"])


def _int(value: Any, field: str, where: str, lo: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise InputError(field, f"must be an integer >= {lo}", value, source=where)
    return value


def _header(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InputError("header", "must be a JSON object", obj, source=where)
    for k in HEADER_KEYS:
        if k not in obj:
            raise InputError(k, "is missing from the header", show_value=False, source=where)
    if obj["schema"] != SCHEMA:
        raise InputError("schema", f"must be {SCHEMA!r}", obj["schema"], source=where)
    for k in ("moe_layers", "top_k", "experts", "depth", "width"):
        _int(obj[k], k, where, 1)
    if obj["top_k"] > obj["experts"]:
        raise InputError("top_k", f"must be <= experts ({obj['experts']})", obj["top_k"], source=where)
    return obj


def _node(obj: Any, header: dict[str, Any], where: str) -> DraftNode:
    if not isinstance(obj, dict):
        raise InputError("node", "must be a JSON object", obj, source=where)
    for k in NODE_KEYS:
        if k not in obj:
            raise InputError(k, "is missing", show_value=False, source=where)
    ints = {k: _int(obj[k], k, where, 0) for k in ("prompt", "step", "node", "position", "token")}
    parent = _int(obj["parent"], "parent", where, -1)
    depth = _int(obj["depth"], "depth", where, 0)
    if depth > header["depth"]:
        raise InputError("depth", f"must be <= the tree depth {header['depth']}", depth, source=where)
    if (parent < 0) != (depth == 0):
        raise InputError("parent", "must be -1 exactly for the root (depth 0)", parent, source=where)
    if not isinstance(obj["greedy"], bool):
        raise InputError("greedy", "must be true or false", obj["greedy"], source=where)
    layers, k, n = header["moe_layers"], header["top_k"], header["experts"]
    ex = obj["experts"]
    if not isinstance(ex, list) or len(ex) != layers:
        raise InputError("experts", f"must be a list of {layers} top-k lists (one per MoE layer)",
                         f"{type(ex).__name__} of {len(ex) if isinstance(ex, list) else '-'}", source=where)
    rows: list[tuple[int, ...]] = []
    for i, ids in enumerate(ex):
        ok = (isinstance(ids, list) and len(ids) == k and len(set(ids)) == k
              and all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e < n for e in ids))
        if not ok:
            raise InputError(f"experts[{i}]", f"must be {k} distinct expert ids in 0..{n - 1}", ids, source=where)
        rows.append(tuple(sorted(ids)))
    return DraftNode(prompt=ints["prompt"], step=ints["step"], node=ints["node"], parent=parent, depth=depth,
                     position=ints["position"], token=ints["token"], greedy=obj["greedy"], experts=tuple(rows))


def parse_draft_log(lines: Iterable[str], source: str = "draft log") -> DraftLog:
    """A :class:`DraftLog` from the JSONL lines (header first); InputError names the line and the field."""
    header: dict[str, Any] | None = None
    nodes: list[DraftNode] = []
    seen: set[tuple[int, int, int]] = set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {n}"
        obj = parse_json(line, "line", where, "one JSON object")   # malformed, huge integers, nesting too deep
        if header is None:
            header = _header(obj, where)
            continue
        node = _node(obj, header, where)
        key = (node.prompt, node.step, node.node)
        if key in seen:
            raise InputError("node", f"must be unique within prompt {node.prompt} step {node.step}", node.node,
                             source=where)
        parent_key = (node.prompt, node.step, node.parent)
        if node.parent >= 0 and parent_key not in seen:
            raise InputError("parent", "must name a node listed before it in the same step", node.parent,
                             source=where)
        seen.add(key)
        nodes.append(node)
    if header is None:
        raise InputError(source, "is empty: the header line is missing", show_value=False)
    if not nodes:
        raise InputError(source, "has a header and no node lines", show_value=False)
    return DraftLog(header=header, nodes=tuple(nodes))


def read_draft_log(path: Path) -> DraftLog:
    """Read a JSONL file written by ``native_ref/gpu/log_draft_routing.py``."""
    text = read_input_text(path, "draft log", "log")     # a regular file, within the log cap, UTF-8
    return parse_draft_log(text.splitlines(), source=str(path))


@dataclass(frozen=True)
class OverlapStats:
    """Mean overlap ``|A & B| / k`` per MoE layer (``by_layer[kind]``) and over layers (``overall``),
    with the number of pairs each mean is over."""

    by_layer: dict[str, F64]
    overall: dict[str, float]
    pairs: dict[str, int]


def _sets(log: DraftLog) -> npt.NDArray[np.bool_]:
    """``[nodes, layers, experts]`` membership of each node's top-k."""
    n_exp = int(log.header["experts"])
    out = np.zeros((len(log.nodes), log.moe_layers, n_exp), dtype=bool)
    for i, node in enumerate(log.nodes):
        for layer, ids in enumerate(node.experts):
            out[i, layer, list(ids)] = True
    return out


def _pairs(log: DraftLog, seed: int) -> dict[str, list[tuple[int, int]]]:
    index = {(n.prompt, n.step, n.node): i for i, n in enumerate(log.nodes)}
    pairs: dict[str, list[tuple[int, int]]] = {k: [] for k in KINDS}
    children: dict[tuple[int, int, int], list[int]] = {}
    greedy_at: dict[tuple[int, int, int], int] = {}
    for i, n in enumerate(log.nodes):
        if n.parent >= 0:
            children.setdefault((n.prompt, n.step, n.parent), []).append(i)
            pairs["parent_child"].append((index[(n.prompt, n.step, n.parent)], i))
        if n.greedy:
            greedy_at.setdefault((n.prompt, n.step, n.depth), i)
    for group in children.values():
        pairs["sibling"] += [(a, b) for j, a in enumerate(group) for b in group[j + 1:]]
    for i, n in enumerate(log.nodes):
        true = greedy_at.get((n.prompt, n.step, n.depth))
        if not n.greedy and true is not None:
            pairs["wrong_vs_true"].append((true, i))
    by_pos: dict[tuple[int, int], int] = {}          # one greedy token per (prompt, position)
    for i, n in enumerate(log.nodes):
        if n.greedy:
            by_pos.setdefault((n.prompt, n.position), i)
    for (prompt, pos), i in sorted(by_pos.items()):
        for d in range(1, NEARBY_WINDOW + 1):
            j = by_pos.get((prompt, pos + d))
            if j is not None:
                pairs["nearby_true"].append((i, j))
    steps = np.array([n.prompt * 1_000_000 + n.step for n in log.nodes], dtype=np.int64)
    if len(set(steps.tolist())) > 1:
        rng = np.random.default_rng(seed)
        while len(pairs["random"]) < RANDOM_PAIRS:
            a, b = rng.integers(0, len(log.nodes), size=2)
            if steps[a] != steps[b]:
                pairs["random"].append((int(a), int(b)))
    return pairs


def overlap_stats(log: DraftLog, seed: int = 0) -> OverlapStats:
    """The overlaps of every kind of pair (a kind with no pair in the log is left out)."""
    sets = _sets(log)
    k = log.top_k
    by_layer: dict[str, F64] = {}
    counts: dict[str, int] = {}
    for kind, pairs in _pairs(log, seed).items():
        if not pairs:
            continue
        a = np.array([p[0] for p in pairs])
        b = np.array([p[1] for p in pairs])
        shared = (sets[a] & sets[b]).sum(axis=2) / k            # [pairs, layers]
        by_layer[kind] = shared.mean(axis=0)
        counts[kind] = len(pairs)
    return OverlapStats(by_layer=by_layer, overall={kd: float(v.mean()) for kd, v in by_layer.items()},
                        pairs=counts)


def _share(o: float, b: float, top: float = 1.0) -> float:
    return float(min(max((o - b) / (top - b), 0.0), 1.0)) if top > b else float("nan")


def routing_shares(stats: OverlapStats) -> dict[str, float]:
    """The routing families' parameters the overlaps imply (NaN where a pair kind is missing); clipped to [0, 1]."""
    o, b = stats.overall, stats.overall.get("random")
    nan = float("nan")
    if b is None:
        return {"alternative_layer_share": nan, "sibling_share": nan, "parent_share": nan,
                "mixture_context_free_share": nan}
    out = {"alternative_layer_share": _share(o["wrong_vs_true"], b) if "wrong_vs_true" in o else nan,
           "sibling_share": _share(o["sibling"], b) if "sibling" in o else nan,
           "parent_share": _share(o["parent_child"], b) if "parent_child" in o else nan}
    if "wrong_vs_true" in o and "nearby_true" in o and o["nearby_true"] > b:
        out["mixture_context_free_share"] = 1.0 - _share(o["wrong_vs_true"], b, o["nearby_true"])
    else:
        out["mixture_context_free_share"] = nan
    return out


def render_report(log: DraftLog, stats: OverlapStats) -> str:
    """A short plain-text report: overall overlaps, the implied shares, the per-layer range."""
    h = log.header
    lines = [f"draft log: {h['model']}, drafter {h['drafter']}, tree {h['depth']} x {h['width']}, "
             f"{len(log.nodes)} nodes, {h['moe_layers']} MoE layers, top-{h['top_k']} of {h['experts']}",
             "overlap |A & B| / k     mean    min layer  max layer  pairs"]
    for kind in KINDS:
        if kind in stats.by_layer:
            v = stats.by_layer[kind]
            lines.append(f"  {kind:<20} {stats.overall[kind]:7.4f}  {v.min():9.4f}  {v.max():9.4f}  "
                         f"{stats.pairs[kind]:5d}")
    lines.append("implied routing parameters (clipped to [0, 1]):")
    shares = routing_shares(stats)
    for name, value in shares.items():
        lines.append(f"  {name:<28} {'n/a' if np.isnan(value) else f'{value:.4f}'}")
    flags = [f"alternative:{shares['alternative_layer_share']:.4f}"] if not np.isnan(
        shares["alternative_layer_share"]) else []
    if not np.isnan(shares["mixture_context_free_share"]):
        flags.append(f"mixture:{shares['mixture_context_free_share']:.4f}")
    if flags:
        lines.append("  as moesim specdecode --draft-routing: " + " or ".join(flags))
    if "random" in stats.by_layer and "wrong_vs_true" in stats.by_layer:
        b, o = stats.by_layer["random"], stats.by_layer["wrong_vs_true"]
        per = np.clip((o - b) / np.maximum(1.0 - b, 1e-12), 0.0, 1.0)
        lines.append(f"  alternative layer_share by MoE layer: {per.min():.4f} (layer {int(per.argmin())}) .. "
                     f"{per.max():.4f} (layer {int(per.argmax())})")
    return "\n".join(lines)

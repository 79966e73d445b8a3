"""Adversarial campaign for issue 23: run bad and edge inputs through every command.

Run from the repository root:  PYTHONPATH=$PWD python3 validation/campaign_23.py
Writes validation/campaign_23.md (every outcome as JSON to $CAMPAIGN_JSON when set).
Every case is an argv with an expectation:

- ``ok``: a documented command that should exit 0;
- ``refuse``: an input that should end with exit 2 and one line naming the field (``names``).

Each outcome is classified as one of:

clean-ok, clean-refusal, accepted-nonsense (exit 0 on an input that should be refused),
internal-error (exit 1, another code, or a traceback), hang (timeout), multi-line error
(exit 2 with more than one stderr line), misblame (exit 2 whose message names none of the
fields the user set, or says "got None"), unexpected-refusal (exit 2 on a documented
command), node-replaced (an output aimed at a FIFO or character device replaced it).

Fixtures are built in a scratch folder under /tmp (broken profiles, models, traces, grids,
a FIFO and a character device node made with mknod there: never under /dev).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
T = Path(tempfile.mkdtemp(prefix="campaign23-"))
PROFILES = REPO / "device_profiles"
MODELS = REPO / "moesim" / "config" / "models"


@dataclass
class Case:
    cmd: str
    argv: list[str]
    expect: str  # "ok" or "refuse"
    names: tuple[str, ...] = ()  # the refusal should name one of these
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 90
    node: str | None = None  # a special file that must survive
    cwd: str | None = None
    note: str = ""
    forbid: tuple[str, ...] = ()  # a refusal must not say these


CASES: list[Case] = []


def ok(cmd, *argv, **kw):
    CASES.append(Case(cmd, list(argv), "ok", **kw))


def bad(cmd, names, *argv, **kw):
    if isinstance(names, str):
        names = (names,)
    CASES.append(Case(cmd, list(argv), "refuse", tuple(names), **kw))


# ---------------------------------------------------------------- fixtures
def edit_toml(src: Path, dst: Path, replace: dict[str, str] | None = None,
              drop: tuple[str, ...] = (), append: str = "") -> str:
    text = src.read_text()
    lines, done = [], set()
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key in drop and key not in done:
            done.add(key)
            continue
        if replace and key in replace and key not in done:
            done.add(key)
            line = f"{key} = {replace[key]}"
        lines.append(line)
    dst.write_text("\n".join(lines) + "\n" + append)
    return str(dst)


def fixtures() -> dict[str, str]:
    f: dict[str, str] = {}
    sd8 = PROFILES / "sd8-elite-gen5.toml"
    flame = MODELS / "flame-moe-290m.toml"
    prof = T / "profiles"
    prof.mkdir()
    mod = T / "models"
    mod.mkdir()
    # profiles
    f["p_overhead"] = edit_toml(sd8, prof / "overhead.toml",
                                {"runtime_overhead_MiB": "1e12", "name": '"p-overhead"'})
    f["p_usable_neg"] = edit_toml(sd8, prof / "usable_neg.toml",
                                  {"usable_GiB": "-1.0", "name": '"p-usneg"'})
    f["p_usable_gt_cap"] = edit_toml(sd8, prof / "usable_gt.toml",
                                     {"usable_GiB": "64.0", "name": '"p-usgt"'})
    f["p_bw_zero"] = edit_toml(sd8, prof / "bw0.toml",
                               {"effective_read_bw_GBps": "0.0", "name": '"p-bw0"'})
    f["p_bw_nan"] = edit_toml(sd8, prof / "bwnan.toml",
                              {"effective_read_bw_GBps": "nan", "name": '"p-bwnan"'})
    f["p_bw_inf"] = edit_toml(sd8, prof / "bwinf.toml",
                              {"peak_read_bw_GBps": "inf", "name": '"p-bwinf"'})
    f["p_bw_str"] = edit_toml(sd8, prof / "bwstr.toml",
                              {"effective_read_bw_GBps": '"fast"', "name": '"p-bwstr"'})
    f["p_missing_ufs_bw"] = edit_toml(sd8, prof / "noufs.toml", drop=("effective_read_bw_GBps",),
                                      replace={"name": '"p-noufs"'})
    f["p_missing_name"] = edit_toml(sd8, prof / "noname.toml", drop=("name",))
    f["p_wrong_unit"] = edit_toml(sd8, prof / "unit.toml", drop=("usable_GiB",),
                                  replace={"name": '"p-unit"'}, append="")
    # wrong unit: usable_MB instead of usable_GiB (inserted in [memory])
    txt = Path(f["p_wrong_unit"]).read_text().replace("[memory]\n", "[memory]\nusable_MB = 15000.0\n", 1)
    Path(f["p_wrong_unit"]).write_text(txt)
    f["p_queue_zero"] = edit_toml(sd8, prof / "q0.toml",
                                  {"default_queue_depth_count": "0", "name": '"p-q0"'})
    f["p_queue_float"] = edit_toml(sd8, prof / "qf.toml",
                                   {"queue_slots_count": "2.5", "name": '"p-qf"'})
    f["p_kind"] = edit_toml(sd8, prof / "kind.toml", {"kind": '"toaster"', "name": '"p-kind"'})
    f["p_arena_tiny"] = edit_toml(sd8, prof / "arena.toml",
                                  {"max_mapped_GiB": "0.001", "name": '"p-arena"'})
    f["p_clock_huge"] = edit_toml(sd8, prof / "clock.toml",
                                  {"clock_GHz": "1e308", "name": '"p-clock"'})
    f["p_catalog_name"] = edit_toml(sd8, prof / "cat.toml", {"name": '"h200x8-hf"'})
    f["p_unknown_key"] = edit_toml(sd8, prof / "unk.toml", {"name": '"p-unk"'},
                                   append="\n[memory2]\nfoo_GiB = 1.0\n")
    (prof / "syntax.toml").write_text(sd8.read_text()[:500] + "\n[memory\nusable = \n")
    f["p_syntax"] = str(prof / "syntax.toml")
    (prof / "empty.toml").write_text("")
    f["p_empty"] = str(prof / "empty.toml")
    (prof / "bin.toml").write_bytes(os.urandom(256))
    f["p_binary"] = str(prof / "bin.toml")
    # models
    f["m_hidden_huge"] = edit_toml(flame, mod / "hidden.toml",
                                   {"hidden_size": "10000000000", "name": '"m-hidden"'})
    f["m_hidden_float"] = edit_toml(flame, mod / "hiddenf.toml",
                                    {"hidden_size": "1e10", "name": '"m-hiddenf"'})
    f["m_hidden_zero"] = edit_toml(flame, mod / "hidden0.toml",
                                   {"hidden_size": "0", "name": '"m-hidden0"'})
    f["m_topk_gt"] = edit_toml(flame, mod / "topk.toml", {"top_k": "100", "name": '"m-topk"'})
    f["m_topk_zero"] = edit_toml(flame, mod / "topk0.toml", {"top_k": "0", "name": '"m-topk0"'})
    f["m_layers_neg"] = edit_toml(flame, mod / "layers.toml",
                                  {"num_layers": "-3", "name": '"m-layers"'})
    f["m_dense_gt"] = edit_toml(flame, mod / "dense.toml",
                                {"num_dense_layers": "20", "name": '"m-dense"'})
    f["m_experts_str"] = edit_toml(flame, mod / "estr.toml",
                                   {"num_routed_experts": '"many"', "name": '"m-estr"'})
    f["m_missing_moe"] = edit_toml(flame, mod / "nomoe.toml",
                                   drop=("num_routed_experts", "top_k", "expert_intermediate_size",
                                         "num_shared_experts"), replace={"name": '"m-nomoe"'})
    f["m_kv_heads"] = edit_toml(flame, mod / "kv.toml",
                                {"num_kv_heads": "5", "name": '"m-kv"'})  # 16 % 5 != 0
    f["m_attn_kind"] = edit_toml(flame, mod / "attn.toml", {"kind": '"quantum"', "name": '"m-attn"'})
    f["m_catalog_name"] = edit_toml(flame, mod / "catname.toml", {"hidden_size": "2048"})
    f["m_valid"] = edit_toml(flame, mod / "valid.toml", {"name": '"my-moe"'})
    f["m_format"] = edit_toml(flame, mod / "fmt.toml", {"default": '"FP3"', "name": '"m-fmt"'})
    (mod / "empty.toml").write_text("")
    f["m_empty"] = str(mod / "empty.toml")
    # outputs
    (T / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(T / "fifo")
    f["fifo"] = str(T / "fifo")
    nodes = T / "nodes"
    nodes.mkdir()
    os.mknod(nodes / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    f["chardev"] = str(nodes / "null")
    (T / "adir").mkdir()
    f["dir"] = str(T / "adir")
    ro = T / "ro"
    ro.mkdir()
    f["ro_dir"] = str(ro)
    # traces
    r = subprocess.run([PY, "-m", "moesim", "trace", "synth", "--model", "flame-moe-290m",
                        "--tokens", "1024", "-o", str(T / "good.parquet")],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    f["trace"] = str(T / "good.parquet")
    data = (T / "good.parquet").read_bytes()
    (T / "trunc.parquet").write_bytes(data[: len(data) // 2])
    f["t_trunc"] = str(T / "trunc.parquet")
    (T / "json.parquet").write_text(json.dumps({"token": [1, 2], "layer": [0, 0]}))
    f["t_json"] = str(T / "json.parquet")
    (T / "empty.parquet").write_bytes(b"")
    f["t_empty"] = str(T / "empty.parquet")
    import pandas as pd
    df = pd.read_parquet(T / "good.parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq
    meta = pq.read_schema(T / "good.parquet").metadata

    def keep_meta(frame, path):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(meta), path)

    keep_meta(df.rename(columns={"experts": "exps"}), T / "wrongcol.parquet")
    f["t_wrongcol"] = str(T / "wrongcol.parquet")
    keep_meta(df.head(0), T / "zero.parquet")
    f["t_zerorows"] = str(T / "zero.parquet")
    d2 = df.copy()
    d2["experts"] = d2["experts"].apply(lambda e: [9999] * len(e))
    keep_meta(d2, T / "bigid.parquet")
    d3 = df.copy()
    d3["layer"] = d3["layer"] + 100
    keep_meta(d3, T / "badlayer.parquet")
    f["t_badlayer"] = str(T / "badlayer.parquet")
    f["t_bigid"] = str(T / "bigid.parquet")
    pd.DataFrame({"a": [1, 2, 3]}).to_parquet(T / "other.parquet")
    f["t_other"] = str(T / "other.parquet")
    # the good trace renamed: a canonical trace of flame replayed on olmoe
    # saved results for rerun
    r = subprocess.run([PY, "-m", "moesim", "prefill", "--model", "flame-moe-290m", "--tokens",
                        "256", "--json"], cwd=REPO, capture_output=True, text=True)
    (T / "r.json").write_text(r.stdout)
    res2 = json.loads(r.stdout)
    res2["config"]["run"]["tokens"] = -5
    (T / "r_neg.json").write_text(json.dumps(res2))
    res3 = json.loads(r.stdout)
    del res3["config"]
    (T / "r_noconf.json").write_text(json.dumps(res3))
    res4 = json.loads(r.stdout)
    res4["config"]["workload"] = "brew-coffee"
    (T / "r_wl.json").write_text(json.dumps(res4))
    res5 = json.loads(r.stdout)
    res5["config"]["run"]["device"] = "nope-device"
    (T / "r_dev.json").write_text(json.dumps(res5))
    (T / "r_trunc.json").write_text(r.stdout[: len(r.stdout) // 2])
    (T / "r_list.json").write_text("[1, 2, 3]")
    (T / "r_text.json").write_text("hello\n")
    f.update({k: str(T / f"{k}.json") for k in
              ("r", "r_neg", "r_noconf", "r_wl", "r_dev", "r_trunc", "r_list", "r_text")})
    # grids
    base = (REPO / "docs/examples/sweep-2gib.toml").read_text()
    g = T / "grids"
    g.mkdir()

    def grid(name, text):
        (g / f"{name}.toml").write_text(text)
        f[f"g_{name}"] = str(g / f"{name}.toml")

    small = ('[fixed]\nworkload = "prefill"\ndevice = "sd8-elite-gen5"\nmemory_budget_GiB = 2.0\n'
             '[axes]\nmodel = ["flame-moe-290m"]\ntokens = [256, 512]\npolicy = ["estream", "resident"]\n')
    grid("small", small)
    grid("inf_budget", small.replace("memory_budget_GiB = 2.0", "memory_budget_GiB = inf"))
    grid("nan_budget", small.replace("memory_budget_GiB = 2.0", "memory_budget_GiB = nan"))
    grid("neg_budget", small.replace("memory_budget_GiB = 2.0", "memory_budget_GiB = -2.0"))
    grid("gpu_device", small.replace('device = "sd8-elite-gen5"', 'device = "h200x8-hf"'))
    grid("empty_axis", small.replace('tokens = [256, 512]', 'tokens = []'))
    grid("bad_token", small.replace('tokens = [256, 512]', 'tokens = [256, "many"]'))
    grid("zero_token", small.replace('tokens = [256, 512]', 'tokens = [0, 512]'))
    grid("neg_token", small.replace('tokens = [256, 512]', 'tokens = [-1]'))
    grid("huge_token", small.replace('tokens = [256, 512]', 'tokens = [100000000000]'))
    grid("float_token", small.replace('tokens = [256, 512]', 'tokens = [256.5]'))
    grid("unknown_policy", small.replace('policy = ["estream", "resident"]', 'policy = ["warp"]'))
    grid("unknown_model", small.replace('model = ["flame-moe-290m"]', 'model = ["gpt-9"]'))
    grid("unknown_param", small + 'flux_capacitor = [1, 2]\n')
    grid("unknown_set", small + 'ufs.warp_GBps = [1.0]\n')
    grid("set_zero", small + 'ufs.effective_read_bw_GBps = [0.0]\n')
    grid("set_neg", small + 'ufs.effective_read_bw_GBps = [-4.0]\n')
    grid("no_workload", small.replace('workload = "prefill"\n', ''))
    grid("bad_workload", small.replace('workload = "prefill"', 'workload = "training"'))
    grid("both", small.replace('[axes]\n', '[axes]\ndevice = ["sd8-elite-gen5"]\n'))
    grid("no_axes", small.split("[axes]")[0])
    grid("syntax", small[:-30] + '[[[')
    grid("empty", "")
    grid("huge", small.replace('tokens = [256, 512]', 'tokens = [' + ",".join(str(256 + i) for i in range(2000)) + ']')
         .replace('model = ["flame-moe-290m"]', 'model = ["flame-moe-290m", "olmoe-1b-7b", "granite-3.0-3b-a800m"]'))
    spec = ('[fixed]\nworkload = "specdecode"\ndevice = "h200x8-hf"\nmodel = "gpt-oss-120b"\npasses = 1\n'
            '[axes]\ngamma = [2, 4]\n')
    grid("selector", spec)
    grid("spec_acc7", spec + 'predictor = ["accuracy:7"]\n')
    grid("spec_routing", spec + 'draft_routing = ["teleport"]\n')
    grid("spec_phone", spec.replace('device = "h200x8-hf"', 'device = "sd8-elite-gen5"'))
    grid("spec_gamma0", spec.replace("gamma = [2, 4]", "gamma = [0]"))
    grid("spec_prefill_param", spec + 'policy = ["estream"]\n')
    grid("prefill_spec_param", small + 'gamma = [4]\n')
    grid("docs_example", base)
    # a sweep result for plot
    r = subprocess.run([PY, "-m", "moesim", "sweep", f["g_small"], "-o", str(T / "res.parquet"),
                        "--workers", "1", "--quiet"], cwd=REPO, capture_output=True, text=True)
    f["res"] = str(T / "res.parquet")
    f["res_ok"] = str(r.returncode)
    # MOESIM_CACHE_DIR unwritable: a file where a folder should be
    (T / "cachefile").write_text("x")
    f["cache_file"] = str(T / "cachefile")
    return f


# ---------------------------------------------------------------- cases
def build(f: dict[str, str]) -> None:
    M = ["--model", "flame-moe-290m"]
    # docs "then try" commands and the README's examples
    ok("docs", "--version")
    ok("docs", "--help")
    for c in ("prefill", "compare", "autoconfig", "specdecode", "decode", "sweep", "plot", "rerun",
              "trace", "validate", "models", "devices", "calibrate"):
        ok("help", c, "--help")
    for c in ("import", "stats", "synth", "assemble", "info"):
        ok("help", "trace", c, "--help")
    for c in ("estream", "host"):
        ok("help", "calibrate", c, "--help")
    ok("docs", "prefill")
    ok("docs", "models")
    ok("docs", "devices")
    ok("docs", "compare", "--tokens", "256,4096")
    ok("docs", "compare", "--tokens", "256,4096", "--plot", str(T / "plane.png"))
    ok("docs", "autoconfig", "--memory-budget-gib", "0.7", "--verify", timeout=120)
    ok("docs", "specdecode", "--model", "gpt-oss-120b", "--selector", "ecospec")
    ok("docs", "decode", "--model", "mixtral-8x7b")
    ok("docs", "decode", "--model", "mixtral-8x7b", "--selector", "cache-aware")
    ok("docs", "decode", "--model", "mixtral-8x7b", "--autoconfig", note="README form, no budget")
    ok("docs", "compare", "--policies", "estream,cpu", note="issue 23 item 9")
    ok("docs", "rerun", f["r"])
    ok("docs", "sweep", f["g_docs_example"], "-o", str(T / "docs_sweep.parquet"), "--quiet",
       timeout=240)
    ok("docs", "plot", f["res"], "--x", "tokens", "--hue", "policy", "-o", str(T / "p.png"))
    ok("docs", "plot", f["res"], "--kind", "tradeoff", "-o", str(T / "t.png"))
    ok("docs", "trace", "stats", f["trace"])
    ok("docs", "trace", "info", f["trace"])
    ok("docs", "devices", "--device", "sd8-elite-gen5")
    ok("docs", "models", "--model", "olmoe-1b-7b")

    # ---- prefill numbers
    for v in ("0", "-1", "nan", "inf", "1e308", "99999999999999999999", "1.5", "abc", "", " "):
        bad("prefill", "--tokens", "prefill", *M, "--tokens", v)
    bad("prefill", "--tokens", "prefill", *M, "--tokens", "10000000")
    bad("prefill", ("--tokens", "KV", "kv"), "prefill", "--model", "olmoe-1b-7b", "--tokens", "500000",
        note="issue: memory_budget_GiB ... got None")
    for opt in ("--group-size", "--banks", "--queue-depth"):
        for v in ("0", "-1", "100000", "abc"):
            bad("prefill", opt, "prefill", *M, "--tokens", "256", opt, v)
    for v in ("0", "-1", "nan", "inf", "-inf", "1e-9", "1e308", "abc", ""):
        bad("prefill", "--memory-budget-gib", "prefill", *M, "--tokens", "256",
            "--memory-budget-gib", v)
    bad("prefill", ("--group-size", "resident"), "prefill", *M, "--tokens", "256", "--policy",
        "resident", "--group-size", "4", note="estream-only option with resident")
    bad("prefill", ("--banks", "cpu"), "prefill", *M, "--tokens", "256", "--policy", "cpu",
        "--banks", "4")
    bad("prefill", ("--prefetch", "naive"), "prefill", *M, "--tokens", "256", "--policy", "naive",
        "--prefetch", "after-routing")
    bad("prefill", "--policy", "prefill", *M, "--policy", "warp")
    bad("prefill", "--model", "prefill", "--model", "gpt-9")
    bad("prefill", "--model", "prefill", "--model", "")
    bad("prefill", "--device", "prefill", *M, "--device", "nokia-3310")
    bad("prefill", "--device", "prefill", *M, "--device", "h200x8-hf", note="GPU device for phone prefill")
    bad("prefill", "--device", "prefill", *M, "--device", "")
    bad("prefill", "--device", "prefill", *M, "--device", f["dir"])
    for v in ("ufs.effective_read_bw_GBps=0", "ufs.effective_read_bw_GBps=-3",
              "ufs.effective_read_bw_GBps=nan", "ufs.effective_read_bw_GBps=inf",
              "ufs.effective_read_bw_GBps=fast", "ufs.warp_GBps=3", "nosuch.field=1",
              "ufs.effective_read_bw_GBps", "=3", "memory.runtime_overhead_MiB=1e12",
              "arena.max_mapped_GiB=0.001", "memory.usable_GiB=0", "ufs.default_queue_depth_count=0",
              "ufs.default_queue_depth_count=2.5", "name=foo", "kind=gpu"):
        key = v.split("=")[0] or "--set"
        bad("prefill", (key, "--set"), "prefill", *M, "--tokens", "256", "--set", v)
    for v in ("-1", "abc", "1e3", "99999999999999999999999"):
        bad("prefill", "--seed", "prefill", *M, "--tokens", "256", "--seed", v)
    # profiles and models given as files
    for k in ("p_overhead", "p_usable_neg", "p_usable_gt_cap", "p_bw_zero", "p_bw_nan", "p_bw_inf",
              "p_bw_str", "p_missing_ufs_bw", "p_missing_name", "p_wrong_unit", "p_queue_zero",
              "p_queue_float", "p_kind", "p_arena_tiny", "p_clock_huge", "p_catalog_name",
              "p_unknown_key", "p_syntax", "p_empty", "p_binary"):
        field_hint = {
            "p_overhead": "runtime_overhead_MiB", "p_usable_neg": "usable_GiB",
            "p_usable_gt_cap": "usable_GiB", "p_bw_zero": "effective_read_bw_GBps",
            "p_bw_nan": "effective_read_bw_GBps", "p_bw_inf": "peak_read_bw_GBps",
            "p_bw_str": "effective_read_bw_GBps", "p_missing_ufs_bw": "effective_read_bw_GBps",
            "p_missing_name": "name", "p_wrong_unit": ("usable_MB", "usable_GiB"),
            "p_queue_zero": "default_queue_depth_count", "p_queue_float": "queue_slots_count",
            "p_kind": "kind", "p_arena_tiny": "max_mapped_GiB", "p_clock_huge": "clock_GHz",
            "p_catalog_name": ("name", "h200x8-hf"), "p_unknown_key": ("memory2", "foo_GiB"),
            "p_syntax": ("syntax.toml", "TOML", "line"), "p_empty": ("empty.toml", "name", "kind"),
            "p_binary": ("bin.toml", "TOML", "UTF"),
        }[k]
        bad("profile", field_hint, "prefill", *M, "--tokens", "256", "--device", f[k], note=k)
        if k in ("p_overhead", "p_bw_nan", "p_usable_neg", "p_clock_huge", "p_catalog_name"):
            bad("profile", field_hint, "devices", "--device", f[k], note=k)
    for k, hint in (("m_hidden_huge", "hidden_size"), ("m_hidden_float", "hidden_size"),
                    ("m_hidden_zero", "hidden_size"), ("m_topk_gt", "top_k"),
                    ("m_topk_zero", "top_k"), ("m_layers_neg", "num_layers"),
                    ("m_dense_gt", "num_dense_layers"), ("m_experts_str", "num_routed_experts"),
                    ("m_missing_moe", ("num_routed_experts", "top_k", "moe")),
                    ("m_kv_heads", "num_kv_heads"), ("m_attn_kind", "kind"),
                    ("m_catalog_name", ("name", "flame-moe-290m")), ("m_format", ("default", "FP3")),
                    ("m_empty", ("empty.toml", "name"))):
        bad("model", hint, "prefill", "--model", f[k], "--tokens", "256", note=k)
        if k in ("m_hidden_huge", "m_topk_gt", "m_catalog_name", "m_layers_neg"):
            bad("model", hint, "models", "--model", f[k], note=k)
    # traces
    for k, hint in (("t_trunc", ("trunc.parquet", "parquet")), ("t_json", ("json.parquet", "parquet")),
                    ("t_empty", ("empty.parquet",)), ("t_wrongcol", ("experts", "exps")),
                    ("t_zerorows", ("zero.parquet", "token", "empty")),
                    ("t_bigid", ("expert", "9999")), ("t_other", ("other.parquet", "column", "token"))):
        bad("trace", hint, "prefill", *M, "--tokens", "256", "--trace", f[k], note=k)
    bad("trace", ("--trace", "flame", "olmoe"), "prefill", "--model", "olmoe-1b-7b", "--tokens", "256",
        "--trace", f["trace"], note="flame trace on olmoe")
    ok("trace", "prefill", *M, "--tokens", "4096", "--trace", f["trace"],
       note="trace shorter than the prompt: repeated, and said so")
    bad("trace", ("layer", "badlayer"), "prefill", *M, "--tokens", "256", "--trace", f["t_badlayer"],
        note="layer ids beyond the model")
    # a valid custom model file (README: --model NAME|PATH)
    ok("model", "prefill", "--model", f["m_valid"], "--tokens", "256", note="custom model file")
    ok("model", "prefill", "--model", f["m_valid"], "--tokens", "256", "--policy", "resident",
       note="custom model file")
    ok("model", "compare", "--model", f["m_valid"], "--tokens", "256", note="custom model file")
    ok("model", "autoconfig", "--model", f["m_valid"], "--tokens", "256", "--memory-budget-gib", "1",
       note="custom model file")
    ok("model", "decode", "--model", f["m_valid"], "--tokens", "8", note="custom model file")
    ok("model", "trace", "synth", "--model", f["m_valid"], "--tokens", "256", "-o",
       str(T / "my.parquet"), note="custom model file")
    ok("model", "models", "--model", f["m_valid"])
    bad("trace", "--trace", "prefill", *M, "--tokens", "256", "--trace", "/nonexistent/x.parquet")
    bad("trace", "--trace", "prefill", *M, "--tokens", "256", "--trace", f["dir"])
    # outputs
    for k, hint in (("fifo", ("fifo", "FIFO")), ("dir", ("adir", "folder", "directory")),):
        bad("output", hint, "prefill", *M, "--tokens", "256", "--timeline", f[k])
    ok("output", "prefill", *M, "--tokens", "256", "--timeline", f["chardev"], node=f["chardev"],
       note="write through a char device")
    ok("output", "prefill", *M, "--tokens", "256", "--timeline", "/dev/null", node="/dev/null")
    bad("output", ("/dev/full", "space", "ENOSPC"), "prefill", *M, "--tokens", "256", "--timeline",
        "/dev/full", node="/dev/full")
    bad("output", ("missing", "folder", "No such"), "prefill", *M, "--tokens", "256", "--timeline",
        str(T / "missing" / "t.json"))
    bad("output", ("--timeline", "name", "long"), "prefill", *M, "--tokens", "256", "--timeline",
        str(T / ("x" * 300 + ".json")))
    bad("output", ("--timeline", "empty", "''"), "prefill", *M, "--tokens", "256", "--timeline", "")
    # env vars
    bad("env", "MOESIM_SHARED_TRACES", "prefill", *M, "--tokens", "256",
        env={"MOESIM_SHARED_TRACES": "/nonexistent"}, note="silent synthetic fallback")
    bad("env", "MOESIM_SHARED_TRACES", "prefill", *M, "--tokens", "256",
        env={"MOESIM_SHARED_TRACES": f["trace"]}, note="a file, not a folder")
    ok("env", "prefill", "--model", "qwen3-30b-a3b", "--tokens", "512",
       env={"MOESIM_CACHE_DIR": f["cache_file"]}, note="unwritable cache: warn, still run")
    ok("env", "prefill", "--model", "qwen3-30b-a3b", "--tokens", "512",
       env={"MOESIM_CACHE_DIR": "/proc/moesim-cache"}, note="unwritable cache: warn, still run")
    ok("env", "prefill", *M, "--tokens", "256", env={"MOESIM_CACHE_DIR": ""})

    # ---- compare
    for v in ("", "256,,4096", ",", "0", "-1", "abc", "256;4096", "nan", "1e308", "256,256"):
        bad("compare", "--tokens", "compare", *M, "--tokens", v)
    for v in ("", ",", "estream,warp", "estream,estream", "ESTREAM"):
        bad("compare", "--policies", "compare", *M, "--tokens", "256", "--policies", v)
    bad("compare", "--baseline", "compare", *M, "--tokens", "256", "--policies", "estream,cpu",
        "--baseline", "resident")
    bad("compare", "--baseline", "compare", *M, "--tokens", "256", "--baseline", "warp")
    bad("compare", "--device", "compare", *M, "--tokens", "256", "--device", "h200x8-hf")
    bad("compare", ("--set", "effective_read_bw_GBps"), "compare", *M, "--tokens", "256", "--set",
        "ufs.effective_read_bw_GBps=0")
    bad("compare", ("--set", "ufs.nope"), "compare", *M, "--tokens", "256", "--set", "ufs.nope=1")
    for v in ("0.0001", "0", "-1", "nan", "inf"):
        bad("compare", "--memory-budget-gib", "compare", *M, "--tokens", "256",
            "--memory-budget-gib", v)
    bad("compare", ("--plot", ".txt", "suffix"), "compare", *M, "--tokens", "256", "--plot",
        str(T / "plane.txt"))
    bad("compare", ("--plot", "fifo"), "compare", *M, "--tokens", "256", "--plot", f["fifo"])
    bad("compare", ("--plot", "adir"), "compare", *M, "--tokens", "256", "--plot", f["dir"])
    bad("compare", ("--plot", "missing"), "compare", *M, "--tokens", "256", "--plot",
        str(T / "missing" / "p.png"))

    # ---- autoconfig
    for v in ("0", "-1", "nan", "inf", "1e308", "0.0001", "abc", ""):
        bad("autoconfig", "--memory-budget-gib", "autoconfig", *M, "--tokens", "256",
            "--memory-budget-gib", v)
    bad("autoconfig", "--memory-budget-gib", "autoconfig", *M, "--tokens", "256")
    for v in ("0", "-1", "10000000", "abc"):
        bad("autoconfig", "--tokens", "autoconfig", *M, "--memory-budget-gib", "1", "--tokens", v)
    bad("autoconfig", "--device", "autoconfig", *M, "--memory-budget-gib", "1", "--device", "h200x8-hf")
    bad("autoconfig", ("--trace", "json.parquet"), "autoconfig", *M, "--memory-budget-gib", "1", "--trace",
        f["t_json"])
    bad("autoconfig", ("--plot", "fifo"), "autoconfig", *M, "--memory-budget-gib", "1", "--plot",
        f["fifo"])
    bad("autoconfig", ("--plot", ".gif", "suffix"), "autoconfig", *M, "--memory-budget-gib", "1",
        "--plot", str(T / "a.gif"))
    bad("autoconfig", ("runtime_overhead_MiB",), "autoconfig", *M, "--memory-budget-gib", "1",
        "--device", f["p_overhead"])

    # ---- specdecode
    S = ["specdecode", "--model", "gpt-oss-120b", "--passes", "1"]
    ok("specdecode", *S, "--gamma", "1", note="gamma 1 is plain decoding, the documented baseline")
    for opt, vals in (("--gamma", ("0", "-1", "100000", "abc")),
                      ("--depth", ("0", "-1", "100000")),
                      ("--width", ("0", "-1", "100000")),
                      ("--epsilon", ("0", "-1", "nan", "inf")),
                      ("--passes", ("0", "-1", "1000000000")),
                      ("--batch-size", ("0", "-1", "1000000")),
                      ("--t-draft-ms", ("-1", "nan", "inf")),
                      ("--t-pred-ms", ("-1", "nan")),
                      ("--draft-mu", ("nan", "inf", "-1e308")),
                      ("--temperature", ("0.5", "-1", "2", "nan")),
                      ("--predictor", ("accuracy:7", "accuracy:-0.1", "accuracy:nan", "accuracy:",
                                       "learned:0", "learned:-1", "learned:abc", "psychic", "")),
                      ("--draft-routing", ("teleport", "mixture:2", "mixture:-1", "nearby:0",
                                           "nearby:-3", "")),
                      ("--selector", ("warp", "")),
                      ("--requests", ("no-such-label", "")),
                      ("--gamma-sweep", ("", "2,,4", "0,2", "abc", "-1"))):
        for v in vals:
            bad("specdecode", opt, *S, opt, v)
    bad("specdecode", "--device", *S, "--device", "sd8-elite-gen5")
    bad("specdecode", "--draft", "specdecode", "--model", "flame-moe-290m", "--draft", "mtp",
        "--passes", "1", note="mtp on a model without MTP")
    bad("specdecode", "--plot", *S, "--plot", str(T / "s.png"), note="--plot without --gamma-sweep")
    bad("specdecode", ("--trace", "trunc.parquet"), *S, "--trace", f["t_trunc"])
    bad("specdecode", ("--trace", "flame", "gpt-oss"), *S, "--trace", f["trace"])
    bad("specdecode", ("--set", "per_active_expert_us"), *S, "--set", "runtime.per_active_expert_us=-20")
    bad("specdecode", ("--set", "per_active_expert_us"), *S, "--set", "runtime.per_active_expert_us=nan")

    # ---- decode
    D = ["decode", "--model", "olmoe-1b-7b", "--tokens", "16"]
    for opt, vals in (("--tokens", ("0", "-1", "abc", "1e3")),
                      ("--context", ("-1", "100000000", "abc")),
                      ("--cache-gib", ("-1", "nan", "inf", "0", "1e308", "1000")),
                      ("--pinned-share", ("-0.1", "1.5", "nan")),
                      ("--read-group-size", ("0", "-1", "100000")),
                      ("--gamma", ("0", "-1", "100000")),
                      ("--depth", ("0", "-1")),
                      ("--width", ("0", "-1")),
                      ("--queue-depth", ("0", "-1", "100000")),
                      ("--warmup-tokens", ("-1", "100000000")),
                      ("--temperature", ("0.5", "nan")),
                      ("--predictor", ("psychic", "accuracy:7", "")),
                      ("--draft-routing", ("teleport", "")),
                      ("--memory-budget-gib", ("0", "-1", "nan"))):
        for v in vals:
            bad("decode", opt, *D, opt, v)
    bad("decode", "--gamma", *D, "--gamma", "6", note="--gamma without --selector")
    bad("decode", "--depth", *D, "--depth", "5", note="--depth without --selector")
    bad("decode", "--cache-gib", *D, "--cache-policy", "none", "--cache-gib", "2")
    bad("decode", "--pinned-share", *D, "--cache-policy", "lru", "--pinned-share", "0.9")
    bad("decode", "--pinned-by", *D, "--cache-policy", "lfu", "--pinned-by", "frequency")
    bad("decode", "--expert-format", *D, "--backend", "npu", "--expert-format", "Q4_K")
    bad("decode", "--device", *D, "--device", "h200x8-hf", forbid=("for prefill",))
    bad("decode", "--memory-budget-gib", *D, "--memory-budget-gib", "4", note="budget without --autoconfig")
    bad("decode", "--check", *D, "--check", note="--check without --autoconfig")
    bad("decode", ("--autoconfig", "--cache-gib"), *D, "--autoconfig", "--memory-budget-gib", "4",
        "--cache-gib", "1")
    bad("decode", ("--trace", "json.parquet"), *D, "--trace", f["t_json"])
    bad("decode", ("--timeline", "fifo"), *D, "--timeline", f["fifo"])
    ok("decode", *D, "--timeline", f["chardev"], node=f["chardev"])
    bad("decode", "--model", "decode", "--model", f["m_hidden_huge"], "--tokens", "4")
    bad("decode", "runtime_overhead_MiB", *D, "--device", f["p_overhead"])

    # ---- sweep
    def sw(name, hint, *extra, **kw):
        bad("sweep", hint, "sweep", f[f"g_{name}"], "-o", str(T / f"sw_{name}_{len(CASES)}.parquet"),
            "--workers", "1", "--quiet", *extra, note=name, **kw)

    for name, hint in (("inf_budget", "memory_budget_GiB"), ("nan_budget", "memory_budget_GiB"),
                       ("neg_budget", "memory_budget_GiB"), ("gpu_device", "device"),
                       ("empty_axis", "tokens"), ("bad_token", "tokens"), ("zero_token", "tokens"),
                       ("neg_token", "tokens"), ("huge_token", "tokens"), ("float_token", "tokens"),
                       ("unknown_policy", "policy"), ("unknown_model", "model"),
                       ("unknown_param", "flux_capacitor"), ("unknown_set", "warp_GBps"),
                       ("set_zero", "effective_read_bw_GBps"), ("set_neg", "effective_read_bw_GBps"),
                       ("no_workload", "workload"), ("bad_workload", "workload"), ("both", "device"),
("syntax", ("TOML", "line")), ("empty", ("workload", "empty")),
                       ("huge", ("points", "--max-points")), ("spec_acc7", "predictor"),
                       ("spec_routing", "draft_routing"), ("spec_phone", "device"),
                       ("spec_gamma0", "gamma"), ("spec_prefill_param", "policy"),
                       ("prefill_spec_param", "gamma")):
        sw(name, hint)
    ok("sweep", "sweep", f["g_small"], "-o", str(T / "sw_ok.parquet"), "--workers", "1", "--quiet")
    ok("sweep", "sweep", f["g_no_axes"], "-o", str(T / "sw_noaxes_ok.parquet"), "--workers", "1", "--quiet",
       note="no [axes]: one point")
    ok("sweep", "sweep", f["g_spec"], "-o", str(T / "sw_spec.parquet"), "--workers", "1", "--quiet")
    ok("sweep", "sweep", f["g_small"], "-o", f["res"], "--workers", "1", "--quiet",
       note="the same grid's results are replaced, with a note on stderr (docs/sweep.md)")
    bad("sweep", ("-o", "--output", "fifo"), "sweep", f["g_small"], "-o", f["fifo"], "--workers", "1",
        "--quiet")
    bad("sweep", ("-o", "--output", "adir", "folder"), "sweep", f["g_small"], "-o", f["dir"],
        "--workers", "1", "--quiet")
    bad("sweep", ("-o", "--output", "null", "regular"), "sweep", f["g_small"], "-o", f["chardev"],
        "--workers", "1", "--quiet", node=f["chardev"])
    bad("sweep", ("-o", "missing"), "sweep", f["g_small"], "-o", str(T / "missing" / "x.parquet"),
        "--workers", "1", "--quiet")
    bad("sweep", ("-o", ".csv", "parquet"), "sweep", f["g_small"], "-o", str(T / "x.csv"),
        "--workers", "1", "--quiet")
    bad("sweep", "--workers", "sweep", f["g_small"], "-o", str(T / "w0.parquet"), "--workers", "0")
    bad("sweep", "--workers", "sweep", f["g_small"], "-o", str(T / "w1.parquet"), "--workers", "100000")
    bad("sweep", "--max-points", "sweep", f["g_small"], "-o", str(T / "mp.parquet"), "--max-points", "0")
    bad("sweep", "--scheduler", "sweep", f["g_small"], "-o", str(T / "sch.parquet"), "--scheduler",
        "tcp://127.0.0.1:1", timeout=60)
    bad("sweep", "--scheduler", "sweep", f["g_small"], "-o", str(T / "sch2.parquet"), "--scheduler",
        "not a url")
    bad("sweep", ("GRID", "nope.toml"), "sweep", str(T / "nope.toml"), "-o", str(T / "n.parquet"))
    bad("sweep", ("GRID", "adir"), "sweep", f["dir"], "-o", str(T / "n2.parquet"))
    ok("sweep", "sweep", f["g_small"], "-o", str(T / "never.parquet"), "--resume",
       "--workers", "1", "--quiet", note="--resume with nothing to resume")

    # ---- plot
    P = ["plot", f["res"]]
    bad("plot", "--x", *P, "-o", str(T / "pl1.png"), note="line without --x")
    bad("plot", "--x", *P, "--x", "nonexistent", "-o", str(T / "pl2.png"))
    bad("plot", "--y", *P, "--x", "tokens", "--y", "policy", "-o", str(T / "pl3.png"),
        note="--y text column")
    bad("plot", "--y", *P, "--x", "tokens", "--y", "model", "-o", str(T / "pl3b.png"))
    bad("plot", "--hue", *P, "--x", "tokens", "--hue", "nonexistent", "-o", str(T / "pl4.png"))
    bad("plot", "--where", *P, "--x", "tokens", "--where", "policy=warp", "-o", str(T / "pl5.png"))
    bad("plot", "--where", *P, "--x", "tokens", "--where", "nosuch=1", "-o", str(T / "pl6.png"))
    bad("plot", "--where", *P, "--x", "tokens", "--where", "policy", "-o", str(T / "pl7.png"))
    bad("plot", ("-o", ".txt", "suffix"), *P, "--x", "tokens", "-o", str(T / "pl.txt"))
    bad("plot", ("-o", "fifo"), *P, "--x", "tokens", "-o", f["fifo"])
    bad("plot", ("-o", "adir"), *P, "--x", "tokens", "-o", f["dir"])
    bad("plot", ("-o", "missing"), *P, "--x", "tokens", "-o", str(T / "missing" / "p.png"))
    bad("plot", ("/dev/full", "space"), *P, "--x", "tokens", "-o", "/dev/full", node="/dev/full",
        note="no suffix and ENOSPC")
    for k in ("t_trunc", "t_json", "t_empty", "t_other"):
        bad("plot", (Path(f[k]).name, "RESULTS", "parquet", "column"), "plot", f[k], "--x", "tokens",
            "-o", str(T / f"pl_{k}.png"), note=k)
    bad("plot", ("RESULTS", "nope"), "plot", str(T / "nope.parquet"), "--x", "tokens", "-o",
        str(T / "pl8.png"))

    # ---- rerun
    for k, hint in (("r_neg", "tokens"), ("r_noconf", "config"), ("r_wl", "workload"),
                    ("r_dev", "device"), ("r_trunc", ("JSON", "r_trunc")), ("r_list", ("config", "r_list")),
                    ("r_text", ("JSON", "r_text"))):
        bad("rerun", hint, "rerun", f[k], note=k)
    bad("rerun", ("RESULT", "nope"), "rerun", str(T / "nope.json"))
    bad("rerun", ("RESULT", "adir"), "rerun", f["dir"])
    bad("rerun", ("RESULT", "parquet", "JSON"), "rerun", f["trace"])

    # ---- trace
    bad("trace", ("SRC", "nope"), "trace", "import", str(T / "nope"), "--format", "nvmoe", "--model",
        "olmoe-1b-7b", "-o", str(T / "ti.parquet"))
    for fmt in ("nvmoe", "gnf4", "mixtral-jsonl", "flame-npz", "vllm-logger"):
        bad("trace", ("SRC", "r.json", "format", fmt), "trace", "import", f["r"], "--format", fmt,
            "--model", "olmoe-1b-7b", "-o", str(T / f"ti_{fmt}.parquet"), note=f"garbage as {fmt}")
    bad("trace", "--format", "trace", "import", f["r"], "--format", "csv", "--model", "olmoe-1b-7b",
        "-o", str(T / "ti2.parquet"))
    bad("trace", "--model", "trace", "import", f["r"], "--format", "nvmoe", "--model", "gpt-9",
        "-o", str(T / "ti3.parquet"))
    bad("trace", "--segments", "trace", "import", f["r"], "--format", "nvmoe", "--model", "olmoe-1b-7b",
        "--segments", "256,,4096", "-o", str(T / "ti4.parquet"))
    bad("trace", "--segments", "trace", "import", f["r"], "--format", "gnf4", "--model", "olmoe-1b-7b",
        "--segments", "256", "-o", str(T / "ti5.parquet"), note="--segments with non-nvmoe")
    for k in ("t_trunc", "t_json", "t_empty", "t_wrongcol", "t_zerorows", "t_bigid", "t_badlayer", "t_other"):
        bad("trace", (Path(f[k]).name, "PATH", "experts", "column"), "trace", "stats", f[k], note=k)
        bad("trace", (Path(f[k]).name, "PATH", "experts", "column"), "trace", "info", f[k], note=k)
    bad("trace", ("PATH", "nope"), "trace", "stats", str(T / "nope.parquet"))
    bad("trace", ("PATH", "adir"), "trace", "stats", f["dir"])
    SY = ["trace", "synth", "--model", "flame-moe-290m"]
    for v in ("0", "-1", "abc", "1e308", "100000000000"):
        bad("trace", "--tokens", *SY, "--tokens", v, "-o", str(T / f"sy_{len(CASES)}.parquet"))
    for opt, vals in (("--entropy", ("-0.1", "1.5", "nan", "inf")), ("--reuse", ("-1", "2", "nan")),
                      ("--coverage-32", ("-1", "1.5", "nan")), ("--coverage-128", ("2",)),
                      ("--segment-tokens", ("0", "-5", "abc", "100000000"))):
        for v in vals:
            extra = ["--reuse", "0.3"] if opt == "--entropy" else (["--entropy", "0.9"] if opt == "--reuse" else [])
            bad("trace", opt, *SY, "--tokens", "256", opt, v, *extra,
                "-o", str(T / f"sy_{len(CASES)}.parquet"))
    bad("trace", ("--entropy", "--reuse"), *SY, "--tokens", "256", "--entropy", "0.9",
        "-o", str(T / "sy_e.parquet"), note="--entropy without --reuse")
    bad("trace", ("--fit", "--entropy"), *SY, "--tokens", "256", "--fit", f["trace"], "--entropy", "0.9",
        "--reuse", "0.3", "-o", str(T / "sy_f.parquet"))
    bad("trace", ("--fit", "json.parquet"), *SY, "--tokens", "256", "--fit", f["t_json"], "-o",
        str(T / "sy_g.parquet"))
    bad("trace", ("--model", "--fit", "olmoe", "flame"), "trace", "synth", "--model", "olmoe-1b-7b",
        "--tokens", "256", "--fit", f["trace"], "-o", str(T / "sy_h.parquet"), note="fit a flame trace for olmoe")
    bad("trace", ("-o", "fifo"), *SY, "--tokens", "256", "-o", f["fifo"])
    bad("trace", ("-o", "null", "regular"), *SY, "--tokens", "256", "-o", f["chardev"], node=f["chardev"])
    bad("trace", ("-o", "/dev/full", "space"), *SY, "--tokens", "256", "-o", "/dev/full", node="/dev/full")
    bad("trace", ("-o", "adir"), *SY, "--tokens", "256", "-o", f["dir"])
    bad("trace", ("-o", ".csv", "parquet"), *SY, "--tokens", "256", "-o", str(T / "sy.csv"))
    AS = ["trace", "assemble", f["trace"]]
    for v in ("0", "-1", "abc", "100000"):
        bad("trace", "--tokens", *AS, "--tokens", v, "-o", str(T / f"as_{len(CASES)}.parquet"))
    bad("trace", "--start-segment", *AS, "--tokens", "256", "--start-segment", "1000", "-o",
        str(T / "as_s.parquet"))
    bad("trace", "--start-segment", *AS, "--tokens", "256", "--start-segment", "-1", "-o",
        str(T / "as_s2.parquet"))
    bad("trace", ("PATH", "trunc"), "trace", "assemble", f["t_trunc"], "--tokens", "256", "-o",
        str(T / "as_t.parquet"))
    bad("trace", ("-o", "PATH", "same"), *AS, "--tokens", "256", "-o", f["trace"] + ".copy.parquet",
        note="placeholder ok")  # replaced below
    CASES.pop()

    # ---- validate
    bad("validate", "--only", "validate", "--only", "no-such-case-xyz", "--quiet",
        note="--only matching nothing")
    bad("validate", ("--write-docs", "fifo"), "validate", "--only", "no-such-case-xyz", "--write-docs",
        f["fifo"], "--quiet")
    bad("validate", ("--write-docs", "adir"), "validate", "--only", "prefill", "--write-docs",
        f["dir"], "--quiet", timeout=180)

    # ---- models / devices
    bad("models", "--model", "models", "--model", "gpt-9")
    bad("models", "--model", "models", "--model", "")
    bad("models", "--model", "models", "--model", f["dir"])
    bad("devices", "--device", "devices", "--device", "nokia-3310")
    bad("devices", "--device", "devices", "--device", "")
    bad("devices", ("--device", "syntax"), "devices", "--device", f["p_syntax"])

    # ---- calibrate
    bad("calibrate", ("calibrate", "COMMAND", "warp"), "calibrate", "warp")
    bad("calibrate", ("--device", "h200"), "calibrate", "estream", "--device", "h200x8-hf",
        forbid=("for prefill",))

    # ---- global
    bad("global", ("nope", "command"), "nope")
    bad("global", ("--tokens",), "prefill", "--tokens")
    bad("global", ("--frobnicate", "option"), "prefill", "--frobnicate")


# ---------------------------------------------------------------- run and classify
def node_kind(path: str) -> str:
    try:
        m = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    return ("fifo" if stat.S_ISFIFO(m) else "chr" if stat.S_ISCHR(m) else "dir" if stat.S_ISDIR(m)
            else "reg" if stat.S_ISREG(m) else "other")


def norm(text: str) -> str:
    """Compare names loosely: --memory-budget-gib matches memory_budget_GiB."""
    return text.lower().replace("-", "_").lstrip("_")


def run(case: Case) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.update(case.env)
    before = node_kind(case.node) if case.node else None
    t0 = time.monotonic()
    try:
        p = subprocess.run([PY, "-m", "moesim", *case.argv], cwd=case.cwd or REPO, env=env,
                           capture_output=True, text=True, timeout=case.timeout,
                           stdin=subprocess.DEVNULL)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, "", (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or ""))
    wall = time.monotonic() - t0
    after = node_kind(case.node) if case.node else None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    first = lines[0] if lines else (out.strip().splitlines()[0] if out.strip() else "")
    if case.node and before != after:
        cls = "node-replaced"
    elif rc is None:
        cls = "hang"
    elif "Traceback (most recent call last)" in err or rc not in (0, 2):
        cls = "internal-error"
    elif rc == 0:
        cls = "clean-ok" if case.expect == "ok" else "accepted-nonsense"
    else:  # rc == 2
        errs = [ln for ln in lines if "error" in ln.lower()]
        if case.expect == "ok":
            cls = "unexpected-refusal"
        elif len(lines) > 1:
            cls = "multi-line"
        elif "got None" in err or any(x in err for x in case.forbid) or (
                case.names and not any(norm(n) in norm(err) for n in case.names)):
            cls = "misblame"
        else:
            cls = "clean-refusal"
        if errs:
            first = errs[0]
    return dict(cmd=case.cmd, argv=case.argv, expect=case.expect, rc=rc, cls=cls, wall=round(wall, 1),
                names=list(case.names), first=first[:300], nlines=len(lines), note=case.note, env=case.env,
                node=(before, after) if case.node else None)


ORDER = ["node-replaced", "internal-error", "hang", "accepted-nonsense", "misblame", "multi-line",
         "unexpected-refusal", "clean-refusal", "clean-ok"]


def short(argv: list[str]) -> str:
    return " ".join((a.replace(str(T), "$T") if a else "''") for a in argv)


def report(results: list[dict]) -> str:
    from collections import Counter
    c = Counter(r["cls"] for r in results)
    out = ["# Issue 23 adversarial campaign", "",
           f"`validation/campaign_23.py`, {len(results)} cases, run "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. `$T` is the scratch fixture folder "
           "(broken profiles, models, traces, grids, a FIFO and a char device made with mknod).", "",
           "| class | cases |", "|---|---|"]
    for k in ORDER:
        out.append(f"| {k} | {c.get(k, 0)} |")
    out += ["", "Classes: *accepted-nonsense* exit 0 on an input that should be refused; *misblame* a "
            "one-line exit 2 that names none of the fields the user set (or says `got None`); "
            "*multi-line* exit 2 with more than one stderr line; *unexpected-refusal* exit 2 on a "
            "documented command; *node-replaced* a FIFO or char device given as output changed type.", ""]
    for k in ORDER[:-2]:
        rows = [r for r in results if r["cls"] == k]
        if not rows:
            continue
        out += [f"## {k} ({len(rows)})", "", "| command | argv | rc | first stderr line | note |",
                "|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: r["cmd"]):
            env = " ".join(f"{a}={b}" for a, b in r["env"].items())
            argv = (env + " " if env else "") + short(r["argv"])
            first = r["first"].replace("|", "\\|").replace(str(T), "$T")
            moved = r["node"] and r["node"][0] != r["node"][1]
            note = r["note"] + (f" node {r['node'][0]}->{r['node'][1]}" if moved else "")
            argv = argv.replace("|", "\\|")
            out.append(f"| {r['cmd']} | `{argv}` | {r['rc']} | {first} | {note} |")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    f = fixtures()
    build(f)
    os.chmod(f["ro_dir"], 0o500)
    workers = int(os.environ.get("CAMPAIGN_WORKERS", str(max(2, os.cpu_count() or 2))))
    only = os.environ.get("CAMPAIGN_ONLY")
    cases = [c for c in CASES if not only or c.cmd == only]
    print(f"{len(cases)} cases, scratch {T}", file=sys.stderr)
    results = []
    with ThreadPoolExecutor(workers) as ex:
        for i, r in enumerate(ex.map(run, cases)):
            results.append(r)
            if r["cls"] not in ("clean-ok", "clean-refusal"):
                print(f"[{i}] {r['cls']:<18} {short(r['argv'])[:120]} :: {r['first'][:150]}", file=sys.stderr)
    if os.environ.get("CAMPAIGN_JSON"):          # every outcome, for a closer look (not committed)
        Path(os.environ["CAMPAIGN_JSON"]).write_text(json.dumps(results, indent=1, default=str))
    (REPO / "validation" / "campaign_23.md").write_text(report(results))
    shutil.rmtree(T, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

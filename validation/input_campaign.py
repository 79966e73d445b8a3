"""Adversarial input campaign: run bad and edge inputs through every command, as a new user would.

Run from the repository root:  PYTHONPATH=$PWD python3 validation/input_campaign.py
Writes validation/input_campaign.md (every outcome as JSON to $CAMPAIGN_JSON when set; the
report to $CAMPAIGN_REPORT instead when set). $CAMPAIGN_SECTIONS (comma-separated) runs only
those sections; the slow test tests/unit/test_input_campaign.py runs the sections of
:data:`CLASS_SECTIONS`. Exits 1 when any case ends in a bad class.

Cases come in sections: the per-command cases of the first campaign (issue 23: ``cli-<command>``)
and one section per class of input of the second (issue 35, :data:`CLASS_SECTIONS`): standard
output that is full, closed or stops reading; inputs that never end (FIFOs); enormous and
endless inputs; absurd sizes; grid values; ``--set`` on a non-numeric field; over-long paths;
outputs aimed at files that are not theirs; misleading messages; impossible calibration logs.
Every case is an argv with an expectation:

- ``ok``: a documented command that should exit 0;
- ``refuse``: an input that should end with exit 2 and one line naming the field (``names``).

Each outcome is classified as one of:

clean-ok, clean-refusal, accepted-nonsense (exit 0 on an input that should be refused),
internal-error (exit 1, another code, or a traceback), hang (timeout), multi-line error
(exit 2 with more than one stderr line), misblame (exit 2 whose message names none of the
fields the user set, or says "got None"), unexpected-refusal (exit 2 on a documented
command), node-replaced (an output aimed at a FIFO or character device replaced it),
damaged-file (a file that was not the command's output changed), silent-run (over
:data:`SILENT_S` seconds with nothing on stderr), bad-stdout (standard output full or closed
and the exit was 0, an internal error, a traceback or more than one line; a reader that went
away and the exit was neither 0 nor 141, or something on stderr).

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
T = Path(tempfile.mkdtemp(prefix="input-campaign-"))
SILENT_S = 30.0         # a run this long must show progress on stderr, or refuse up front
#: the sections of the second campaign (issue 35): one per class of input
CLASS_SECTIONS = ("stdout", "fifo-input", "huge-input", "absurd-size", "grid-values", "set-field",
                  "long-path", "damaged-file", "messages", "calibrate-logs")
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
    section: str = ""             # cli-<cmd> for the first campaign's cases, else one of CLASS_SECTIONS
    stdout: str = ""              # "full" (/dev/full), "closed" (>&-), "head" (the reader stops after a line)
    guard: str | None = None      # a file that must keep its bytes


CASES: list[Case] = []
SECTION = ""                      # the section cases are added to (empty: cli-<cmd>)


def ok(cmd, *argv, **kw):
    CASES.append(Case(cmd, list(argv), "ok", section=SECTION or f"cli-{cmd}", **kw))


def bad(cmd, names, *argv, **kw):
    if isinstance(names, str):
        names = (names,)
    CASES.append(Case(cmd, list(argv), "refuse", tuple(names), section=SECTION or f"cli-{cmd}", **kw))


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


#: profiles (``p_``, made from sd8-elite-gen5) and models (``m_``, made from flame-moe-290m) that differ
#: from their source only in replaced values: fixture -> (file, {key: new value})
EDITS = {
    "p_overhead": ("overhead.toml", {"runtime_overhead_MiB": "1e12", "name": '"p-overhead"'}),
    "p_usable_neg": ("usable_neg.toml", {"usable_GiB": "-1.0", "name": '"p-usneg"'}),
    "p_usable_gt_cap": ("usable_gt.toml", {"usable_GiB": "64.0", "name": '"p-usgt"'}),
    "p_bw_zero": ("bw0.toml", {"effective_read_bw_GBps": "0.0", "name": '"p-bw0"'}),
    "p_bw_nan": ("bwnan.toml", {"effective_read_bw_GBps": "nan", "name": '"p-bwnan"'}),
    "p_bw_inf": ("bwinf.toml", {"peak_read_bw_GBps": "inf", "name": '"p-bwinf"'}),
    "p_bw_str": ("bwstr.toml", {"effective_read_bw_GBps": '"fast"', "name": '"p-bwstr"'}),
    "p_queue_zero": ("q0.toml", {"default_queue_depth_count": "0", "name": '"p-q0"'}),
    "p_queue_float": ("qf.toml", {"queue_slots_count": "2.5", "name": '"p-qf"'}),
    "p_kind": ("kind.toml", {"kind": '"toaster"', "name": '"p-kind"'}),
    "p_arena_tiny": ("arena.toml", {"max_mapped_GiB": "0.001", "name": '"p-arena"'}),
    "p_clock_huge": ("clock.toml", {"clock_GHz": "1e308", "name": '"p-clock"'}),
    "p_catalog_name": ("cat.toml", {"name": '"h200x8-hf"'}),
    "m_hidden_huge": ("hidden.toml", {"hidden_size": "10000000000", "name": '"m-hidden"'}),
    "m_hidden_float": ("hiddenf.toml", {"hidden_size": "1e10", "name": '"m-hiddenf"'}),
    "m_hidden_zero": ("hidden0.toml", {"hidden_size": "0", "name": '"m-hidden0"'}),
    "m_topk_gt": ("topk.toml", {"top_k": "100", "name": '"m-topk"'}),
    "m_topk_zero": ("topk0.toml", {"top_k": "0", "name": '"m-topk0"'}),
    "m_layers_neg": ("layers.toml", {"num_layers": "-3", "name": '"m-layers"'}),
    "m_dense_gt": ("dense.toml", {"num_dense_layers": "20", "name": '"m-dense"'}),
    "m_experts_str": ("estr.toml", {"num_routed_experts": '"many"', "name": '"m-estr"'}),
    "m_kv_heads": ("kv.toml", {"num_kv_heads": "5", "name": '"m-kv"'}),  # 16 % 5 != 0
    "m_attn_kind": ("attn.toml", {"kind": '"quantum"', "name": '"m-attn"'}),
    "m_catalog_name": ("catname.toml", {"hidden_size": "2048"}),
    "m_valid": ("valid.toml", {"name": '"my-moe"'}),
    "m_format": ("fmt.toml", {"default": '"FP3"', "name": '"m-fmt"'}),
}


def fixtures() -> dict[str, str]:
    f: dict[str, str] = {}
    sd8 = PROFILES / "sd8-elite-gen5.toml"
    flame = MODELS / "flame-moe-290m.toml"
    prof = T / "profiles"
    prof.mkdir()
    mod = T / "models"
    mod.mkdir()
    for key, (name, replace) in EDITS.items():
        src, folder = (sd8, prof) if key.startswith("p_") else (flame, mod)
        f[key] = edit_toml(src, folder / name, replace)
    # profiles
    f["p_missing_ufs_bw"] = edit_toml(sd8, prof / "noufs.toml", drop=("effective_read_bw_GBps",),
                                      replace={"name": '"p-noufs"'})
    f["p_missing_name"] = edit_toml(sd8, prof / "noname.toml", drop=("name",))
    f["p_wrong_unit"] = edit_toml(sd8, prof / "unit.toml", drop=("usable_GiB",),
                                  replace={"name": '"p-unit"'}, append="")
    # wrong unit: usable_MB instead of usable_GiB (inserted in [memory])
    txt = Path(f["p_wrong_unit"]).read_text().replace("[memory]\n", "[memory]\nusable_MB = 15000.0\n", 1)
    Path(f["p_wrong_unit"]).write_text(txt)
    f["p_unknown_key"] = edit_toml(sd8, prof / "unk.toml", {"name": '"p-unk"'},
                                   append="\n[memory2]\nfoo_GiB = 1.0\n")
    (prof / "syntax.toml").write_text(sd8.read_text()[:500] + "\n[memory\nusable = \n")
    f["p_syntax"] = str(prof / "syntax.toml")
    (prof / "empty.toml").write_text("")
    f["p_empty"] = str(prof / "empty.toml")
    (prof / "bin.toml").write_bytes(os.urandom(256))
    f["p_binary"] = str(prof / "bin.toml")
    # models
    f["m_missing_moe"] = edit_toml(flame, mod / "nomoe.toml",
                                   drop=("num_routed_experts", "top_k", "expert_intermediate_size",
                                         "num_shared_experts"), replace={"name": '"m-nomoe"'})
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
    # the small grid with one of its lines replaced: line -> {grid: replacement}
    for line, variants in {
        "memory_budget_GiB = 2.0": {"inf_budget": "memory_budget_GiB = inf", "nan_budget": "memory_budget_GiB = nan",
                                    "neg_budget": "memory_budget_GiB = -2.0"},
        'device = "sd8-elite-gen5"': {"gpu_device": 'device = "h200x8-hf"'},
        'tokens = [256, 512]': {"empty_axis": 'tokens = []', "bad_token": 'tokens = [256, "many"]',
                                "zero_token": 'tokens = [0, 512]', "neg_token": 'tokens = [-1]',
                                "huge_token": 'tokens = [100000000000]', "float_token": 'tokens = [256.5]'},
        'policy = ["estream", "resident"]': {"unknown_policy": 'policy = ["warp"]'},
        'model = ["flame-moe-290m"]': {"unknown_model": 'model = ["gpt-9"]'},
    }.items():
        for name, replacement in variants.items():
            grid(name, small.replace(line, replacement))
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
    grid("spec", spec)
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


# ---------------------------------------------------------------- the classes of the second campaign
def class_fixtures(f: dict[str, str]) -> None:
    """Inputs of the issue-35 classes: FIFOs where files are read, endless and enormous files,
    deep JSON and TOML, impossible calibration logs, a grid TOML that must survive."""
    c = T / "classes"
    c.mkdir()
    for name in ("log", "grid", "result", "profile", "model", "trace", "devices"):
        os.mkfifo(c / f"fifo-{name}")
        f[f"fifo_{name}"] = str(c / f"fifo-{name}")
    # the cache folder a prefill fills, copied with every file replaced by a FIFO of its name
    filled, fifos = c / "cache-filled", c / "cache-fifo"
    r = subprocess.run([PY, "-m", "moesim", "prefill", "--model", "flame-moe-290m", "--tokens", "256", "--quiet"],
                       cwd=REPO, capture_output=True, text=True, env=dict(os.environ, MOESIM_CACHE_DIR=str(filled)))
    assert r.returncode == 0, r.stderr
    for path in sorted(filled.rglob("*")):
        dst = fifos / path.relative_to(filled)
        if path.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.mkfifo(dst)
    fifos.mkdir(exist_ok=True)
    f["cache_fifo"] = str(fifos)
    # enormous: a sparse 3 GiB file costs no disk and must not be read whole
    with open(c / "huge.json", "wb") as fh:
        fh.truncate(3 << 30)
    f["huge"] = str(c / "huge.json")
    for ext in ("toml", "csv", "parquet", "md"):
        os.link(c / "huge.json", c / f"huge.{ext}")
        f[f"huge_{ext}"] = str(c / f"huge.{ext}")
    depth = 200_000
    (c / "deep.json").write_text("[" * depth + "]" * depth)
    f["deep_json"] = str(c / "deep.json")
    (c / "deep-object.json").write_text('{"a":' * depth + "1" + "}" * depth)
    f["deep_object_json"] = str(c / "deep-object.json")
    deep_axis = "[" * depth + "]" * depth
    (c / "deep.toml").write_text(f'[fixed]\nworkload = "prefill"\n[axes]\ntokens = {deep_axis}\n')
    f["deep_toml"] = str(c / "deep.toml")
    (c / "array.json").write_text("[1, 2, 3]\n")
    f["array_json"] = str(c / "array.json")
    (c / "text.parquet").write_text("these are my notes, not a sweep result\n")
    f["text_out"] = str(c / "text.parquet")
    # a file that is not a timeline: --timeline must not replace it
    small = ('[fixed]\nworkload = "prefill"\ndevice = "sd8-elite-gen5"\n'
             '[axes]\nmodel = ["flame-moe-290m"]\ntokens = [256]\n')
    for name in ("grid-a", "grid-b", "grid-c", "grid-d"):
        (c / f"{name}.toml").write_text(small)
        f[name] = str(c / f"{name}.toml")
    (c / "notes.json").write_text('{"my": "notes"}\n')
    f["notes_json"] = str(c / "notes.json")
    # grids of the classes
    g = c / "grids"
    g.mkdir()

    def grid(name: str, text: str) -> None:
        (g / f"{name}.toml").write_text(text)
        f[f"cg_{name}"] = str(g / f"{name}.toml")

    pre = '[fixed]\nworkload = "prefill"\ndevice = "sd8-elite-gen5"\nmodel = "flame-moe-290m"\n[axes]\n'
    dec = '[fixed]\nworkload = "decode"\ndevice = "sd8-elite-gen5"\nmodel = "mixtral-8x7b"\n[axes]\n'
    spec = '[fixed]\nworkload = "specdecode"\ndevice = "h200x8-hf"\nmodel = "gpt-oss-120b"\npasses = 1\n[axes]\n'
    grid("mixed_tokens", pre + 'tokens = [256, "256"]\n')
    grid("dup_tokens", pre + 'tokens = [256, 256.0]\n')
    grid("dup_int", pre + 'tokens = [256, 256]\n')
    grid("datetime", pre + 'tokens = [1979-05-27T07:32:00Z]\n')
    grid("provenance", pre + 'tokens = [256]\n"ufs.provenance.read_latency_us" = ["x"]\n')
    grid("provenance_num", pre + 'tokens = [256]\n"memory.provenance" = [1]\n')
    grid("string_cache", dec + 'tokens = [8]\ncache_gib = ["lots"]\n')
    grid("bool_tokens", pre + 'tokens = [true]\n')
    grid("gamma_nosel", dec + 'tokens = [8]\ngamma = [2, 4]\n')
    grid("depth_nosel", dec + 'tokens = [8]\ndepth = [2, 3]\n')
    grid("pinned_lru", dec + 'tokens = [8]\ncache_policy = ["lru"]\npinned_share = [0.2, 0.5]\n')
    grid("decode_100k", dec + 'tokens = [100000]\n')
    grid("spec_dup", spec + 'gamma = [4, 4.0]\n')
    grid("nan_axis", pre + 'tokens = [256]\n"ufs.effective_read_bw_GBps" = [nan]\n')
    # impossible calibration logs
    good_bench = json.loads((REPO / "validation/logs/synthetic-sd8-elite-gen5-llama-bench-cpu.json").read_text())
    good_fio = json.loads((REPO / "validation/logs/synthetic-sd8-elite-gen5-fio.json").read_text())
    logs = c / "logs"
    logs.mkdir()

    def bench(name: str, edit) -> None:
        rows = json.loads(json.dumps(good_bench))
        edit(rows)
        (logs / f"{name}.json").write_text(json.dumps(rows))
        f[f"lb_{name}"] = str(logs / f"{name}.json")

    bench("ts_1e308", lambda r: r[0].update(avg_ts=1e308))
    bench("ts_1e12", lambda r: r[0].update(avg_ts=1e12))
    bench("ts_zero", lambda r: r[0].update(avg_ts=0.0))
    bench("ts_neg", lambda r: r[0].update(avg_ts=-5.0))
    bench("prompt_true", lambda r: r[0].update(n_prompt=True))
    bench("prompt_1e9", lambda r: r[0].update(n_prompt=10 ** 9))
    bench("prompt_str", lambda r: r[0].update(n_prompt="many"))
    bench("ts_str", lambda r: r[0].update(avg_ts="fast"))

    def fio(name: str, edit) -> None:
        d = json.loads(json.dumps(good_fio))
        edit(d)
        (logs / f"{name}.json").write_text(json.dumps(d))
        f[f"fio_{name}"] = str(logs / f"{name}.json")

    def iodepth(d) -> None:
        for j in d["jobs"]:
            j["job options"]["iodepth"] = "100000"

    def job_error(d) -> None:
        d["jobs"][0]["error"] = 5

    def bw_huge(d) -> None:
        d["jobs"][-1]["read"]["bw_bytes"] = 1e18
        for k in ("bw", "bw_mean"):
            if k in d["jobs"][-1]["read"]:
                d["jobs"][-1]["read"][k] = 1e15

    fio("iodepth", iodepth)
    fio("error", job_error)
    fio("bw_huge", bw_huge)
    ttft = logs / "ttft"
    ttft.mkdir()
    head = "model,tokens,ttft_s,group_size,banks,source\n"
    for name, row in (("ttft_1e308", "olmoe-1b-7b,4096,1e308,,,x"), ("ttft_neg", "olmoe-1b-7b,4096,-2,,,x"),
                      ("ttft_nan", "olmoe-1b-7b,4096,nan,,,x"), ("ttft_tokens_true", "olmoe-1b-7b,true,2.1,,,x"),
                      ("ttft_tokens_1e9", "olmoe-1b-7b,1000000000,2.1,,,x"),
                      ("ttft_gpu_model", "qwen3-235b-a22b,4096,2.1,,,x"),
                      ("ttft_gpu_model2", "deepseek-v3.1,4096,2.1,,,x")):
        (ttft / f"{name}.csv").write_text(head + row + "\n")
        f[name] = str(ttft / f"{name}.csv")
    md = (REPO / "validation/logs/llamacpp-pr23368-s26plus-htp0-qwen3-4b.md").read_text().splitlines()
    # an HTP row four orders of magnitude off its neighbours
    out = [ln.replace("473.84", "4738400.00") if "pp128" in ln else ln for ln in md]
    (logs / "htp_disagree.md").write_text("\n".join(out) + "\n")
    f["htp_disagree"] = str(logs / "htp_disagree.md")
    # OpenCL rows only: ignored rows must be listed with the reason
    ocl = [r | {"backends": "OpenCL", "devices": "GPUOpenCL", "n_gpu_layers": 99} for r in good_bench]
    (logs / "opencl.json").write_text(json.dumps(ocl))
    f["lb_opencl"] = str(logs / "opencl.json")
    depth_rows = [r | {"n_depth": 512} for r in good_bench]
    (logs / "depth.json").write_text(json.dumps(depth_rows))
    f["lb_depth"] = str(logs / "depth.json")


def build_classes(f: dict[str, str]) -> None:
    global SECTION
    M = ["--model", "flame-moe-290m"]
    P = ["prefill", *M, "--tokens", "256"]
    D = ["decode", "--tokens", "8"]       # the default model, mixtral-8x7b: its trace has sequential decode tokens
    good_lb = str(REPO / "validation/logs/synthetic-sd8-elite-gen5-llama-bench-cpu.json")
    good_fio = str(REPO / "validation/logs/synthetic-sd8-elite-gen5-fio.json")
    good_md = str(REPO / "validation/logs/llamacpp-pr23368-s26plus-htp0-qwen3-4b.md")
    CD = ["calibrate", "device", "campaign-phone", "--no-write"]

    SECTION = "stdout"
    outputs = (["--help"], ["--version"], ["models"], ["devices"], ["devices", "--device", "sd8-elite-gen5"],
               ["prefill", "--help"], P, [*P, "--json"], ["compare", *M, "--tokens", "256"], D,
               ["trace", "info", f["trace"]], ["models", "--model", "olmoe-1b-7b", "--json"],
               ["sweep", "--help"], ["calibrate", "device", "--help"], ["trace", "stats", f["trace"]])
    for argv in outputs:
        for mode in ("full", "closed"):
            bad("stdout", ("standard output", "stdout"), *argv, stdout=mode, note=mode)
        ok("stdout", *argv, stdout="head", note="reader stops after one line")

    SECTION = "fifo-input"
    t = dict(timeout=20)
    bad("calibrate", ("--llama-bench", "fifo"), *CD, "--llama-bench", f["fifo_log"], **t)
    bad("calibrate", ("--fio", "fifo"), *CD, "--fio", f["fifo_log"], **t)
    bad("calibrate", ("--ttft", "fifo"), *CD, "--llama-bench", good_lb, "--ttft", f["fifo_log"], **t)
    bad("calibrate", ("--base", "fifo"), *CD, "--llama-bench", good_lb, "--base", f["fifo_profile"], **t)
    bad("compare", ("--devices", "fifo"), "compare", *M, "--tokens", "256", "--devices",
        f"sd8-elite-gen5,{f['fifo_devices']}", **t)
    bad("sweep", ("GRID", "fifo"), "sweep", f["fifo_grid"], "-o", str(T / "fifo-sweep.parquet"), "--quiet", **t)
    bad("rerun", ("RESULT", "fifo"), "rerun", f["fifo_result"], **t)
    bad("prefill", ("--device", "fifo"), *P, "--device", f["fifo_profile"], **t)
    bad("prefill", ("--model", "fifo"), "prefill", "--model", f["fifo_model"], **t)
    bad("prefill", ("--trace", "fifo"), *P, "--trace", f["fifo_trace"], **t)
    bad("devices", ("--device", "fifo"), "devices", "--device", f["fifo_profile"], **t)
    bad("models", ("--model", "fifo"), "models", "--model", f["fifo_model"], **t)
    bad("trace", ("fifo", "TRACE"), "trace", "stats", f["fifo_trace"], **t)
    bad("plot", ("fifo", "RESULTS"), "plot", f["fifo_result"], "--x", "tokens", "-o", str(T / "fifo.png"), **t)
    ok("prefill", *P, "--quiet", env={"MOESIM_CACHE_DIR": f["cache_fifo"]}, timeout=60,
       note="every entry of the cache folder is a FIFO of the name a run looks up")
    parts = T / "sweep-fifo.parquet.parts"
    parts.mkdir()
    os.mkfifo(parts / "part-0000000.json")
    bad("sweep", ("part", "fifo", "regular"), "sweep", f["g_small"], "-o", str(T / "sweep-fifo.parquet"),
        "--resume", "--workers", "1", "--quiet", timeout=20, note="a FIFO in the parts folder")

    SECTION = "huge-input"
    endless = ("/dev/zero", "/dev/urandom")
    for src in (*endless, f["huge"]):
        t = dict(timeout=30)
        bad("rerun", ("RESULT", "size", "regular"), "rerun", src, **t)
        bad("calibrate", ("--llama-bench", "size", "regular"), *CD, "--llama-bench", src, **t)
        bad("calibrate", ("--fio", "size", "regular"), *CD, "--fio", src, **t)
        bad("prefill", ("--device", "size", "regular"), *P, "--device", src, **t)
        bad("prefill", ("--model", "size", "regular"), "prefill", "--model", src, **t)
        bad("prefill", ("--trace", "size", "regular", "Parquet"), *P, "--trace", src, **t)  # 3 GiB < the trace cap
        bad("sweep", ("GRID", "size", "regular"), "sweep", src, "-o", str(T / f"huge-{len(CASES)}.parquet"), **t)
        bad("compare", ("--devices", "size", "regular"), "compare", *M, "--tokens", "256", "--devices", src, **t)
    bad("rerun", ("RESULT", "deep", "nest"), "rerun", f["deep_json"], timeout=30)
    bad("rerun", ("RESULT", "deep", "nest"), "rerun", f["deep_object_json"], timeout=30)
    bad("sweep", ("GRID", "deep", "nest"), "sweep", f["deep_toml"], "-o", str(T / "deep.parquet"), timeout=30)
    bad("calibrate", ("--llama-bench", "deep", "nest"), *CD, "--llama-bench", f["deep_json"], timeout=30)
    bad("calibrate", ("--fio", "deep", "nest"), *CD, "--fio", f["deep_object_json"], timeout=30)

    SECTION = "absurd-size"
    bad("decode", "--tokens", "decode", *M, "--tokens", "100000", timeout=60, note="the documented maximum")
    bad("decode", "--tokens", "decode", "--tokens", "100000", timeout=60, note="mixtral, the default")
    bad("sweep", ("tokens", "decode"), "sweep", f["cg_decode_100k"], "-o", str(T / "d100k.parquet"), "--quiet",
        timeout=60)
    for k in ("ttft_gpu_model", "ttft_gpu_model2"):
        bad("calibrate", ("--ttft", "model", "phone"), *CD, "--llama-bench", good_lb, "--ttft", f[k], timeout=60)
    ok("prefill", "prefill", "--model", "qwen3-235b-a22b", "--tokens", "4096", timeout=60,
       note="a GPU-server model streamed on the phone: a what-if that runs in seconds")

    SECTION = "grid-values"
    for name, hint in (("mixed_tokens", "tokens"), ("dup_tokens", ("tokens", "duplicate")),
                       ("dup_int", ("tokens", "duplicate")), ("datetime", "tokens"),
                       ("provenance", "provenance"), ("provenance_num", "provenance"),
                       ("string_cache", "cache_gib"), ("bool_tokens", "tokens"), ("gamma_nosel", "gamma"),
                       ("depth_nosel", "depth"), ("pinned_lru", "pinned_share"), ("spec_dup", "gamma"),
                       ("nan_axis", "effective_read_bw_GBps")):
        out = T / f"grid-{name}.parquet"
        bad("sweep", hint, "sweep", f[f"cg_{name}"], "-o", str(out), "--workers", "1", "--quiet", timeout=60,
            note=name)
        bad("sweep", hint, "sweep", f[f"cg_{name}"], "-o", str(out), "--workers", "1", "--quiet", "--resume",
            timeout=60, note=name + ", then --resume")

    SECTION = "set-field"
    for what in ("memory.provenance=1", "ufs.provenance=1", "name=x", "ufs.version=5", "htp.arch=v99",
                  "htp.attention_unit=hvx2", "memory=1", "provenance.x=1"):
        key = what.split("=")[0]
        hint = ("--set", key.split(".")[-1])
        bad("prefill", hint, *P, "--set", what)
        bad("decode", hint, *D, "--set", what)
        bad("compare", hint, "compare", *M, "--tokens", "256", "--set", what)
        bad("autoconfig", hint, "autoconfig", *M, "--tokens", "256", "--memory-budget-gib", "1", "--set", what)
    for what in ("runtime.per_op_us=nan", "memory.provenance=1", "gpu.name=x"):
        bad("specdecode", ("--set", what.split("=")[0].split(".")[-1]), "specdecode", "--passes", "1",
            "--set", what)
    for v in ("1.0", "3.0"):      # a power what-if, inside and outside the profile's measured range
        ok("prefill", *P, "--set", f"power.ufs_read_W={v}", note="a float field with a range beside it")
    grid_set = T / "grid-set.toml"
    grid_set.write_text('[fixed]\nworkload = "prefill"\ndevice = "sd8-elite-gen5"\nmodel = "flame-moe-290m"\n'
                        '[axes]\ntokens = [256]\n"memory.provenance" = [1, 2]\n')
    bad("sweep", "provenance", "sweep", str(grid_set), "-o", str(T / "grid-set.parquet"), "--quiet")

    SECTION = "long-path"
    long_name = "x" * 300
    long_path = "/".join(["y" * 200] * 25)
    for p in (str(T / long_name), str(T / f"{long_name}.json"), "/" + long_path):
        bad("prefill", ("--timeline", "name", "long"), *P, "--timeline", p)
        bad("decode", ("--timeline", "name", "long"), *D, "--timeline", p)
        bad("sweep", ("-o", "name", "long"), "sweep", f["g_small"], "-o", p + ".parquet", "--quiet")
        bad("calibrate", ("--out", "name", "long"), "calibrate", "device", "campaign-phone", "--llama-bench",
            good_lb, "--out", p + ".toml")
        bad("trace", ("-o", "name", "long"), "trace", "synth", *M, "--tokens", "64", "-o", p + ".parquet")
        bad("prefill", ("--device", "name", "long"), *P, "--device", p)
        bad("prefill", ("--model", "name", "long"), "prefill", "--model", p)
        bad("rerun", ("RESULT", "name", "long"), "rerun", p)
    for name in (long_name, "z" * 5000):
        bad("devices", ("--device", "name", "long"), "devices", "--device", name)
        bad("prefill", ("--device", "name", "long"), *P, "--device", name)
        bad("calibrate", ("NAME", "name", "long"), "calibrate", "device", name, "--llama-bench", good_lb)

    SECTION = "damaged-file"
    bad("prefill", ("--timeline", "timeline", "replace"), *P, "--timeline", f["grid-a"], guard=f["grid-a"])
    bad("decode", ("--timeline", "timeline", "replace"), *D, "--timeline", f["grid-b"], guard=f["grid-b"])
    bad("prefill", ("--timeline", "timeline", "replace"), *P, "--timeline", f["notes_json"], guard=f["notes_json"])
    bad("sweep", ("-o", "sweep", "result"), "sweep", f["g_small"], "-o", f["text_out"], "--quiet",
        guard=f["text_out"])
    bad("calibrate", ("--out", "profile", "replace"), "calibrate", "device", "campaign-phone", "--llama-bench",
        good_lb, "--out", f["grid-c"], "--force", guard=f["grid-c"])
    bad("trace", ("-o", "trace", "replace"), "trace", "synth", *M, "--tokens", "64", "-o", f["grid-d"],
        guard=f["grid-d"])

    SECTION = "messages"
    for v in ("nan", "inf", "-inf"):
        bad("prefill", "--tokens", *P[:-2], "--tokens", v, forbid=("got nan", "got inf", "got -inf"))
        bad("prefill", "--memory-budget-gib", *P, "--memory-budget-gib", v, forbid=("less than",))
        bad("decode", "--cache-gib", *D, "--cache-gib", v, forbid=("less than", "greater than"))
        bad("decode", "--temperature", *D, "--temperature", v, forbid=("less than", "greater than"))
        bad("specdecode", "--draft-mu", "specdecode", "--passes", "1", "--draft-mu", v,
            forbid=("less than", "greater than"))
        bad("prefill", "--set", *P, "--set", f"ufs.effective_read_bw_GBps={v}", forbid=("less than",))
    bad("rerun", ("RESULT", "object"), "rerun", f["array_json"], forbid=("Extra data",))
    bad("sweep", ("-o", "not", "sweep"), "sweep", f["g_small"], "-o", f["text_out"], "--quiet",
        forbid=("another grid",))
    edited = json.loads(Path(f["r"]).read_text())
    edited["ttft_s"] = 123.0
    (T / "edited.json").write_text(json.dumps(edited))
    bad("rerun", ("ttft_s", "123"), "rerun", str(T / "edited.json"), note="an edited saved result")

    SECTION = "calibrate-logs"
    for k, hint in (("lb_ts_1e308", "avg_ts"), ("lb_ts_1e12", "avg_ts"), ("lb_ts_zero", "avg_ts"),
                    ("lb_ts_neg", "avg_ts"), ("lb_prompt_true", "n_prompt"), ("lb_prompt_1e9", "n_prompt"),
                    ("lb_prompt_str", "n_prompt"), ("lb_ts_str", "avg_ts")):
        bad("calibrate", (Path(f[k]).name, hint), *CD, "--llama-bench", f[k], timeout=60, note=k)
    for k, hint in (("fio_iodepth", "iodepth"), ("fio_error", "error"), ("fio_bw_huge", "bw")):
        bad("calibrate", (Path(f[k]).name, hint), *CD, "--fio", f[k], timeout=60, note=k)
    for k, hint in (("ttft_1e308", "ttft_s"), ("ttft_neg", "ttft_s"), ("ttft_nan", "ttft_s"),
                    ("ttft_tokens_true", "tokens"), ("ttft_tokens_1e9", "tokens")):
        bad("calibrate", (Path(f[k]).name, hint), *CD, "--llama-bench", good_lb, "--ttft", f[k], timeout=60,
            note=k)
    bad("calibrate", ("htp_disagree.md", "pp128", "fit"), *CD, "--llama-bench", f["htp_disagree"], timeout=60)
    bad("calibrate", ("--llama-bench", "twice", "duplicate", "same"), *CD, "--llama-bench", good_lb,
        "--llama-bench", good_lb, timeout=60)
    bad("calibrate", ("--fio", "twice", "duplicate", "same"), *CD, "--fio", good_fio, "--fio", good_fio, timeout=60)
    bad("calibrate", ("OpenCL", "ignored"), *CD, "--llama-bench", f["lb_opencl"], timeout=60)
    bad("calibrate", ("n_depth", "ignored"), *CD, "--llama-bench", f["lb_depth"], timeout=60)
    ok("calibrate", *CD, "--llama-bench", good_md, timeout=120, note="the tutorial's log")
    ok("calibrate", *CD, "--llama-bench", good_lb, "--fio", good_fio, timeout=120, note="the synthetic logs")
    SECTION = ""


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


def _digest(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        import hashlib
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc}"


def _spawn(case: Case, env: dict[str, str]) -> tuple[int | None, str, str]:
    """Run the case with its standard output as the case asks; (exit status or None on timeout, out, err)."""
    argv = [PY, "-m", "moesim", *case.argv]
    kw = dict(cwd=case.cwd or REPO, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if case.stdout == "head":       # read one line, then stop reading, as `| head -1` does
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, **kw)
        assert p.stdout is not None
        out = p.stdout.readline()
        p.stdout.close()
        try:
            _, err = p.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            return None, out, ""
        return p.returncode, out, err
    if case.stdout == "closed":     # `moesim ... >&-`
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
        stdout = None
    elif case.stdout == "full":
        stdout = open("/dev/full", "w")
    else:
        stdout = subprocess.PIPE
    try:
        p = subprocess.run(argv, stdout=stdout, timeout=case.timeout, **kw)
    except subprocess.TimeoutExpired as e:
        return None, "", (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or ""))
    finally:
        if case.stdout == "full":
            stdout.close()
    return p.returncode, p.stdout or "", p.stderr


def run(case: Case) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    env.update(case.env)
    before = node_kind(case.node) if case.node else None
    guarded = _digest(case.guard)
    t0 = time.monotonic()
    rc, out, err = _spawn(case, env)
    wall = time.monotonic() - t0
    after = node_kind(case.node) if case.node else None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    first = lines[0] if lines else (out.strip().splitlines()[0] if out.strip() else "")
    traceback = "Traceback (most recent call last)" in err or "Exception ignored" in err
    if case.node and before != after:
        cls = "node-replaced"
    elif case.guard and _digest(case.guard) != guarded:
        cls = "damaged-file"
    elif rc is None:
        cls = "hang"
    elif wall > SILENT_S and not lines:
        cls = "silent-run"
    elif case.stdout == "head":
        cls = "clean-ok" if rc in (0, 141) and not lines else "bad-stdout"
    elif case.stdout in ("full", "closed"):
        one_line = len(lines) == 1 and lines[0].startswith("moesim: error:")
        cls = "clean-refusal" if rc not in (0, None) and one_line and not traceback else "bad-stdout"
    elif traceback or rc not in (0, 2):
        cls = "internal-error"
    elif rc == 0:
        cls = "clean-ok" if case.expect == "ok" else "accepted-nonsense"
    else:  # rc == 2
        errs = [ln for ln in lines if "error" in ln.lower()]
        if case.expect == "ok":
            cls = "unexpected-refusal"
        elif len(lines) > 1 and not (len(errs) == 1 and lines[-1] == errs[0]):
            cls = "multi-line"          # progress lines before the one error line are allowed
        elif "got None" in err or any(x in err for x in case.forbid) or (
                case.names and not any(norm(n) in norm(err) for n in case.names)):
            cls = "misblame"
        else:
            cls = "clean-refusal"
        if errs:
            first = errs[-1]
    return dict(cmd=case.cmd, section=case.section, argv=case.argv, expect=case.expect, rc=rc, cls=cls,
                wall=round(wall, 1), names=list(case.names), first=first[:300], nlines=len(lines), note=case.note,
                env=case.env, stdout=case.stdout, node=(before, after) if case.node else None)


ORDER = ["node-replaced", "damaged-file", "internal-error", "hang", "silent-run", "bad-stdout",
         "accepted-nonsense", "misblame", "multi-line", "unexpected-refusal", "clean-refusal", "clean-ok"]
GOOD = ("clean-refusal", "clean-ok")


def short(argv: list[str]) -> str:
    return " ".join((a.replace(str(T), "$T") if a else "''") for a in argv)


def report(results: list[dict], sections: list[str]) -> str:
    from collections import Counter
    c = Counter(r["cls"] for r in results)
    by = Counter((r["section"], r["cls"]) for r in results)
    shown = [k for k in ORDER if c.get(k) or k in GOOD or k in ORDER[:-2]]
    out = ["# Adversarial input campaign", "",
           f"`validation/input_campaign.py`, {len(results)} cases in {len(sections)} sections, run "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. `$T` is the scratch fixture folder "
           "(broken profiles, models, traces, grids, logs, FIFOs, a char device made with mknod, a sparse "
           "3 GiB file).", "",
           "| class | cases |", "|---|---|"]
    for k in ORDER:
        out.append(f"| {k} | {c.get(k, 0)} |")
    out += ["", "Classes: *accepted-nonsense* exit 0 on an input that should be refused; *misblame* a "
            "one-line exit 2 that names none of the fields the user set (or says `got None`, or a phrase the "
            "case forbids); *multi-line* exit 2 with more than one stderr line; *unexpected-refusal* exit 2 on a "
            "documented command; *node-replaced* a FIFO or char device given as output changed type; "
            "*damaged-file* a file that was not the command's to replace changed; *silent-run* over "
            f"{SILENT_S:.0f} s with nothing on stderr; *bad-stdout* a full or closed standard output not ended "
            "by one error line and a non-zero exit, or a reader that stopped early not ended by 0 or 141 in "
            "silence.", "", "## Per section", "",
            "| section | cases | " + " | ".join(shown) + " |", "|---|---|" + "---|" * len(shown)]
    for sec in sections:
        n = sum(v for (s_, _), v in by.items() if s_ == sec)
        out.append(f"| {sec} | {n} | " + " | ".join(str(by.get((sec, k), 0)) for k in shown) + " |")
    out.append("")
    for k in ORDER:
        if k in GOOD:
            continue
        rows = [r for r in results if r["cls"] == k]
        if not rows:
            continue
        out += [f"## {k} ({len(rows)})", "", "| section | argv | rc | first stderr line | note |",
                "|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: r["section"]):
            env = " ".join(f"{a}={b}" for a, b in r["env"].items())
            argv = (env + " " if env else "") + short(r["argv"]) + (f" (stdout {r['stdout']})" if r["stdout"] else "")
            first = r["first"].replace("|", "\\|").replace(str(T), "$T")
            moved = r["node"] and r["node"][0] != r["node"][1]
            note = r["note"] + (f" node {r['node'][0]}->{r['node'][1]}" if moved else "")
            argv = argv.replace("|", "\\|")
            out.append(f"| {r['section']} | `{argv}` | {r['rc']} | {first} | {note} |")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    f = fixtures()
    class_fixtures(f)
    build(f)
    build_classes(f)
    os.chmod(f["ro_dir"], 0o500)
    workers = int(os.environ.get("CAMPAIGN_WORKERS", str(max(2, os.cpu_count() or 2))))
    only = {s for s in os.environ.get("CAMPAIGN_SECTIONS", "").split(",") if s}
    cases = [c for c in CASES if not only or c.section in only]
    sections = list(dict.fromkeys(c.section for c in cases))
    print(f"{len(cases)} cases in {len(sections)} sections, scratch {T}", file=sys.stderr)
    results = []
    with ThreadPoolExecutor(workers) as ex:
        for i, r in enumerate(ex.map(run, cases)):
            results.append(r)
            if r["cls"] not in GOOD:
                print(f"[{i}] {r['cls']:<18} {short(r['argv'])[:120]} :: {r['first'][:150]}", file=sys.stderr)
    if os.environ.get("CAMPAIGN_JSON"):          # every outcome, for a closer look (not committed)
        Path(os.environ["CAMPAIGN_JSON"]).write_text(json.dumps(results, indent=1, default=str))
    target = Path(os.environ.get("CAMPAIGN_REPORT") or REPO / "validation" / "input_campaign.md")
    target.write_text(report(results, sections))
    os.chmod(f["ro_dir"], 0o700)
    shutil.rmtree(T, ignore_errors=True)
    bad_cases = sum(r["cls"] not in GOOD for r in results)
    print(f"{len(results) - bad_cases} clean, {bad_cases} in a bad class; report {target}", file=sys.stderr)
    return 1 if bad_cases else 0


if __name__ == "__main__":
    sys.exit(main())

"""``moesim calibrate device``: reading llama-bench / fio / TTFT logs, the fit on a real published
log, the round trip on a profile's own simulated measurements, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from moesim.calibrate.bench_logs import parse_llama_bench, read_llama_bench, unit_of
from moesim.calibrate.device_figures import bench_figures, fio_figures
from moesim.calibrate.device_fit import fit_device, with_fitted
from moesim.calibrate.device_synth import fio_json, llama_bench_json
from moesim.calibrate.io_logs import parse_fio, read_ttft_log
from moesim.config.profiles import load_profile, phone_profile
from moesim.errors import InputError

REPO = Path(__file__).resolve().parents[2]
SLOTS = 32            # the bundled phone's ufs.queue_slots_count
REAL_LOG = REPO / "validation/logs/llamacpp-pr23368-s26plus-htp0-qwen3-4b.md"
TRUTH = {"cpu.q4_0_gemv_GBps": 30.0, "cpu.q4_0_gemm_GFLOPS": 400.0, "cpu.attention_GFLOPS": 80.0,
         "ufs.effective_read_bw_GBps": 3.1, "ufs.read_latency_us": 12.0, "htp.hmx_fp16_TFLOPS": 8.0,
         "htp.hvx_efficiency_ratio": 0.35, "htp.graph_overhead_us": 1500.0}


@pytest.fixture(scope="module")
def base():  # type: ignore[no-untyped-def]
    return phone_profile("sd8-elite-gen5")


def test_real_log_reads_as_published() -> None:
    rows = read_llama_bench(REAL_LOG)
    assert [r.test for r in rows][:3] == ["pp25", "pp128", "pp200"]
    assert {r.unit for r in rows} == {"htp"} and len(rows) == 11
    assert rows[6].n_prompt == 512 and rows[6].avg_ts == 689.97 and rows[6].stddev_ts == 4.18
    figures, excluded = bench_figures(rows)
    assert [e.test for e in excluded] == ["pp25"] and len(figures) == 10


def test_real_log_acceptance(base) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: the fit reproduces the log's figures within 10% and predicts one it did not use within 15%."""
    figures, _ = bench_figures(read_llama_bench(REAL_LOG))
    full = fit_device(base, figures).groups[0]
    assert not full.at_bound
    assert max(abs(f.error) for f in full.figures) < 0.10
    held = fit_device(base, figures, ["htp:pp2048"]).groups[0]
    (out,) = [f for f in held.figures if not f.used]
    assert out.name == "htp:pp2048" and abs(out.error) < 0.15
    assert out.interval is not None and out.interval[0] < out.measured < out.interval[1]
    assert max(abs(f.error) for f in held.figures if f.used) < 0.10


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "md"])
def test_formats_read_alike(base, fmt: str) -> None:  # type: ignore[no-untyped-def]
    text = llama_bench_json(base, prompts=(128, 512))
    records = json.loads(text)
    if fmt == "jsonl":
        text = "\n".join(json.dumps(r) for r in records) + "\n"
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(records[0]), quoting=csv.QUOTE_NONNUMERIC)
        writer.writeheader()
        writer.writerows(records)
        text = buf.getvalue()
    elif fmt == "md":
        lines = ["| model | backend | ngl | dev | test | t/s |", "| --- | --- | --: | --- | --: | --: |"]
        lines += [f"| {r['model_type']} | {r['backends']} | {r['n_gpu_layers']} | {r['devices']} | "
                  f"{'pp' + str(r['n_prompt']) if r['n_prompt'] else 'tg' + str(r['n_gen'])} | {r['avg_ts']} ± 0.00 |"
                  for r in records]
        text = "\n".join(lines) + "\n"
    rows = parse_llama_bench(text, f"log.{fmt}")
    assert [(r.unit, r.n_prompt, r.n_gen) for r in rows] == [
        ("cpu", 128, 0), ("cpu", 512, 0), ("cpu", 0, 128), ("htp", 128, 0), ("htp", 512, 0)]
    assert [r.avg_ts for r in rows] == pytest.approx([r["avg_ts"] for r in records])


def test_unit_from_columns() -> None:
    assert unit_of("HTP", 99, "HTP0") == "htp"
    assert unit_of("HTP", 0, None) == "cpu"
    assert unit_of("CPU", None, "none") == "cpu"
    assert unit_of("OpenCL", 99, "GPUOpenCL") == "other"
    assert unit_of("CUDA", 99, None) == "other"


def test_round_trip_recovers_the_profile(base, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """A profile's own measurements, fitted from another base, give back its numbers."""
    truth = with_fitted(base, TRUTH)
    bench, fio = tmp_path / "bench.json", tmp_path / "fio.json"
    bench.write_text(llama_bench_json(truth))
    fio.write_text(fio_json(truth))
    out = tmp_path / "mine.toml"
    res = run_cli("calibrate", "device", "mine", "--llama-bench", str(bench), "--fio", str(fio), "--out", str(out))
    assert res.code == 0, res.err
    fitted = load_profile(out)
    for dotted, value in TRUTH.items():
        section, _, field = dotted.partition(".")
        assert getattr(getattr(fitted, section), field) == pytest.approx(value, rel=1e-5), dotted
        log = fio if dotted.startswith("ufs") else bench
        assert getattr(fitted, section).provenance[field].startswith(f"fitted: from {log}")
    assert fitted.name == "mine" and fitted.memory == base.memory


def test_json_output_and_no_write(base, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(REAL_LOG), "--hold-out", "htp:pp2048",
                  "--no-write", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["written"] is None and {f["field"] for f in doc["fields"]} == {
        "htp.hmx_fp16_TFLOPS", "htp.hvx_efficiency_ratio", "htp.graph_overhead_us"}
    assert [f["name"] for f in doc["figures"] if not f["used"]] == ["htp:pp2048"]
    assert doc["excluded"][0]["test"] == "pp25"


def _fio(jobs: list[dict[str, object]], glob: dict[str, str] | None = None) -> str:
    return json.dumps({"global options": glob or {}, "jobs": jobs})


def test_fio_options_and_depth() -> None:
    job = {"jobname": "a", "job options": {"bs": "512k"}, "read": {"bw_bytes": 3.5e9}}
    (pt,) = parse_fio(_fio([job], {"rw": "randread", "direct": "1", "iodepth": "8", "ioengine": "psync"}), "f",
                      SLOTS)
    assert (pt.block_B, pt.queue_depth, pt.read_GBps) == (524288, 1, 3.5)      # psync: one read in flight
    (pt,) = parse_fio(_fio([job], {"rw": "read", "direct": "1", "iodepth": "4", "numjobs": "2",
                                   "group_reporting": "1"}), "f", SLOTS)
    assert pt.queue_depth == 8
    write = {"jobname": "w", "job options": {"rw": "write", "bs": "4k"}, "write": {"bw_bytes": 1}}
    assert len(parse_fio(_fio([job, write], {"direct": "1"}), "f", SLOTS)) == 1


@pytest.mark.parametrize(("jobs", "glob", "message"), [
    ([{"jobname": "a", "job options": {"bs": "4k"}, "read": {"bw_bytes": 1e8}}], {},
     "f: jobs[0] (a): direct must be 1"),
    ([{"jobname": "a", "read": {"bw_bytes": 1e8}}], {"direct": "1"}, "f: jobs[0] (a): bs is required"),
    ([{"jobname": "a", "job options": {"bs": "4k"}, "read": {"bw_bytes": 0}}], {"direct": "1"},
     "f: jobs[0] (a): read.bw_bytes must be > 0"),
    ([{"jobname": "a", "job options": {"bs": "4q"}, "read": {"bw_bytes": 1}}], {"direct": "1"},
     "f: jobs[0] (a): bs must be one fio size"),
])
def test_fio_errors(jobs: list[dict[str, object]], glob: dict[str, str], message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_fio(_fio(jobs, glob), "f", SLOTS)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(("text", "message"), [
    ("", "log.md is empty"),
    ("| model | test | t/s |\n| --- | --- | --- |\n| qwen3 4B Q4_0 | pp512 | fast |\n",
     "log.md: line 3: t/s must be 'AVG ± STDDEV'"),
    ("| model | test | t/s |\n| --- | --- | --- |\n| qwen3 4B Q4_0 | pq512 | 1.0 ± 0 |\n",
     "log.md: line 3: test must be a llama-bench test name"),
    ('[{"model_type": "qwen3 4B Q4_0", "n_prompt": 512, "n_gen": 0}]', "log.md: record 1: avg_ts is required"),
    ('[{"model_type": "qwen3 4B Q4_0", "n_prompt": 512, "n_gen": 0, "avg_ts": -3}]',
     "log.md: record 1: avg_ts must be a finite number > 0, got -3"),
    ('{"model_type": "q", "n_prompt": "x", "n_gen": 0, "avg_ts": 1}\n', "log.md: line 1: n_prompt must be a whole"),
])
def test_llama_bench_errors(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_llama_bench(text, "log.md")
    assert str(info.value).startswith(message)


def test_cli_errors_are_one_line(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    gemma = tmp_path / "gemma.md"
    gemma.write_text("| model | dev | test | t/s |\n| - | - | - | - |\n| gemma4 E2B Q4_0 | HTP0 | pp512 | 9 ± 1 |\n")
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(gemma), "--no-write")
    assert res.code == 2 and res.err.count("\n") == 1
    assert f"{gemma}: line 3: model_type must be one of the dense shapes" in res.err
    few = tmp_path / "few.md"
    few.write_text("| model | dev | test | t/s |\n| - | - | - | - |\n| qwen3 4B Q4_0 | HTP0 | pp512 | 9 ± 1 |\n")
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(few), "--no-write")
    assert res.code == 2 and "htp figures must number at least 3" in res.err
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(REAL_LOG), "--hold-out", "htp:pp9", "--no-write")
    assert res.code == 2 and "--hold-out must name figures of the logs" in res.err
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(REAL_LOG), "--out", str(tmp_path))
    assert res.code == 2 and res.err.count("\n") == 1
    existing = tmp_path / "x.toml"
    existing.write_text("keep")
    res = run_cli("calibrate", "device", "x", "--llama-bench", str(REAL_LOG), "--out", str(existing))
    assert res.code == 2 and "--force" in res.err and existing.read_text() == "keep"
    from moesim.config.profiles import profile_dir

    res = run_cli("calibrate", "device", "x", "--llama-bench", str(REAL_LOG), "--out", str(profile_dir() / "y.toml"))
    assert res.code == 2 and "--out must be x.toml in the bundled profile folder" in res.err
    assert not (profile_dir() / "y.toml").exists()
    res = run_cli("calibrate", "device", "Bad_Name", "--llama-bench", str(REAL_LOG))
    assert res.code == 2 and "NAME must be a profile name" in res.err


def test_ttft_log(tmp_path: Path) -> None:
    log = tmp_path / "ttft.csv"
    log.write_text("model,tokens,ttft_s,group_size,banks,source\nolmoe-1b-7b,4096,2.12,32,2,EStream paper\n")
    (pt,) = read_ttft_log(log)
    assert (pt.model, pt.tokens, pt.ttft_s, pt.group_size, pt.banks) == ("olmoe-1b-7b", 4096, 2.12, 32, 2)
    log.write_text("model,tokens\nolmoe-1b-7b,4096\n")
    with pytest.raises(InputError, match="ttft_s must be columns of the TTFT log"):
        read_ttft_log(log)
    log.write_text("model,tokens,ttft_s\nolmoe-1b-7b,4096,-1\n")
    with pytest.raises(InputError, match=r"ttft.csv: line 2: ttft_s must be a finite number > 0"):
        read_ttft_log(log)


def test_fio_round_trip_alone(base) -> None:  # type: ignore[no-untyped-def]
    truth = with_fitted(base, {"ufs.effective_read_bw_GBps": 2.0, "ufs.read_latency_us": 40.0})
    fit = fit_device(base, fio_figures(parse_fio(fio_json(truth, (4, 64, 1024), (1, 4)), "f", SLOTS)))
    assert fit.values == pytest.approx({"ufs.effective_read_bw_GBps": 2.0, "ufs.read_latency_us": 40.0}, rel=1e-6)
    (group,) = fit.groups
    assert group.dof == 4 and all(f.interval is not None for f in group.figures)


@pytest.mark.slow
def test_ttft_log_joins_the_htp_fit(base) -> None:  # type: ignore[no-untyped-def]
    """EStream's OLMoE 4K TTFT beside the S26+ log: fitted within 10%, the dense points too."""
    from moesim.calibrate.device_figures import ttft_figures

    figures, _ = bench_figures(read_llama_bench(REAL_LOG))
    figures += ttft_figures(read_ttft_log(REPO / "validation/logs/estream-olmoe-ttft.csv"))
    (group,) = fit_device(base, figures).groups
    assert not group.at_bound
    assert {f.name for f in group.figures} >= {"ttft:olmoe-1b-7b:4096", "htp:pp512"}
    assert max(abs(f.error) for f in group.figures) < 0.10

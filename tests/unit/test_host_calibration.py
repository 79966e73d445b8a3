"""Host calibration: the fits recover known parameters; the executor model is consistent."""

import numpy as np
import pandas as pd
import pytest

from moesim.calibrate.host import executor_model, fit_host, predict_executor, render_host_profile
from moesim.calibrate.host_runs import CASES, routing_for
from moesim.config.device import HostProfile
from moesim.config.profiles import load_profile


def _tables(lat_ns: float, bw: float, dq: float, rate: float, rn: float):  # type: ignore[no-untyped-def]
    sizes = [256 << 10, 1 << 20, 4 << 20, 16 << 20]
    read = pd.DataFrame({"pattern": "seq", "queue_depth": 1, "request_B": sizes,
                         "latency_ns_median": [lat_ns + s / bw for s in sizes]})
    rows = [(h, i, t) for h, i in ((1024, 512), (2048, 1024)) for t in (1, 8, 64, 256)]
    ffn = pd.DataFrame(rows, columns=["hidden", "inter", "tokens"])
    ffn["time_ns_median"] = 3 * ffn.hidden * ffn.inter * 18 / 32 / dq + 6 * ffn.hidden * ffn.inter * ffn.tokens / rate
    nonffn = pd.DataFrame([(t, d) for t in (64, 256) for d in (512, 1024)], columns=["tokens", "dim"])
    nonffn["time_ns_median"] = 2 * nonffn.tokens * nonffn.dim ** 2 / rn
    return read, ffn, nonffn


def test_fit_recovers_parameters() -> None:
    fit = fit_host(*_tables(40_000.0, 1.7, 5.5, 120.0, 110.0))
    assert fit.read_latency_us == pytest.approx(40.0, rel=1e-4)
    assert fit.read_bw_GBps == pytest.approx(1.7, rel=1e-4)
    assert fit.dequant_GBps == pytest.approx(5.5, rel=1e-4)
    assert fit.ffn_GFLOPS == pytest.approx(120.0, rel=1e-4)
    assert fit.nonffn_GFLOPS == pytest.approx(110.0, rel=1e-4)
    assert max(fit.residuals.values()) < 1e-6


def test_rendered_profile_validates_and_predicts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fit = fit_host(*_tables(40_000.0, 1.7, 5.5, 120.0, 110.0))
    path = tmp_path / "host.toml"
    path.write_text(render_host_profile(fit, "test tables", "ext4", "/dev/test").replace('"host"', '"test-host"', 1))
    profile = load_profile(path)
    assert isinstance(profile, HostProfile)
    slow_disk = load_profile(path)
    case = CASES[0]
    layers, experts, hidden, inter, k = case.shape
    model = executor_model(layers, experts, hidden, inter, k)
    routing = routing_for(case)
    t, bubble = predict_executor(profile, model, routing, case.group_size, case.banks, case.queue_depth,
                                 case.prefetch, nonffn_dim=hidden)
    assert t > 0 and 0 <= bubble <= 1
    # compute-only lower bound: every routed expert's FFN, back to back
    counts = np.zeros((layers, experts), dtype=int)
    for layer in range(layers):
        counts[layer] = np.bincount(routing[:, layer].ravel(), minlength=experts)
    w = 3 * hidden * inter * 18 / 32
    ffn_ns = sum(w / 5.5 + 6 * hidden * inter * c / 120.0 for c in counts.ravel() if c)
    assert t * 1e9 >= ffn_ns
    assert slow_disk.name == "test-host"


def test_disk_probe_reads_every_expert_at_each_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The disk probe runs the real executor: every expert of every layer read once per run, for
    each probed group size and depth; the probe's rate is the median run rate."""
    from moesim.calibrate.host import PROBE_DEPTHS, PROBE_GROUPS, busy_ns, probe_spread, probe_stream_bw
    from moesim.native import cpu

    try:
        cpu.build()
    except cpu.NativeBuildError as err:
        pytest.skip(str(err))
    layers, experts, hidden, inter = 2, 16, 256, 128
    rate, table = probe_stream_bw(tmp_path, layers, experts, hidden, inter, repeats=1)
    stride_B = cpu.ExpertShape(layers, experts, hidden, inter).expert_stride_bytes   # reads are 4096-padded
    runs = table.groupby(["repeat", "group_size", "queue_depth"])
    assert len(runs) == len(PROBE_GROUPS) * len(PROBE_DEPTHS)
    for (_, g, _), r in runs:
        assert r.bytes.sum() == layers * experts * stride_B
        assert len(r) == layers * -(-experts // g)
        assert r.run_busy_ns.iloc[0] == busy_ns(r.start_ns.tolist(), r.end_ns.tolist())
    per_run = runs.bytes.sum() / runs.run_busy_ns.first()
    assert rate == pytest.approx(float(per_run.median()))
    lo, hi = probe_spread(table)
    assert 0 < lo <= rate <= hi


def test_autoconfig_sweep_measures_every_configuration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The measured sweep runs the real executor on every configuration of each budget's space;
    the best is the fastest measured, the choice is inside the space, regret is never negative."""
    from moesim.calibrate.host_autoconfig import host_service_times, sweep
    from moesim.native import cpu
    from moesim.policies.prefill.search import build_profile, space

    try:
        cpu.build()
    except cpu.NativeBuildError as err:
        pytest.skip(str(err))
    profile = load_profile("host")
    assert isinstance(profile, HostProfile)
    shape = (2, 4, 256, 128, 2)
    rng = np.random.default_rng(0)
    routing = np.array([[rng.choice(4, size=2, replace=False) for _ in range(2)] for _ in range(8)], dtype=np.int16)
    cases = sweep(profile, shape, routing, [2, 4], tmp_path / "work", repeats=2, duel_rounds=3)
    stored = build_profile(host_service_times(profile, executor_model(*shape), routing, 256))
    for case in cases:
        assert set(case.samples) == set(space(stored, case.arena_experts * stored.st.expert_B))
        assert all(len(v) == 2 and min(v) > 0 for v in case.samples.values())
        assert case.chosen in case.samples and set(case.predicted) == set(case.samples)
        assert case.best_measured_s == min(min(v) for v in case.samples.values())
        assert case.regret >= 0 and case.resolution >= 0
        assert len(case.round_minima()) == 2
        if case.chosen == case.best:
            assert case.duel is None and case.indistinguishable
        else:
            assert case.duel is not None and [len(v) for v in case.duel] == [3, 3]
            p = case.duel_p
            assert p is not None and 0 < p <= 1 and case.indistinguishable == (p > 0.05)


def test_disk_deciles_round_trip_and_expected_prediction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A profile carries the disk as deciles of probe run rates; the expected prediction is the
    mean of the predictions at each decile (slower disk -> longer makespan)."""
    from dataclasses import replace

    from moesim.calibrate.host_runs import predict_case, predict_case_expected

    deciles = (1.2, 1.25, 1.3, 1.5, 1.7, 2.1, 2.4, 2.6, 2.8)
    fit = replace(fit_host(*_tables(40_000.0, 1.7, 5.5, 120.0, 110.0)), read_bw_deciles_GBps=deciles)
    path = tmp_path / "host.toml"
    path.write_text(render_host_profile(fit, "test tables", "ext4", "/dev/test").replace('"host"', '"test-host"', 1))
    profile = load_profile(path)
    assert isinstance(profile, HostProfile)
    assert profile.storage.read_bw_deciles_GBps == list(deciles)
    assert profile.storage.provenance["read_bw_deciles_GBps"].startswith("measured:")
    case = next(c for c in CASES if "ondemand" in c.name)
    runs = [predict_case(profile, case, r) for r in deciles]
    assert [r[0] for r in runs] == sorted((r[0] for r in runs), reverse=True)
    mean_t, mean_b = predict_case_expected(profile, case)
    assert mean_t == pytest.approx(float(np.mean([r[0] for r in runs])))
    assert mean_b == pytest.approx(float(np.mean([r[1] for r in runs])))


@pytest.mark.parametrize("line, message", [
    ("read_bw_deciles = [1.2, 1.5]", "storage.read_bw_deciles is a number without a unit suffix"),
    ("read_bw_deciles_GBps = [1.2, -1.5]", "read_bw_deciles_GBps"),
])
def test_bad_disk_deciles_are_refused(tmp_path, line: str, message: str) -> None:  # type: ignore[no-untyped-def]
    from moesim.errors import InputError

    text = render_host_profile(fit_host(*_tables(40_000.0, 1.7, 5.5, 120.0, 110.0)), "t", "ext4", "/dev/t")
    text = text.replace("queue_slots_count = 8", f"{line}\nqueue_slots_count = 8", 1)
    text = text.replace('queue_slots_count = "assumed',
                        'read_bw_deciles_GBps = "measured: test"\nqueue_slots_count = "assumed', 1)
    path = tmp_path / "host.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        load_profile(path)


def test_machine_description_names_cpu_cores_disk_and_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import platform

    from moesim.calibrate.host import describe_machine

    text = describe_machine(tmp_path, "ext4")
    assert f"{os.cpu_count()} cores" in text and "disk " in text and "ext4" in text
    assert text.endswith(f"Linux {platform.release()}")


@pytest.mark.parametrize("kwargs, message", [
    ({"repeats": 0}, "repeats must be an integer >= 1, got 0"),
    ({"duel_rounds": -1}, "duel_rounds must be an integer >= 0, got -1"),
    ({"arena": []}, "arena_experts must be a non-empty list of integers >= 1"),
])
def test_autoconfig_sweep_rejects_bad_counts(tmp_path, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    from moesim.calibrate.host_autoconfig import sweep
    from moesim.errors import InputError

    profile = load_profile("host")
    routing = np.zeros((4, 2, 2), dtype=np.int16)
    routing[:, :, 1] = 1
    arena = kwargs.pop("arena", [2])
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        sweep(profile, (2, 4, 256, 128, 2), routing, arena, tmp_path, **kwargs)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())     # refused before anything was written

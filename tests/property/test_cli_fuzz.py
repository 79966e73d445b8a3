"""Fuzzing the command line (issue 17): hypothesis-generated command lines, device profiles and
sweep grids, run in-process through the real entry point. Whatever the input, the CLI ends with
exit 0, or exit 2 and one line on stderr naming the problem; never exit 1 (an internal error),
never a traceback, never a temporary file left behind. (Corrupted trace files are fuzzed in
test_traces_fuzz.py.)"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moesim.cli import main
from moesim.config.profiles import profile_dir
from tests.strategies import FUZZ_SETTINGS

CLI_SETTINGS = settings(FUZZ_SETTINGS,
                        suppress_health_check=[*FUZZ_SETTINGS.suppress_health_check,
                                               HealthCheck.function_scoped_fixture])

_INTS = st.one_of(st.integers(1, 300), st.integers(-10, 0), st.integers(10**9, 10**25),
                  st.sampled_from(["x", "", "1e3", "3.5", "0x10"]))
_FLOATS = st.one_of(st.floats(0.01, 20.0), st.sampled_from(["inf", "-inf", "nan", "0", "-1", "abc", "1e308"]))
_PATHS = st.sampled_from(["/proc/x.json", "/no/such/dir/out.json", "{tmp}/out.json", "{tmp}", "{tmp}/out.txt"])
_NAMES = st.sampled_from(["olmoe-1b-7b", "mixtral-8x7b", "nope", "", "../etc/passwd", "sd8-elite-gen5",
                          "h200x8-hf", "x.toml"])
_SETS = st.sampled_from(["ufs.effective_read_bw_GBps=2.0", "ufs.peak_read_bw_GBps=8", "htp.nope=1",
                         "memory.capacity_GiB=1e308", "ufs.effective_read_bw_GBps=-1", "garbage", "a.b=c",
                         "ufs.queue_slots_count=0.5", "memory.runtime_overhead_MiB=1e12",
                         "memory.runtime_overhead_MiB=15400", "arena.max_mapped_GiB=0.001", "htp.clock_GHz=2150"])


def _option(command: str) -> st.SearchStrategy[list[str]]:
    common = {"--tokens": _INTS, "--model": _NAMES, "--device": _NAMES, "--seed": _INTS, "--set": _SETS}
    per = {
        "prefill": {"--memory-budget-gib": _FLOATS, "--group-size": _INTS, "--banks": _INTS, "--queue-depth": _INTS,
                    "--policy": st.sampled_from(["estream", "naive", "cpu", "warp"]), "--timeline": _PATHS,
                    "--prefetch": st.sampled_from(["non-ffn", "on-demand", "later"])},
        "compare": {"--memory-budget-gib": _FLOATS, "--policies": st.sampled_from(["estream,naive", "", "x,naive"]),
                    "--baseline": st.sampled_from(["naive", "resident", "x"]), "--plot": _PATHS},
        "autoconfig": {"--memory-budget-gib": _FLOATS, "--plot": _PATHS},
        "decode": {"--cache-gib": _FLOATS, "--context": _INTS, "--gamma": _INTS, "--queue-depth": _INTS,
                   "--cache-policy": st.sampled_from(["lru", "lfu", "pinned", "resident", "mmap", "none", "x"]),
                   "--spec": st.sampled_from(["none", "confidence", "cache-aware", "y"]),
                   "--prefetch": st.sampled_from(["none", "next-layer"]), "--read-group-size": _INTS,
                   "--pinned-share": _FLOATS, "--temperature": st.sampled_from(["0", "1", "0.5", "x"]),
                   "--expert-format": st.sampled_from(["Q4_0", "MXFP4", "Q9"]),
                   "--backend": st.sampled_from(["cpu", "npu"]), "--warmup-tokens": _INTS,
                   "--predictor": st.sampled_from(["oracle", "trace", "accuracy:0.5", "accuracy:3", "z"]),
                   "--memory-budget-gib": _FLOATS, "--autoconfig": st.just(""), "--timeline": _PATHS},
        "specdecode": {"--gamma": _INTS, "--passes": _INTS, "--predictor": st.sampled_from(["oracle", "accuracy:2",
                                                                                            "accuracy:0.9", "x"]),
                       "--gamma-sweep": st.sampled_from(["", "1,2", "0", "a"])},
    }[command]
    if command == "specdecode":
        common = {"--seed": _INTS, "--set": st.sampled_from(["runtime.per_step_fixed_ms=1", "runtime.nope=1"])}
    options = {**common, **per}
    return st.sampled_from(sorted(options)).flatmap(lambda k: options[k].map(lambda v: [k, str(v)]))


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["prefill", "compare", "autoconfig", "specdecode", "decode"]))
    args = [command]
    for opt in draw(st.lists(_option(command), min_size=1, max_size=4)):
        args += opt
    if command in ("prefill", "compare", "autoconfig") and "--tokens" not in args:
        args += ["--tokens", "64"]          # keep valid runs short
    if command == "specdecode" and "--passes" not in args:
        args += ["--passes", "1"]
    if command == "decode":   # small runs of a small model; flags take no value
        args = [a for a in args if a != ""]
        args += [] if "--model" in args else ["--model", "olmoe-1b-7b"]
        if "--tokens" not in args:
            args += ["--tokens", "4"]
    return args


def _ends_cleanly(args: list[str], capsys: pytest.CaptureFixture[str], files: dict[str, str] | None = None,
                  after: Callable[[int, Path], None] | None = None) -> None:
    """Run ``moesim ARGS`` in a fresh folder (``{tmp}`` in an argument names it; ``files`` are
    written there first) and check how it ended; ``after(code, folder)`` checks more."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, text in (files or {}).items():
            (tmp / name).write_text(text)
        args = [a.replace("{tmp}", d) for a in args]
        capsys.readouterr()
        code = main(args)
        _check(code, capsys.readouterr().err, args, tmp)
        if after is not None:
            after(code, tmp)


def _check(code: int, err: str, args: list[str], tmp: Path) -> None:
    assert code in (0, 2), f"exit {code} for {args}: {err}"
    assert "Traceback" not in err and "internal error" not in err, f"{args}: {err}"
    if code == 2:
        errors = [ln for ln in err.strip().splitlines() if not ln.startswith("warning:")]
        assert len(errors) == 1 and errors[0].startswith("moesim: error: "), f"{args}: {err}"
    leftovers = [p.name for p in tmp.rglob("*") if p.name.endswith(".tmp") or p.name.endswith(".parts")]
    assert not leftovers, f"{args} left {leftovers}"


@CLI_SETTINGS
@given(args=command_lines())
def test_fuzzed_command_lines_end_cleanly(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    _ends_cleanly(args, capsys)


_NUMBER = re.compile(r"^([a-z_0-9A-Z]+) = (-?[0-9.eE+]+)$", re.M)
_VALUES = st.one_of(st.sampled_from(["-1", "0", "true", '"x"', "1e308", "nan", "inf", "[1, 2]", "{a = 1}", ""]),
                    st.floats(-1e3, 1e3, allow_nan=False).map(repr))


@st.composite
def broken_profiles(draw: st.DrawFn) -> str:
    text = (profile_dir() / "sd8-elite-gen5.toml").read_text()
    numbers = list(_NUMBER.finditer(text))
    for _ in range(draw(st.integers(1, 3))):
        m = numbers[draw(st.integers(0, len(numbers) - 1))]
        text = text.replace(m.group(0), f"{m.group(1)} = {draw(_VALUES)}", 1)
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut]
    return text


@CLI_SETTINGS
@given(text=broken_profiles())
def test_fuzzed_profiles_end_cleanly(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    _ends_cleanly(["prefill", "--tokens", "64", "--policy", "naive", "--device", "{tmp}/p.toml"], capsys,
                  files={"p.toml": text})


_SHAPE_VALUES = st.one_of(st.sampled_from(["0", "-1", "1e10", "10000000000", "1000000", "65537", "true", '"x"']),
                          st.integers(1, 70_000).map(str))


@st.composite
def broken_models(draw: st.DrawFn) -> str:
    """The catalog's OLMoE under a name of its own, with one to three shape numbers replaced
    (absurd, out of range, or in range one by one but not together)."""
    from moesim.config.catalog import CATALOG_DIR

    text = (CATALOG_DIR / "olmoe-1b-7b.toml").read_text().replace('"olmoe-1b-7b"', '"my-olmoe"', 1)
    numbers = list(_NUMBER.finditer(text))
    for _ in range(draw(st.integers(1, 3))):
        m = numbers[draw(st.integers(0, len(numbers) - 1))]
        text = text.replace(m.group(0), f"{m.group(1)} = {draw(_SHAPE_VALUES)}", 1)
    return text


@CLI_SETTINGS
@given(text=broken_models())
def test_fuzzed_models_end_cleanly(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Loaded and sized (``moesim models --model``): a shape outside its physical range is refused
    when the file is read, naming the file and the field, never by an overflow later."""
    _ends_cleanly(["models", "--model", "{tmp}/m.toml", "--json"], capsys, files={"m.toml": text})


_AXIS_VALUES: dict[str, Callable[[], st.SearchStrategy[object]]] = {
    "tokens": lambda: st.one_of(st.integers(-5, 200), st.booleans(), st.just("x")),
    "policy": lambda: st.sampled_from(["naive", "resident", "warp", 3]),
    "ufs.effective_read_bw_GBps": lambda: st.one_of(st.floats(-1.0, 6.0, allow_nan=False), st.just("fast")),
    "banks": lambda: st.integers(-2, 6),
    "memory_budget_GiB": lambda: st.one_of(st.floats(0.1, 20.0), st.just(-1.0)),
}


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and not math.isfinite(value):
        return "nan"
    return repr(value)


@st.composite
def grids(draw: st.DrawFn) -> str:
    names = draw(st.lists(st.sampled_from(sorted(_AXIS_VALUES)), min_size=1, max_size=3, unique=True))
    lines = ["[fixed]", 'workload = "prefill"', 'model = "olmoe-1b-7b"']
    if "tokens" not in names:
        lines.append("tokens = 64")
    lines.append("[axes]")
    for name in names:
        values = draw(st.lists(_AXIS_VALUES[name](), min_size=0, max_size=2))
        lines.append(f"{name} = [{', '.join(_toml(v) for v in values)}]")
    return "\n".join(lines) + "\n"


@CLI_SETTINGS
@given(text=grids())
def test_fuzzed_grids_end_cleanly(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    def output_is_0644(code: int, tmp: Path) -> None:
        if code == 0:
            assert (tmp / "out.parquet").stat().st_mode & 0o777 == 0o644

    _ends_cleanly(["sweep", "{tmp}/grid.toml", "-o", "{tmp}/out.parquet", "--workers", "1", "--quiet"], capsys,
                  files={"grid.toml": text}, after=output_is_0644)

"""Fuzzing the command line (issue 17): hypothesis-generated command lines, device profiles and
sweep grids, run in-process through the real entry point. Whatever the input, the CLI ends with
exit 0, or exit 2 and one line on stderr naming the problem; never exit 1 (an internal error),
never a traceback, never a temporary file left behind. (Corrupted trace files are fuzzed in
test_traces_fuzz.py.)"""

from __future__ import annotations

import math
import os
import re
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moesim.cli import main
from moesim.config.profiles import profile_dir
from moesim.sweep.lock import sweep_lock
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
        "compare": {"--memory-budget-gib": st.one_of(_FLOATS, st.sampled_from(["0.1", "0.55"])),
                    "--policies": st.sampled_from(["estream,naive", "", "x,naive", "estream,cpu", "naive"]),
                    "--baseline": st.sampled_from(["naive", "resident", "x"]), "--plot": _PATHS,
                    "--tokens": st.one_of(_INTS, st.sampled_from(["64,,128", "64,64", ",64", "64,"]))},
        "autoconfig": {"--memory-budget-gib": _FLOATS, "--plot": _PATHS},
        "decode": {"--cache-gib": _FLOATS, "--context": _INTS, "--gamma": _INTS, "--queue-depth": _INTS,
                   "--cache-policy": st.sampled_from(["lru", "lfu", "pinned", "resident", "mmap", "none", "x"]),
                   "--selector": st.sampled_from(["none", "confidence", "cache-aware", "y"]),
                   "--prefetch": st.sampled_from(["none", "next-layer"]), "--read-group-size": _INTS,
                   "--pinned-share": _FLOATS, "--temperature": st.sampled_from(["0", "1", "0.5", "x"]),
                   "--expert-format": st.sampled_from(["Q4_0", "MXFP4", "Q9"]),
                   "--backend": st.sampled_from(["cpu", "npu"]), "--warmup-tokens": _INTS,
                   "--predictor": st.sampled_from(["oracle", "learned", "accuracy:0.5", "accuracy:3", "z"]),
                   "--memory-budget-gib": _FLOATS, "--autoconfig": st.just(""), "--timeline": _PATHS,
                   # combinations that ignore or clamp an option (issue 23): refused with one line
                   "--depth": _INTS, "--width": _INTS, "--pinned-by": st.sampled_from(["graph", "frequency"]),
                   "--read-grouping": st.sampled_from(["graph", "id"]), "--draft-mu": _FLOATS,
                   "--draft-routing": st.sampled_from(["mixture", "nearby:8", "alternative", "q"])},
        "specdecode": {"--gamma": _INTS, "--passes": _INTS, "--predictor": st.sampled_from(["oracle", "accuracy:2",
                                                                                            "accuracy:0.9", "x"]),
                       "--gamma-sweep": st.sampled_from(["", "1,2", "0", "a"]),
                       "--selector": st.sampled_from(["confidence", "ecospec", "global-cost", "w"]),
                       "--epsilon": _FLOATS, "--t-pred-ms": _FLOATS, "--t-draft-ms": _FLOATS},
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
        if "--autoconfig" in args and "--cache-policy" not in args:
            args += ["--cache-policy", "lru"]   # one policy's 10 settings, not three policies' 30
    return args


def _ends_cleanly(args: list[str], capsys: pytest.CaptureFixture[str], files: dict[str, str] | None = None,
                  after: Callable[[int, Path, str], None] | None = None) -> None:
    """Run ``moesim ARGS`` in a fresh folder (``{tmp}`` in an argument names it; ``files`` are
    written there first) and check how it ended; ``after(code, folder, stdout)`` checks more."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, text in (files or {}).items():
            (tmp / name).write_text(text)
        args = [a.replace("{tmp}", d) for a in args]
        capsys.readouterr()
        code = main(args)
        out, err = capsys.readouterr()
        _check(code, err, args, tmp)
        if after is not None:
            after(code, tmp, out)


def _check(code: int, err: str, args: list[str], tmp: Path) -> None:
    assert code in (0, 2), f"exit {code} for {args}: {err}"
    assert "Traceback" not in err and "internal error" not in err, f"{args}: {err}"
    if code == 2:
        errors = [ln for ln in err.strip().splitlines() if not ln.startswith("warning:")]
        assert len(errors) == 1 and errors[0].startswith("moesim: error: "), f"{args}: {err}"
    leftovers = [p.name for p in tmp.rglob("*") if p.name.endswith((".tmp", ".parts", ".lock"))]
    assert not leftovers, f"{args} left {leftovers}"


@CLI_SETTINGS
@given(args=command_lines())
def test_fuzzed_command_lines_end_cleanly(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    def some_row_ran(code: int, tmp: Path, out: str) -> None:
        """compare exits 0 only when a row ran (a table of "cannot run" rows is exit 2)."""
        if args[0] == "compare" and code == 0 and "--json" not in args:
            rows = out.splitlines()[3:]
            assert any("cannot run" not in row for row in rows), f"{args}: exit 0 and no row ran"

    _ends_cleanly(args, capsys, after=some_row_ran)


#: decode options that a combination ignores, and the combination that ignores them (issue 23)
_IGNORED = {"--gamma": "3", "--depth": "2", "--width": "3", "--draft-routing": "nearby:8", "--draft-mu": "1.5",
            "--temperature": "1", "--predictor": "oracle", "--pinned-share": "0.3", "--pinned-by": "frequency",
            "--read-grouping": "id"}


@st.composite
def ignored_decode_options(draw: st.DrawFn) -> tuple[str, list[str]]:
    """An option that nothing in the rest of the command line reads, and the command line."""
    option = draw(st.sampled_from(sorted(_IGNORED)))
    policy = draw(st.sampled_from(["lru", "lfu"] if option.startswith("--pinned") else ["lru", "lfu", "pinned"]))
    args = ["decode", "--model", "olmoe-1b-7b", "--tokens", "4", "--cache-policy", policy, option, _IGNORED[option]]
    if option not in ("--predictor",) and draw(st.booleans()):
        args += ["--prefetch", "next-layer"]          # a prefetch reads none of these either
    return option, args


@CLI_SETTINGS
@given(case=ignored_decode_options())
def test_an_ignored_decode_option_is_refused_by_name(case: tuple[str, list[str]],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    option, args = case
    capsys.readouterr()
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"moesim: error: {option} ") and len(err.splitlines()) == 1, (args, err)


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
    "memory_budget_GiB": lambda: st.one_of(st.floats(0.1, 20.0), st.sampled_from([-1.0, math.inf, math.nan, 1e9])),
    "device": lambda: st.sampled_from(["sd8-elite-gen5", "h200x8-hf", "nope"]),
    "trace": lambda: st.sampled_from(["no-such.parquet", "/tmp"]),
}
#: values no point of a prefill grid can run with: the grid must be refused before any point runs
_NONSENSE = {"memory_budget_GiB": lambda v: not (isinstance(v, float) and 0 < v <= 1e6),
             "device": lambda v: v != "sd8-elite-gen5", "trace": lambda v: True}


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    return repr(value)


@st.composite
def grids(draw: st.DrawFn) -> tuple[str, bool]:
    """A prefill grid, and whether it holds a value that no point can run with."""
    names = draw(st.lists(st.sampled_from(sorted(_AXIS_VALUES)), min_size=1, max_size=3, unique=True))
    lines = ["[fixed]", 'workload = "prefill"', 'model = "olmoe-1b-7b"']
    if "tokens" not in names:
        lines.append("tokens = 64")
    lines.append("[axes]")
    nonsense = False
    for name in names:
        values = draw(st.lists(_AXIS_VALUES[name](), min_size=0, max_size=2))
        nonsense |= any(_NONSENSE.get(name, lambda v: False)(v) for v in values)
        lines.append(f"{name} = [{', '.join(_toml(v) for v in values)}]")
    return "\n".join(lines) + "\n", nonsense


def _refused_if_nonsense(nonsense: bool) -> Callable[[int, Path, str], None]:
    def check(code: int, tmp: Path, out: str) -> None:
        if code == 0:
            assert (tmp / "out.parquet").stat().st_mode & 0o777 == 0o644
        if nonsense:
            assert code == 2 and not (tmp / "out.parquet").exists(), f"a nonsense grid ran: {out}"
    return check


@CLI_SETTINGS
@given(grid=grids())
def test_fuzzed_grids_end_cleanly(grid: tuple[str, bool], capsys: pytest.CaptureFixture[str]) -> None:
    text, nonsense = grid
    _ends_cleanly(["sweep", "{tmp}/grid.toml", "-o", "{tmp}/out.parquet", "--workers", "1", "--quiet"], capsys,
                  files={"grid.toml": text}, after=_refused_if_nonsense(nonsense))


# ----- outputs that are not regular files (issue 23) ---------------------------------------------
#: what may stand where an output goes: made in the test's folder (device nodes with mknod)
_DOCS_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
_SPECIALS = ["new", "regular", "chardev", "fifo", "socket", "folder", "link-to-chardev", "link-to-fifo",
             "link-to-regular", "dangling-link", "/dev/full", "/dev/null", "name-at-255", "name-of-256"]
_OUTPUTS = {"prefill": ["prefill", "--model", "flame-moe-290m", "--tokens", "16", "--timeline"],
            "decode": ["decode", "--model", "olmoe-1b-7b", "--tokens", "4", "--timeline"],
            "calibrate-device": ["calibrate", "device", "fuzzed", "--llama-bench",
                                 str(Path(__file__).resolve().parents[2] / "validation" / "logs"
                                     / "llamacpp-pr23368-s26plus-htp0-qwen3-4b.md"), "--force", "--out"],
            "models-import": ["models", "import", str(_DOCS_EXAMPLES / "glm-4.5-air" / "config.json"), "-o"]}
_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


#: an earlier output of each command: what that command's output option may replace
_TIMELINE = '{"displayTimeUnit":"ms","traceEvents":[]}'
_EARLIER = {"prefill": _TIMELINE, "decode": _TIMELINE, "calibrate-device": 'name = "fuzzed"\nkind = "mobile-npu"\n',
            "models-import": (_DOCS_EXAMPLES / "glm-4.5-air.toml").read_text()}


def _make_output(special: str, folder: Path, suffix: str, command: str = "prefill") -> Path:
    """Put ``special`` at an output path in ``folder``; return the path to give the CLI."""
    if special.startswith("/dev/"):
        return Path(special)
    name = {"name-at-255": "n" * (255 - len(suffix)), "name-of-256": "n" * (256 - len(suffix))}.get(special, "out")
    out = folder / (name + suffix)
    target = folder / ("target" + suffix)
    made = {"regular": out, "chardev": out, "fifo": out, "folder": out, "link-to-chardev": target,
            "link-to-fifo": target, "link-to-regular": target}
    path = made.get(special)
    if special in ("regular", "link-to-regular"):       # an earlier output: what the option may replace
        old = _EARLIER[command]
        target.write_text(old) if path == target else out.write_text(old)
    elif special in ("chardev", "link-to-chardev"):
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))        # /dev/null's numbers
    elif special in ("fifo", "link-to-fifo"):
        os.mkfifo(path)
    elif special == "folder":
        out.mkdir()
    if special.startswith("link-to-") or special == "dangling-link":
        out.symlink_to(target.name)
    return out


def _kinds(folder: Path) -> dict[str, str]:
    return {p.name: stat.filemode(os.lstat(p).st_mode)[0] for p in folder.iterdir()}


@settings(CLI_SETTINGS, max_examples=max(len(_SPECIALS), CLI_SETTINGS.max_examples // 2))
@given(special=st.sampled_from(_SPECIALS), command=st.sampled_from(sorted(_OUTPUTS)), sock=st.booleans())
def test_fuzzed_special_outputs_end_cleanly(special: str, command: str, sock: bool,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever stands where the output goes, the run ends cleanly and nothing that was not a
    regular file is replaced: device nodes stay devices, FIFOs FIFOs, sockets sockets, links links."""
    if "chardev" in special and not _IS_ROOT:
        return                                  # mknod of a device needs root
    suffix = ".json"
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        out = _make_output(special, folder, suffix, command)
        server = None
        if sock:                                # a socket where the output goes, instead
            out = folder / ("sock" + suffix)
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(out))
        before = _kinds(folder)
        try:
            capsys.readouterr()
            code = main([*_OUTPUTS[command], str(out)])
            err = capsys.readouterr().err
        finally:
            if server is not None:
                server.close()
        _check(code, err, [special, command], folder)
        after = _kinds(folder)
        assert {n: k for n, k in after.items() if n in before} == before, f"{special}: {before} -> {after}"
        refused = sock or special in ("fifo", "link-to-fifo", "folder", "/dev/full", "name-of-256")
        assert code == (2 if refused else 0), f"{special} {command}: exit {code}: {err}"
        if special == "/dev/full" and not sock:
            assert "/dev/full cannot be written: No space left on device" in err


@settings(CLI_SETTINGS, max_examples=max(10, CLI_SETTINGS.max_examples // 3))
@given(resume=st.booleans(), workers=st.sampled_from(["1", "2"]), tokens=st.sampled_from(["16", "0", "x"]))
def test_fuzzed_sweeps_on_a_locked_output_are_refused(resume: bool, workers: str, tokens: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep (or a --resume) on an output whose lock another holder has runs nothing and says
    who holds it (or first names what is wrong with its grid)."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "grid.toml").write_text(f'[fixed]\nworkload = "prefill"\nmodel = "flame-moe-290m"\n[axes]\n'
                                          f'tokens = [{tokens if tokens != "x" else chr(34) + "x" + chr(34)}]\n')
        out = folder / "out.parquet"
        with sweep_lock(out):
            capsys.readouterr()
            code = main(["sweep", str(folder / "grid.toml"), "-o", str(out), "--workers", workers, "--quiet",
                         *(["--resume"] if resume else [])])
            err = capsys.readouterr().err
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert tokens != "16" or f"another moesim sweep (pid {os.getpid()} on " in err, err
            assert sorted(p.name for p in folder.iterdir()) == ["grid.toml", "out.parquet.lock"]
        assert sorted(p.name for p in folder.iterdir()) == ["grid.toml"]


_SPEC_VALUES: dict[str, tuple[list[object], Callable[[object], bool]]] = {
    "predictor": (["oracle", "accuracy:0.9", "accuracy:7", "accuracy:-1", "learned:x", "warp"],
                  lambda v: v not in ("oracle", "accuracy:0.9")),
    "routing": (["mixture", "nearby:4", "warp", "nearby:x", "mixture:0.5"], lambda v: v in ("warp", "nearby:x")),
    "epsilon": ([1.0, 0.5, math.inf, math.nan, -1.0, 0.0], lambda v: not (isinstance(v, float) and 0 < v < math.inf)),
    "device": (["h200x8-hf", "sd8-elite-gen5"], lambda v: v != "h200x8-hf"),
}


@st.composite
def specdecode_grids(draw: st.DrawFn) -> tuple[str, bool]:
    """A speculative-decoding grid (one pass, so that a valid one runs fast), and whether it holds
    a value that no point can run with."""
    names = draw(st.lists(st.sampled_from(sorted(_SPEC_VALUES)), min_size=1, max_size=2, unique=True))
    lines, nonsense = ["[fixed]", 'workload = "specdecode"', "passes = 1", "[axes]"], False
    for name in names:
        choices, bad = _SPEC_VALUES[name]
        values = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=2, unique=True))
        nonsense |= any(bad(v) for v in values)
        lines.append(f"{name} = [{', '.join(_toml(v) for v in values)}]")
    return "\n".join(lines) + "\n", nonsense


@settings(CLI_SETTINGS, max_examples=min(20, CLI_SETTINGS.max_examples or 20))
@given(grid=specdecode_grids())
def test_fuzzed_specdecode_grids_end_cleanly(grid: tuple[str, bool], capsys: pytest.CaptureFixture[str]) -> None:
    text, nonsense = grid
    _ends_cleanly(["sweep", "{tmp}/grid.toml", "-o", "{tmp}/out.parquet", "--workers", "1", "--quiet"], capsys,
                  files={"grid.toml": text}, after=_refused_if_nonsense(nonsense))

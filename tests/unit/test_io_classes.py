"""The I/O classes of issue 35: standard output that cannot be written, inputs that never end
(FIFOs, devices), enormous or deeply nested inputs, names longer than the filesystem allows,
and an output that would replace a file of another kind. Each ends as one line on stderr with
a documented status (docs/cli.md), never a hang, a traceback or a silently replaced file.

Standard output runs the real CLI as a subprocess (the interpreter's own stdout is what fails);
the inputs run in this process under a deadline, so a regression fails instead of hanging."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from moesim.cli import EXIT_PIPE, EXIT_STDOUT, _Stdout
from moesim.cli.output import TIMELINE_SIGNATURE
from moesim.errors import InputError, StdoutError
from moesim.files import check_replaceable, check_writable
from moesim.inputs import MAX_DEPTH, check_depth, parse_json, parse_toml, read_input

FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not FULL.is_char_device(), reason="no /dev/full here")
ENOSPC_LINE = "moesim: error: cannot write to standard output: No space left on device\n"
PREFILL = ("prefill", "--model", "flame-moe-290m", "--tokens", "16")


def moesim(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moesim", *args], capture_output=kwargs.pop("capture", True),
                          text=True, timeout=60, **kwargs)


# ----- standard output ----------------------------------------------------------------------
@needs_dev_full
@pytest.mark.parametrize("args", [("--help",), ("--version",), ("models",), ("devices", "--help")])
def test_a_full_stdout_is_one_line_and_status_2(args: tuple[str, ...]) -> None:
    with FULL.open("w") as full:
        res = moesim(*args, stdout=full, stderr=subprocess.PIPE, capture=False)
    assert (res.returncode, res.stderr) == (EXIT_STDOUT, ENOSPC_LINE)


def test_a_closed_stdout_is_refused_before_the_command_runs() -> None:
    res = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "moesim", "models"],
                         stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == EXIT_STDOUT
    assert res.stderr == ("moesim: error: cannot write to standard output: it is closed (nothing written would be "
                          "seen)\n")


def _reader_goes_away(args: tuple[str, ...], first_line: bool) -> subprocess.CompletedProcess[str]:
    """Run with stdout on a one-page pipe; read one line (or nothing) and close it, as ``head -1`` does."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)       # the output cannot all fit before the reader leaves
    proc = subprocess.Popen([sys.executable, "-m", "moesim", *args], stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    if first_line:
        with os.fdopen(r, "rb") as pipe:
            assert pipe.readline()
    else:
        os.close(r)
    _, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


@pytest.mark.parametrize(("args", "first_line"), [(("devices", "--device", "sd8-elite"), True),
                                                  (("devices", "--device", "sd8-elite", "--json"), True),
                                                  (("--help",), False), (("models",), False)])
def test_a_reader_that_goes_away_ends_quietly_with_141(args: tuple[str, ...], first_line: bool) -> None:
    res = _reader_goes_away(args, first_line)
    assert (res.returncode, res.stderr) == (EXIT_PIPE, "")


def test_the_stdout_writer_names_the_cause_and_then_drops_the_rest() -> None:
    r, w = os.pipe()
    os.close(r)
    raw = _Stdout(w)
    with pytest.raises(StdoutError, match="^cannot write to standard output: Broken pipe$") as info:
        raw.write(b"x")
    assert info.value.errno == errno.EPIPE and not isinstance(info.value, OSError)
    assert raw.write(b"later") == 5                 # the interpreter's final flush cannot fail again
    os.close(w)


# ----- inputs that never end, or are too large or too deep ----------------------------------
class _Hung(BaseException):
    """Raised by the deadline: not an Exception, so no handler in moesim takes it."""


@contextmanager
def deadline(seconds: float = 10.0) -> Iterator[None]:
    def hung(*_: Any) -> None:
        raise _Hung(f"still running after {seconds} s (a FIFO or device waited on?)")

    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _sweep_part(folder: Path, bad: Path) -> tuple[str, ...]:
    """A sweep whose parts folder holds ``bad`` as its first part."""
    (folder / "grid.toml").write_text('[fixed]\nworkload = "prefill"\nmodel = "flame-moe-290m"\n[axes]\n'
                                      "tokens = [16, 32]\n")
    parts = folder / "out.parquet.parts"
    parts.mkdir()
    (parts / "part-0000000.json").symlink_to(bad)
    return ("sweep", str(folder / "grid.toml"), "-o", str(folder / "out.parquet"), "--workers", "1", "--quiet")


#: where a file is read, what the error names (the option, or the file itself), and the command line
#: reading ``path`` (the sweep's GRID.toml is named "path" by sweep/grid.py's read_toml call today)
READERS: dict[str, tuple[str, Callable[[Path, Path], tuple[str, ...]]]] = {
    "device": ("--device", lambda p, _: ("devices", "--device", str(p))),
    "model": ("--model", lambda p, _: ("models", "--model", str(p))),
    "prefill-device": ("--device", lambda p, _: (*PREFILL, "--device", str(p))),
    "devices": ("--devices", lambda p, _: ("compare", "--devices", f"{p},sd8-elite", "--tokens", "16")),
    "grid": ("", lambda p, _: ("sweep", str(p), "-o", "never.parquet")),
    "result": ("RESULT.json", lambda p, _: ("rerun", str(p))),
    "trace": ("--trace", lambda p, _: (*PREFILL, "--trace", str(p))),
    "results": ("RESULTS", lambda p, _: ("plot", str(p), "-o", "never.png", "--x", "tokens")),
    "routing-log": ("file", lambda p, d: ("trace", "import", str(p), "--format", "nvmoe", "--model", "olmoe-1b-7b",
                                          "-o", str(d / "t.parquet"))),
    "sweep-part": ("part-0000000.json", lambda p, d: _sweep_part(d, p)),
}


def _refused(run_cli: Any, args: tuple[str, ...], *words: str) -> str:
    with deadline():
        res = run_cli(*args)
    assert res.code == 2 and res.err.count("\n") == 1 and res.err.startswith("moesim: error: "), res.err
    assert all(word in res.err for word in words), res.err
    return str(res.err)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_is_refused_not_waited_on(reader: str, run_cli: Any, tmp_path: Path) -> None:
    flag, args = READERS[reader]
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    shown = flag if reader == "sweep-part" else str(fifo)     # a part is named by its place in the folder
    _refused(run_cli, args(fifo, tmp_path), flag, "must be a regular file, not a FIFO", shown)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_endless_device_is_refused(reader: str, run_cli: Any, tmp_path: Path) -> None:
    flag, args = READERS[reader]
    shown = flag if reader == "sweep-part" else "/dev/zero"
    _refused(run_cli, args(Path("/dev/zero"), tmp_path), flag, "must be a regular file, not a character device",
             shown)


def test_a_file_over_its_cap_is_refused_by_its_size(run_cli: Any, tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("wb") as fh:
        fh.truncate(100 << 20)                      # sparse: no disk used
    _refused(run_cli, ("devices", "--device", str(big)), "--device is 100 MiB, more than the 64 MiB a TOML "
             "configuration may have")


def test_a_file_that_grows_past_its_cap_while_read_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import moesim.inputs as inputs

    path = tmp_path / "r.json"
    path.write_text("[1, 2, 3]")
    monkeypatch.setitem(inputs.MAX_BYTES, "result", (4, "a JSON result"))
    with pytest.raises(InputError, match=r"^-x is 9 B, more than the 4 B a JSON result may have"):
        read_input(path, "-x", "result")


@pytest.mark.parametrize(("depth", "refused"), [(MAX_DEPTH, False), (MAX_DEPTH + 1, True), (100_000, True)])
def test_nesting_is_capped_in_json_and_toml(depth: int, refused: bool) -> None:
    text, inner = "[" * depth + "]" * depth, "[" * (depth - 1) + "]" * (depth - 1)     # TOML's table is a level
    for parse in (lambda: parse_json(text, "RESULT.json"), lambda: parse_toml(f"a = {inner}", "TOML")):
        if refused:
            with pytest.raises(InputError, match=f"must nest at most {MAX_DEPTH} levels"):
                parse()
        else:
            parse()
    table = {"a": [1]}
    for _ in range(MAX_DEPTH):
        table = {"a": table}
    with pytest.raises(InputError, match="must nest at most"):
        check_depth(table, "TOML")


def test_deep_json_and_toml_files_are_one_line(run_cli: Any, tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000)
    _refused(run_cli, ("rerun", str(tmp_path / "deep.json")), "RESULT.json must nest at most 64 levels")
    _refused(run_cli, ("models", "--model", str(tmp_path / "deep.toml")), "TOML must nest at most 64 levels")


# ----- names longer than the filesystem allows ----------------------------------------------
LONG = "n" * 300


@pytest.mark.parametrize("args", [
    ("devices", "--device", LONG), ("devices", "--device", LONG + ".toml"), (*PREFILL, "--device", LONG),
    (*PREFILL, "--device", LONG + ".toml"), ("models", "--model", LONG + ".toml"), ("rerun", LONG),
    ("rerun", "d/" * 2600 + "r.json"), (*PREFILL, "--trace", LONG + ".parquet"), ("sweep", LONG, "-o", "x.parquet"),
    ("compare", "--devices", f"{LONG}.toml,sd8-elite"), ("plot", LONG, "-o", "x.png", "--x", "tokens"),
    ("trace", "import", LONG, "--format", "nvmoe", "--model", "olmoe-1b-7b", "-o", "x.parquet")],
    ids=lambda a: " ".join(x[:12] for x in a))
def test_a_name_too_long_to_read_is_one_line(args: tuple[str, ...], run_cli: Any) -> None:
    err = _refused(run_cli, args)
    assert "internal error" not in err and len(err) < 800, err        # the name is cut: one short line


@pytest.mark.parametrize("where", ["{tmp}/" + LONG + ".json", "{tmp}/" + LONG + "/x.json", "{tmp}/" + "d/" * 2600
                                   + "x.json"], ids=["file name", "folder name", "path"])
@pytest.mark.parametrize("option", ["prefill --timeline", "decode --timeline", "sweep -o", "trace synth -o"])
def test_a_name_too_long_to_write_is_one_line(where: str, option: str, run_cli: Any, tmp_path: Path) -> None:
    out = where.format(tmp=tmp_path)
    if option == "sweep -o":
        out = out.replace(".json", ".parquet")
        args: tuple[str, ...] = ("sweep", "grid.toml", "-o", out)
    elif option == "trace synth -o":
        args = ("trace", "synth", "--model", "flame-moe-290m", "--tokens", "16", "-o", out.replace(".json", ".parquet"))
    else:
        args = (option.split()[0], "--timeline", out)
    _refused(run_cli, args, option.split()[-1] + " ", "longer than the")
    assert sorted(tmp_path.iterdir()) == []


def test_check_writable_never_raises_an_os_error_for_a_long_path() -> None:
    for path in ("/tmp/" + "x/" * 3000 + "o.json", "/tmp/" + LONG + "/o.json", "/tmp/" + LONG):
        with pytest.raises(InputError, match="longer than the"):
            check_writable(path, "-o")


# ----- an output never replaces a file of another kind --------------------------------------
def test_timeline_onto_another_kind_of_file_is_refused_and_kept(run_cli: Any, tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text("[axes]\ntokens = [16]\n")
    for command in (PREFILL, ("decode", "--model", "olmoe-1b-7b", "--tokens", "4")):
        _refused(run_cli, (*command, "--timeline", str(grid)), "--timeline names an existing file that is not a "
                 "moesim timeline", "it is not replaced")
        assert grid.read_text() == "[axes]\ntokens = [16]\n"


def test_timeline_replaces_a_timeline_and_fills_an_empty_file(run_cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    out.touch()
    for _ in range(2):                              # empty, then a timeline of an earlier run
        res = run_cli(*PREFILL, "--timeline", str(out))
        assert res.code == 0, res.err
        assert out.read_bytes().startswith(TIMELINE_SIGNATURE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_check_replaceable_passes_new_names_and_devices_and_refuses_unreadable(tmp_path: Path) -> None:
    check_replaceable(tmp_path / "new.json", "-o", b"{", "JSON")
    check_replaceable("/dev/null", "-o", b"{", "JSON")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    secret.chmod(0o200)
    if os.access(secret, os.R_OK):                  # root reads it anyway: the content decides
        check_replaceable(secret, "-o", b"{", "JSON")
    else:
        with pytest.raises(InputError, match="cannot be read"):
            check_replaceable(secret, "-o", b"{", "JSON")

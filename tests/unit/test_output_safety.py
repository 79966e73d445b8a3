"""Outputs never replace what is not a regular file (issue 23): character devices are written
through, FIFOs, sockets, block devices and folders are refused with one line, links are
followed, and a full disk, a read-only filesystem or a name too long end as one line naming
the path and the cause, leaving no temporary file and the old content. Device nodes are made
with mknod inside the test's own folder; the real /dev/full is only written through."""

from __future__ import annotations

import errno
import os
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from moesim.errors import InputError
from moesim.files import atomic_path, check_writable, write_bytes_atomic, write_text_atomic

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
needs_dev_full = pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="no /dev/full here")

NULL = (1, 3)          # the major/minor numbers of /dev/null on Linux
FULL = (1, 7)          # and of /dev/full: every write fails with ENOSPC


@pytest.fixture
def systmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private system temporary folder, to see what the write-through leaves there."""
    folder = tmp_path / "systmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def chardev(path: Path, numbers: tuple[int, int] = NULL) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*numbers))
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock.json"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    yield path
    sock.close()


def kind(path: Path) -> str:
    return stat.filemode(os.lstat(path).st_mode)[0]


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ----- character devices: written through ------------------------------------------------------
@needs_root
def test_char_device_is_written_through_and_stays_a_device(tmp_path: Path, systmp: Path) -> None:
    node = chardev(tmp_path / "null.json")
    check_writable(node, "--timeline")
    assert write_text_atomic("x" * 3_000_000, node) == node        # more than one copy chunk
    assert kind(node) == "c" and os.stat(node).st_rdev == os.makedev(*NULL)
    assert names(tmp_path) == ["null.json", "systmp"] and names(systmp) == []


@needs_root
def test_link_to_a_char_device_is_written_through_and_kept(tmp_path: Path, systmp: Path) -> None:
    node = chardev(tmp_path / "null")
    (tmp_path / "link.json").symlink_to(node)
    write_bytes_atomic(b"abc", tmp_path / "link.json")
    assert kind(tmp_path / "link.json") == "l" and kind(node) == "c" and names(systmp) == []


@needs_dev_full
def test_full_device_is_one_line_naming_the_path_and_the_cause(systmp: Path) -> None:
    check_writable("/dev/full", "-o")
    with pytest.raises(InputError, match=r"^/dev/full cannot be written: No space left on device$"):
        write_text_atomic("{}", "/dev/full")
    assert Path("/dev/full").is_char_device() and names(systmp) == []


@needs_root
def test_parquet_to_a_full_device_keeps_the_node(tmp_path: Path, systmp: Path) -> None:
    """pyarrow removes the path it was writing when a write fails (as root that would unlink a
    device node): it only ever sees the temporary file, so the node stays."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    node = chardev(tmp_path / "full.parquet", FULL)
    with pytest.raises(InputError, match=r"full\.parquet cannot be written: No space left on device$"):
        with atomic_path(node) as tmp:
            pq.write_table(pa.table({"a": list(range(10_000))}), tmp)
    assert kind(node) == "c" and os.stat(node).st_rdev == os.makedev(*FULL) and names(systmp) == []


def test_full_temporary_folder_of_a_device_write_names_that_folder(tmp_path: Path, systmp: Path) -> None:
    def full(*_: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(InputError, match=r"/dev/null cannot be written \(through a temporary file in .*systmp\): "
                                         r"No space left on device"):
        with atomic_path("/dev/null") as tmp:
            full(tmp)
    assert names(systmp) == [] and Path("/dev/null").is_char_device()


# ----- FIFOs, sockets, block devices, folders: refused -------------------------------------------
def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "fifo.json")
    return tmp_path / "fifo.json"


def _block(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    os.mknod(tmp_path / "blk.json", stat.S_IFBLK | 0o600, os.makedev(7, 250))   # never opened
    return tmp_path / "blk.json"


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "dir.json").mkdir()
    return tmp_path / "dir.json"


@pytest.mark.parametrize(("make", "what"), [(_fifo, "a FIFO"), (_block, "a block device"), (_folder, "a folder")])
def test_special_files_are_refused_and_left_as_they_are(tmp_path: Path, make: Callable[[Path], Path],
                                                        what: str) -> None:
    node = make(tmp_path)
    before = kind(node)
    expected = "must name a file, not a folder" if what == "a folder" else \
        f"must be a regular file or a character device, not {what}"
    with pytest.raises(InputError, match=f"^--timeline {expected}, got '{node}'$"):
        check_writable(node, "--timeline")
    with pytest.raises(InputError, match=f"^{node} must be a regular file or a character device, not {what}$"):
        write_text_atomic("{}", node)
    (tmp_path / "link.json").symlink_to(node)        # a link to it: the same rule for what it points to
    with pytest.raises(InputError, match=f"not {what}"):
        write_text_atomic("{}", tmp_path / "link.json")
    assert kind(node) == before and kind(tmp_path / "link.json") == "l"
    assert names(tmp_path) == sorted([node.name, "link.json"])


def test_socket_is_refused(unix_socket: Path) -> None:
    with pytest.raises(InputError, match="not a socket"):
        check_writable(unix_socket, "-o")
    with pytest.raises(InputError, match="not a socket"):
        write_text_atomic("{}", unix_socket)
    assert kind(unix_socket) == "s"


def test_fifo_put_in_place_while_writing_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    with pytest.raises(InputError, match="not a FIFO"):
        with atomic_path(out) as tmp:
            tmp.write_text("new")
            out.unlink()
            os.mkfifo(out)                           # the race the re-check before the rename closes
    assert kind(out) == "p" and names(tmp_path) == ["out.json"]


def test_new_files_are_not_made_in_dev_itself() -> None:
    with pytest.raises(InputError, match="must name a file in an existing, writable folder"):
        check_writable("/dev/moesim-no-such-output.json", "-o")


# ----- links: followed, the link kept ---------------------------------------------------------
def test_link_to_a_regular_file_replaces_the_file_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    (tmp_path / "dangling.json").symlink_to("later.json")
    write_text_atomic("new", tmp_path / "link.json")
    write_text_atomic("born", tmp_path / "dangling.json")
    assert kind(tmp_path / "link.json") == "l" and (tmp_path / "real.json").read_text() == "new"
    assert kind(tmp_path / "dangling.json") == "l" and (tmp_path / "later.json").read_text() == "born"
    assert names(tmp_path) == ["dangling.json", "later.json", "link.json", "real.json"]


# ----- OS errors: one line, nothing left, the old content kept ----------------------------------
USER_ERRNOS = [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG,
               errno.EIO]


@pytest.mark.parametrize("code", USER_ERRNOS, ids=[errno.errorcode[c] for c in USER_ERRNOS])
def test_writer_errors_of_the_destination_are_one_line(tmp_path: Path, code: int) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    with pytest.raises(InputError, match=f"^{out} cannot be written: {os.strerror(code)}$"):
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            raise OSError(code, os.strerror(code))
    assert out.read_text() == "old" and names(tmp_path) == ["out.json"]


def test_pyarrow_style_error_without_errno_is_recognised(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="out.parquet cannot be written: No space left on device"):
        with atomic_path(tmp_path / "out.parquet"):
            raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert names(tmp_path) == []


def test_other_os_errors_are_not_blamed_on_the_destination(tmp_path: Path) -> None:
    with pytest.raises(ConnectionRefusedError):
        with atomic_path(tmp_path / "out.json"):
            raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")
    assert names(tmp_path) == []


def _failing(code: int) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))
    return fail


@pytest.mark.parametrize("stage", ["create", "fsync", "rename"])
def test_errors_at_every_stage_keep_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    real_open, real_replace = os.open, os.replace
    if stage == "create":
        monkeypatch.setattr(os, "open", lambda p, *a, **k: _failing(errno.EROFS)() if str(p).endswith(".tmp")
                            else real_open(p, *a, **k))
    elif stage == "fsync":
        monkeypatch.setattr(os, "fsync", _failing(errno.EIO))
    else:
        monkeypatch.setattr(os, "replace", lambda a, b: _failing(errno.ENOSPC)() if Path(b) == out
                            else real_replace(a, b))
    with pytest.raises(InputError, match=f"^{out} cannot be written: "):
        write_text_atomic("new", out, durable=True)
    assert out.read_text() == "old" and names(tmp_path) == ["out.json"]


# ----- long names -------------------------------------------------------------------------------
def test_a_name_at_name_max_gets_a_shortened_temporary_name(tmp_path: Path) -> None:
    out = tmp_path / ("n" * 250 + ".json")           # 255 bytes: no room for ".NAME.XXXXXXXX.tmp"
    check_writable(out, "-o")
    with atomic_path(out) as tmp:
        assert len(tmp.name) <= 255 and tmp.name.startswith(".n") and tmp.name.endswith(".tmp")
        tmp.write_text("x")
    assert out.read_text() == "x" and names(tmp_path) == [out.name]


def test_a_name_over_name_max_is_refused_first(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^-o has a file name of 256 bytes, longer than the 255 the filesystem "
                                         r"allows, got '.*'$"):
        check_writable(tmp_path / ("é" * 125 + "x.json"), "-o")


# ----- through the command line -----------------------------------------------------------------
PREFILL = ("prefill", "--model", "flame-moe-290m", "--tokens", "16")


@needs_root
def test_cli_timeline_to_a_char_device(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    node = chardev(tmp_path / "null.json")
    res = run_cli(*PREFILL, "--timeline", str(node))
    assert res.code == 0, res.err
    assert stat.S_ISCHR(os.stat(node).st_mode) and names(tmp_path) == ["null.json"]


def test_cli_timeline_to_a_fifo(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo = _fifo(tmp_path)
    res = run_cli(*PREFILL, "--timeline", str(fifo))
    assert res.code == 2 and res.err == ("moesim: error: --timeline must be a regular file or a character device, "
                                         f"not a FIFO, got '{fifo}'\n")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@needs_dev_full
def test_cli_timeline_to_dev_full(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli(*PREFILL, "--timeline", "/dev/full")
    assert res.code == 2 and res.err == "moesim: error: /dev/full cannot be written: No space left on device\n"


@needs_root
def test_cli_sweep_output_must_be_a_regular_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    node = chardev(tmp_path / "out.parquet")
    (tmp_path / "grid.toml").write_text('[fixed]\nworkload = "prefill"\nmodel = "flame-moe-290m"\n[axes]\n'
                                        "tokens = [16]\n")
    res = run_cli("sweep", str(tmp_path / "grid.toml"), "-o", str(node))
    assert res.code == 2 and "-o must be a regular file: a sweep keeps its parts folder" in res.err
    assert names(tmp_path) == ["grid.toml", "out.parquet"] and kind(node) == "c"


GLM_CONFIG = Path(__file__).resolve().parents[2] / "docs" / "examples" / "glm-4.5-air" / "config.json"


@needs_root
def test_cli_models_import_to_a_char_device(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    node = chardev(tmp_path / "model.toml")
    res = run_cli("models", "import", str(GLM_CONFIG), "-o", str(node))
    assert res.code == 0, res.err
    assert kind(node) == "c" and names(tmp_path) == ["model.toml"]


def test_cli_models_import_to_a_fifo_or_a_folder(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo, folder = _fifo(tmp_path), tmp_path / "adir"
    folder.mkdir()
    for dest in (fifo, folder):
        res = run_cli("models", "import", str(GLM_CONFIG), "-o", str(dest))
        assert res.code == 2 and res.err.count("\n") == 1 and res.err.startswith("moesim: error: -o must")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and folder.is_dir() and names(folder) == []


@needs_root
def test_cli_require_plot_to_a_char_device_or_a_folder(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    node, folder = chardev(tmp_path / "curve.png"), tmp_path / "plots.png"
    folder.mkdir()
    args = ("require", "--model", "gpt-oss-120b", "--device", "h200x8-fused", "--resource", "hbm",
            "--tokens-per-s", "200", "--plot")
    res = run_cli(*args, str(node))
    assert res.code == 0, res.err
    assert kind(node) == "c"
    res = run_cli(*args, str(folder))
    assert res.code == 2 and "--plot must name a file, not a folder" in res.err and folder.is_dir()
    assert names(tmp_path) == ["curve.png", "plots.png"]

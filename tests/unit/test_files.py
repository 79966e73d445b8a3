"""Atomic writes (moesim.files): whole files or none, no temporary file left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from moesim.errors import InputError
from moesim.files import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_writes_replace_the_file_and_leave_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    assert write_text_atomic("first\n", out) == out
    assert write_text_atomic("second\n", out).read_text() == "second\n"
    assert write_bytes_atomic(b"\x00\x01", tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert _names(tmp_path) == ["b.bin", "out.txt"]


def test_json_is_compact_and_sorted(tmp_path: Path) -> None:
    path = write_json_atomic({"b": [1, 2], "a": {"d": 1.5, "c": None}}, tmp_path / "x.json")
    assert path.read_text() == '{"a":{"c":null,"d":1.5},"b":[1,2]}'
    assert json.loads(path.read_text()) == {"a": {"c": None, "d": 1.5}, "b": [1, 2]}


def test_missing_folders_are_created(tmp_path: Path) -> None:
    out = write_text_atomic("x", tmp_path / "a" / "b" / "c.txt")
    assert out.read_text() == "x"


def test_temporary_path_is_hidden_beside_the_destination(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "r.json", durable=True) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".r.json.") and tmp.suffix == ".tmp"
        assert tmp.exists()                     # reserved: created empty, exclusively
        tmp.write_text("{}")
        assert not (tmp_path / "r.json").exists()
    assert (tmp_path / "r.json").read_text() == "{}"
    assert _names(tmp_path) == ["r.json"]


def test_error_in_the_middle_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    out = tmp_path / "keep.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError, match="writer failed"):
        with atomic_path(out) as tmp:
            tmp.write_text("half of the new")
            raise RuntimeError("writer failed")
    assert out.read_text() == "old"
    assert _names(tmp_path) == ["keep.txt"]


def test_unserialisable_json_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "keep.json"
    out.write_text("{}")
    with pytest.raises(TypeError):
        write_json_atomic({"x": object()}, out)
    assert out.read_text() == "{}" and _names(tmp_path) == ["keep.json"]


def test_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    out = tmp_path / "script.sh"
    out.write_text("old")
    out.chmod(0o754)
    write_text_atomic("new", out)
    assert out.stat().st_mode & 0o777 == 0o754


def test_new_file_gets_the_usual_permissions_not_0600(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        out = write_text_atomic("x", tmp_path / "new.txt")
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o644


def test_folder_in_the_way_is_a_one_line_input_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match=r"file/out\.json cannot be written: Not a directory"):
        write_json_atomic({}, blocker / "out.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(InputError, match=r"dir\.json must be a regular file or a character device, not a folder"):
        write_json_atomic({}, tmp_path / "dir.json")
    assert _names(tmp_path) == ["dir.json", "file"]         # no temporary file left


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_folder_is_a_one_line_input_error(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(InputError, match=r"ro/out\.txt cannot be written: Permission denied"):
            write_text_atomic("x", folder / "out.txt")
    finally:
        folder.chmod(0o755)


def test_cli_reports_an_unwritable_output_on_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli("prefill", "--model", "flame-moe-290m", "--tokens", "16", "--timeline", str(blocker / "t.json"))
    assert res.code == 2
    assert res.err.strip() == ("moesim: error: --timeline must name a file in an existing, writable folder, "
                               f"got '{blocker / 't.json'}'")

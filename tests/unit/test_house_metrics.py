"""The counter of validation/house_metrics.py, on a small synthetic source tree (the repository's
own counts are the script's output, docs/house-metrics.md, and are not asserted here)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    """A module of validation/, imported as its scripts import each other (by the folder's name)."""
    sys.path.insert(0, str(REPO / "validation"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


@pytest.fixture(scope="module")
def hm() -> ModuleType:
    return _script("house_metrics")


def _function(name: str, body_lines: int) -> str:
    """A function whose span from ``def`` to its last line is ``body_lines + 1`` lines."""
    return f"def {name}(x):\n" + "".join(f"    x = x + {i}\n" for i in range(body_lines)) + "\n"


def _copy(first: int) -> str:
    """Six lines that differ from another call's only in their numbers and strings."""
    return (f"def check(value):\n    low = {first}\n    high = low + 1\n    name = 'a{first}'\n"
            "    if value < low:\n        raise ValueError(name)\n    return min(value, high)\n")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "small.py").write_text('"""Short."""\n\nfrom typing import Any\n\nx: dict[str, Any] = {}\n')
    # 303 lines: over the budget
    (pkg / "long.py").write_text(_function("f41", 40) + _function("f40", 39) + "y = 1\n" * 220)
    # 352 lines, nearly all a table: a data table, not counted
    rows = "".join(f"    'k{i}': ({i}, 2 * {i}, Row(a={i})),\n" for i in range(345))
    (pkg / "table.py").write_text('"""A table."""\n\nimport math\n\nTABLE = {\n' + rows + "}\nPI = math.pi\n")
    (pkg / "methods.py").write_text(
        "class C:\n    def m(self, d: 'dict[str, Any]') -> 'dict[str, Any]':\n"
        + "".join(f"        d['{i}'] = {i}\n" for i in range(41)) + "        return d\n")
    (pkg / "copy_a.py").write_text(_copy(1))
    (pkg / "copy_b.py").write_text("# the same shape, other values\n\n" + _copy(7))
    (pkg / "five.py").write_text("\n".join(_copy(3).splitlines()[:4]) + "\n    return high\n")   # 5 lines alike
    return tmp_path


def test_long_modules_leave_out_data_tables(hm: ModuleType, tree: Path) -> None:
    mods = {m.path: m for m in hm.modules(tree / "pkg", tree)}
    assert mods["pkg/long.py"].lines == 303 and not mods["pkg/long.py"].data_table
    assert mods["pkg/table.py"].lines == 352 and mods["pkg/table.py"].data_table
    assert [m.path for m in hm.long_modules(list(mods.values()))] == ["pkg/long.py"]


def test_data_table_rule(hm: ModuleType) -> None:
    assert hm.is_data_table('"""Doc."""\nimport x\nA = [1, 2,\n     3]\nB = {"a": f(1)}\n')
    assert not hm.is_data_table("A = [i for i in range(3)]\nB = 1\n")     # a comprehension is code
    assert not hm.is_data_table("A = 1\ndef f():\n    return 1\n")          # 1 line of 3 is data
    assert not hm.is_data_table('"""Only a docstring."""\n')


def test_functions_over_40_lines_count_def_to_last_line(hm: ModuleType, tree: Path) -> None:
    long = hm.long_functions(hm.functions(tree / "pkg", tree))
    assert [(f.path, f.name, f.lines) for f in long] == [("pkg/methods.py", "m", 43), ("pkg/long.py", "f41", 41)]


def test_any_dicts_are_counted_per_occurrence(hm: ModuleType, tree: Path) -> None:
    assert hm.any_dicts(tree / "pkg", tree) == {"pkg/small.py": 1, "pkg/methods.py": 2}


def test_window_scan_pairs_copies_that_differ_in_values(hm: ModuleType, tree: Path) -> None:
    assert hm.window_pairs(hm.source_files(tree / "pkg")) == [("copy_a.py", "copy_b.py")]


def test_window_scan_leaves_out_short_overlapping_and_common_runs(hm: ModuleType) -> None:
    assert hm.window_pairs({"a.py": _copy(1), "b.py": "\n".join(_copy(2).splitlines()[:5]) + "\n"}) == []
    # one run of six identical lines repeated: overlapping windows inside one file are no copy
    assert hm.window_pairs({"a.py": "x = 1\n" * 7}) == []
    assert hm.window_pairs({"a.py": "x = 1\n" * 12}) == [("a.py", "a.py")]
    nine = {f"m{i}.py": _copy(i) for i in range(9)}      # in nine places: boilerplate
    assert hm.window_pairs(nine) == []
    assert len(hm.window_pairs(dict(list(nine.items())[:3]))) == 3


def test_parse_duplicates_output(hm: ModuleType) -> None:
    text = ("2 pairs of places (5 files read), each sharing runs of 6 or more identical or same-shape lines\n"
            "D1 a.py:1-9 ~ b.py:3-11 shape\nD2 a.py:20-26 ~ a.py:40-46\n")
    assert hm.parse_duplicates(text) == (2, ["D1 a.py:1-9 ~ b.py:3-11 shape", "D2 a.py:20-26 ~ a.py:40-46"])
    assert hm.parse_duplicates("no duplicates (3 files read)\n") == (0, [])


def test_report_without_the_tool(hm: ModuleType, tree: Path) -> None:
    text = hm.report(repo=tree, package=tree / "pkg", use_tool=False)
    assert "| modules over 300 lines (data tables excepted) | 13 | 1 | = 0 | no |" in text
    assert "| functions over 40 lines | 27 | 2 | = 0 | no |" in text
    assert "| `dict[str, Any]` | 131 | 3 | <= 65 | yes |" in text
    assert "| duplicate pairs over moesim/ (window scan) | 8 | 1 | <= 4 | yes |" in text
    assert "- `pkg/long.py`: 303" in text and "- copy_a.py ~ copy_b.py" in text


@pytest.fixture(scope="module")
def kinds() -> ModuleType:
    return _script("dup_kinds")


@pytest.mark.parametrize(("line", "logic"), [
    ("    size_B: int = 0", False),                          # a counter's field
    ("    rate_GBps: PositiveFloat | None = Field(", False),  # a pydantic field
    ('        None, description="what it is (a unit)")', False),   # its keyword arguments
    ("    step_ns: list[int] = field(default_factory=list)", False),
    ("        self.queue_depth = queue_depth", False),        # an __init__ keeping its argument
    ("        self.busy_ns = 0", False),
    ("    ReportBuilder,", False),                            # a name of an import list
    ('    (("prefill", "--tokens", "0"), "tokens must be"),', False),   # a table row
    ('__all__ = ["a", "b"]', False),
    ("I64 = npt.NDArray[np.int64]", False),                 # a type alias
    ("    @property", False),
    ("    def usable_GiB(self) -> float: ...", False),
    ("        return key in self._held", True),
    ("        if banks < 1:", True),
    ("        out.append(key)", True),
    ("    total = sum(sizes)", True),
    ("    total: int = sum(sizes)", True),
    ("        self.busy_ns += duration", True),
    ("        self.rate = rate * 2", True),
    ("    else:", True),
])
def test_logic_lines(kinds: ModuleType, line: str, logic: bool) -> None:
    assert kinds.is_logic_line(line) is logic


def test_a_row_is_logic_when_either_side_holds_a_line_of_logic(kinds: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class A:\n" + "".join(f"    f{i}: int = 0\n" for i in range(6)))
    (tmp_path / "b.py").write_text("def g(x):\n" + "".join(f"    x{i} = x + {i}\n" for i in range(6)))
    (tmp_path / "c.py").write_text("class C:\n" + "".join(f"    g{i}: float = 1.5\n" for i in range(6)))
    assert not kinds.row_is_logic("D1 a.py:2-7 ~ c.py:2-7 shape", tmp_path)
    assert kinds.row_is_logic("D2 a.py:2-7 ~ b.py:2-7 shape (+1 more run)", tmp_path)
    with pytest.raises(ValueError, match="not a duplicates row"):
        kinds.row_is_logic("left out: 2 runs", tmp_path)


@pytest.mark.parametrize(("script", "option", "value"), [
    ("decode_placement.py", "--tokens", "0"), ("bench_decode.py", "--repeats", "-3"),
    ("specdecode_batch_temperature.py", "--passes", "x")])
def test_validation_scripts_refuse_a_count_below_one_in_one_line(script: str, option: str, value: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "validation" / script), option, value],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1].endswith(f"error: argument {option}: must be a whole number >= 1, got "
                                                 + (repr(value) if value == "x" else value))
    assert "Traceback" not in proc.stderr

"""Property tests of the byte arithmetic of every weight format."""

from hypothesis import given
from hypothesis import strategies as st

from moesim.config.formats import FORMAT_INFO, WeightFormat, storage_format, tensor_bytes
from tests.strategies import PURE_SETTINGS, weight_formats

formats = weight_formats
dims = st.integers(min_value=0, max_value=20_000)


@PURE_SETTINGS
@given(formats, st.integers(1, 64), st.integers(1, 64))
def test_block_aligned_rows_cost_block_bytes_per_block(fmt: WeightFormat, rows: int, blocks: int) -> None:
    info = FORMAT_INFO[fmt]
    row_len = blocks * info.block_weights
    expected = rows * blocks * info.block_bytes
    if info.square_scale_block:
        side = info.square_scale_block
        expected += 4 * (-(-rows // side)) * (-(-row_len // side))
    assert tensor_bytes(fmt, rows, row_len) == expected


@PURE_SETTINGS
@given(formats, dims, dims, dims)
def test_rows_add_up_for_row_block_formats(fmt: WeightFormat, r1: int, r2: int, row_len: int) -> None:
    if FORMAT_INFO[fmt].square_scale_block:
        return  # FP8 scales are per 128x128 tile, rows do not add up exactly
    assert tensor_bytes(fmt, r1 + r2, row_len) == tensor_bytes(fmt, r1, row_len) + tensor_bytes(fmt, r2, row_len)


@PURE_SETTINGS
@given(formats, st.integers(1, 512), st.integers(1, 8192))
def test_bytes_within_format_bounds(fmt: WeightFormat, rows: int, row_len: int) -> None:
    stored = storage_format(fmt, row_len)
    info = FORMAT_INFO[stored]
    assert row_len % info.block_weights == 0
    n = tensor_bytes(fmt, rows, row_len)
    lower = rows * row_len * info.block_bytes / info.block_weights
    assert lower <= n <= lower + 4 * rows * row_len  # only FP8 scale overhead above the floor
    if info.square_scale_block == 0:
        assert n == lower


@PURE_SETTINGS
@given(formats, st.integers(1, 4096))
def test_fallback_never_loses_precision_class(fmt: WeightFormat, row_len: int) -> None:
    stored = storage_format(fmt, row_len)
    assert FORMAT_INFO[stored].bits_per_weight >= FORMAT_INFO[fmt].bits_per_weight

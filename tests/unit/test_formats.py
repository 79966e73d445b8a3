"""Byte arithmetic of weight formats, on literal examples from the format definitions."""

import pytest

from moesim.config.formats import FORMAT_INFO, WeightFormat, storage_format, tensor_bytes


@pytest.mark.parametrize(
    ("fmt", "rows", "row_len", "expected"),
    [
        (WeightFormat.Q4_0, 1, 32, 18),          # one block: fp16 scale + 16 bytes of nibbles
        (WeightFormat.Q4_0, 1024, 2048, 1024 * 64 * 18),
        (WeightFormat.Q8_0, 2, 64, 2 * 2 * 34),
        (WeightFormat.Q6_K, 1, 256, 210),
        (WeightFormat.MXFP4, 10, 2880, 10 * 90 * 17),
        (WeightFormat.BF16, 3, 5, 30),
        (WeightFormat.FP16, 3, 5, 30),
        (WeightFormat.FP32, 3, 5, 60),
        (WeightFormat.FP8, 128, 128, 128 * 128 + 4),      # one 128x128 scale block
        (WeightFormat.FP8, 129, 256, 129 * 256 + 4 * 2 * 2),
    ],
)
def test_tensor_bytes_examples(fmt: WeightFormat, rows: int, row_len: int, expected: int) -> None:
    assert tensor_bytes(fmt, rows, row_len) == expected


def test_bits_per_weight() -> None:
    assert FORMAT_INFO[WeightFormat.Q4_0].bits_per_weight == 4.5
    assert FORMAT_INFO[WeightFormat.Q6_K].bits_per_weight == pytest.approx(6.5625)
    assert FORMAT_INFO[WeightFormat.MXFP4].bits_per_weight == 4.25


def test_fallback_like_llama_cpp() -> None:
    # rows of 2880 do not fit Q6_K super-blocks of 256: llama.cpp stores Q8_0 instead
    assert storage_format(WeightFormat.Q6_K, 2880) is WeightFormat.Q8_0
    assert tensor_bytes(WeightFormat.Q6_K, 1, 2880) == 90 * 34
    # a row of 3 fits no 32-block: FP16
    assert storage_format(WeightFormat.Q4_0, 3) is WeightFormat.FP16
    assert storage_format(WeightFormat.Q4_0, 64) is WeightFormat.Q4_0

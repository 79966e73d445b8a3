/* Q4_0 dequantisation and random Q4_0 weights (see q4.h). */
#include "q4.h"

#include <math.h>

#include "common.h"

expert_layout expert_layout_of(int hidden, int inter) {
    expert_layout l;
    l.hidden = hidden;
    l.inter = inter;
    int64_t gate = (int64_t)inter * q4_row_bytes(hidden);
    l.gate_off = 0;
    l.up_off = gate;
    l.down_off = 2 * gate;
    l.bytes = 2 * gate + (int64_t)hidden * q4_row_bytes(inter);
    return l;
}

void q4_dequant_row(const uint8_t *restrict src, float *restrict dst, int64_t k) {
    for (int64_t b = 0; b < k / Q4_BLOCK; b++) {
        const uint8_t *blk = src + b * Q4_BLOCK_BYTES;
        const float d = fp16_to_fp32((uint16_t)(blk[0] | (blk[1] << 8)));
        const uint8_t *qs = blk + 2;
        float *o = dst + b * Q4_BLOCK;
        for (int j = 0; j < 16; j++) {
            o[j] = d * (float)((int)(qs[j] & 15) - 8);
            o[j + 16] = d * (float)((int)(qs[j] >> 4) - 8);
        }
    }
}

void q4_fill_random(uint8_t *dst, int64_t rows, int64_t row_len, uint64_t *state) {
    const double base = 1.0 / (4.6 * sqrt((double)row_len));
    int64_t blocks = rows * (row_len / Q4_BLOCK);
    for (int64_t b = 0; b < blocks; b++) {
        uint8_t *blk = dst + b * Q4_BLOCK_BYTES;
        uint64_t r0 = rng_next(state), r1 = rng_next(state), r2 = rng_next(state);
        uint16_t d = fp32_to_fp16((float)((0.5 + (double)(r0 >> 11) * 0x1.0p-53) * base));
        blk[0] = (uint8_t)(d & 0xff);
        blk[1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 8; j++) {
            blk[2 + j] = (uint8_t)(r1 >> (8 * j));
            blk[10 + j] = (uint8_t)(r2 >> (8 * j));
        }
    }
}

void q4_fill_expert(uint8_t *dst, const expert_layout *lay, uint64_t seed) {
    uint64_t st = seed;
    q4_fill_random(dst + lay->gate_off, lay->inter, lay->hidden, &st);
    q4_fill_random(dst + lay->up_off, lay->inter, lay->hidden, &st);
    q4_fill_random(dst + lay->down_off, lay->hidden, lay->inter, &st);
}

/* GGUF Q4_0: blocks of 32 weights = fp16 scale d (little-endian) + 16 bytes of nibbles.
 * weight j of a block = d * (q_j - 8); byte i holds q_i in its low nibble and q_{i+16} in
 * its high nibble. A row of K weights (K a multiple of 32) is K/32 consecutive blocks. */
#ifndef MOEREF_Q4_H
#define MOEREF_Q4_H

#include <stdint.h>

#define Q4_BLOCK 32
#define Q4_BLOCK_BYTES 18

static inline int64_t q4_row_bytes(int64_t k) { return k / Q4_BLOCK * Q4_BLOCK_BYTES; }

/* One expert = gate [inter x hidden], up [inter x hidden], down [hidden x inter], row-major
 * Q4_0 rows, in that order, without padding. */
typedef struct {
    int hidden, inter;
    int64_t gate_off, up_off, down_off, bytes;
} expert_layout;
expert_layout expert_layout_of(int hidden, int inter);

/* Dequantise k weights (k % 32 == 0) from src into dst. */
void q4_dequant_row(const uint8_t *src, float *dst, int64_t k);

/* Fill `rows` Q4_0 rows of `row_len` weights with random nibbles and random scales
 * d in [0.5, 1.5) / (4.6 sqrt(row_len)) (so a row times a unit-variance vector has about
 * unit variance). Deterministic in *state. */
void q4_fill_random(uint8_t *dst, int64_t rows, int64_t row_len, uint64_t *state);

/* Fill a whole expert (gate, up, down) at dst. */
void q4_fill_expert(uint8_t *dst, const expert_layout *lay, uint64_t seed);

#endif

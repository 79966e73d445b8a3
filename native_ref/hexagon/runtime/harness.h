/* The request/response protocol shared by every kernel program (see README.md).
 *
 * stdin : a 128-byte header (struct request, little-endian uint32 words) and a payload of
 *         sections, each starting at a multiple of 128 bytes from the payload start.
 * stdout: a 128-byte header (magic, status, mismatching bytes, output bytes) followed by
 *         the HVX kernel's output and then the scalar kernel's output (same length).
 * A program runs both versions on the same inputs and counts the bytes where they differ;
 * the Python driver compares both outputs with numpy. */
#ifndef MOESIM_HEXAGON_HARNESS_H
#define MOESIM_HEXAGON_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#define MHX_MAGIC 0x3158484Du /* "MHX1" */
#define MHX_HEADER_B 128u
#define MHX_MAX_PARAMS 8
#define MHX_MAX_SECTIONS 8

struct request {
    uint32_t magic;
    uint32_t kernel;
    uint32_t params[MHX_MAX_PARAMS];
    uint32_t offset_B[MHX_MAX_SECTIONS]; /* from the payload start, multiples of 128 */
    uint32_t length_B[MHX_MAX_SECTIONS];
    uint32_t reserved[6];
};

/* Status codes a program reports (also its exit status). */
enum { MHX_OK = 0, MHX_BAD_INPUT = 2, MHX_TOO_LARGE = 3 };

/* Implemented by each kernel program. */
extern const uint32_t mhx_kernel_id;
int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B);

/* Section i as a pointer, or NULL when it is misaligned, out of range or shorter than need_B. */
const uint8_t *mhx_section(const struct request *rq, const uint8_t *payload, size_t payload_B,
                           int i, size_t need_B);

#endif

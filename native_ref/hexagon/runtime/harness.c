/* main() of every kernel program: read the request, run mhx_run, compare, write the reply. */
#include "harness.h"
#include "rt.h"

#define IN_MAX_B (24u << 20)
#define OUT_MAX_B (12u << 20)

static uint8_t in_buf[IN_MAX_B] __attribute__((aligned(128)));
static uint8_t out_hvx[OUT_MAX_B] __attribute__((aligned(128)));
static uint8_t out_scalar[OUT_MAX_B] __attribute__((aligned(128)));

const uint8_t *mhx_section(const struct request *rq, const uint8_t *payload, size_t payload_B,
                           int i, size_t need_B) {
    uint32_t off = rq->offset_B[i], len = rq->length_B[i];
    if (off % 128u != 0 || len < need_B || off > payload_B || len > payload_B - off) return 0;
    return payload + off;
}

static int fail(int status, const char *msg) {
    rt_log(msg);
    return status;
}

int main(void) {
    long n = rt_read_all(0, in_buf, IN_MAX_B);
    if (n < 0) return fail(MHX_TOO_LARGE, "input larger than the program's buffer (24 MiB)");
    if ((size_t)n < MHX_HEADER_B) return fail(MHX_BAD_INPUT, "input shorter than the 128-byte header");
    const struct request *rq = (const struct request *)in_buf;
    if (rq->magic != MHX_MAGIC) return fail(MHX_BAD_INPUT, "bad magic: not an MHX1 request");
    if (rq->kernel != mhx_kernel_id) return fail(MHX_BAD_INPUT, "request is for another kernel program");

    size_t out_B = 0;
    int status = mhx_run(rq, in_buf + MHX_HEADER_B, (size_t)n - MHX_HEADER_B, out_hvx, out_scalar,
                         OUT_MAX_B, &out_B);
    if (status != MHX_OK) return fail(status, "bad request parameters or sections (see README.md)");

    uint32_t mismatches = 0;
    for (size_t i = 0; i < out_B; i++) mismatches += out_hvx[i] != out_scalar[i];
    uint32_t reply[MHX_HEADER_B / 4] = {MHX_MAGIC, (uint32_t)status, mismatches, (uint32_t)out_B};
    if (rt_write_all(1, reply, sizeof reply) || rt_write_all(1, out_hvx, out_B) ||
        rt_write_all(1, out_scalar, out_B))
        return fail(MHX_BAD_INPUT, "cannot write the reply to stdout");
    return MHX_OK;
}

/* The packed expert file's header (format: pipeline.h): encoding, and reading with every
 * field checked against the file's size and the Q4_0 layout of the shape it names, so that
 * no later read or kernel can run past a buffer on a bad file. */
#ifndef MOEREF_PACK_H
#define MOEREF_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline.h"

/* The limits `executor pack` accepts; a header outside them is refused. */
#define PACK_MAX_LAYERS 4096
#define PACK_MAX_EXPERTS 32767 /* routing ids are int16 */
#define PACK_MIN_DIM 32
#define PACK_MAX_DIM 65536

enum { PACK_OK = 0, PACK_ERR_SYS = -1, PACK_ERR_BAD = -2 };

/* Write h as the PACK_HEADER_BYTES bytes at buf. */
void pack_header_encode(const pack_header *h, uint8_t *buf);

/* Decode and check the header bytes buf[0, n) of a file of file_size bytes. Returns PACK_OK
 * with h filled, or PACK_ERR_BAD with a one-line reason in why naming the field, the rule
 * and the value ("pack header: expert_stride must be >= expert_bytes (55296), got 8192"). */
int pack_header_check(const uint8_t *buf, size_t n, int64_t file_size, pack_header *h, char *why, size_t why_len);

/* Read and check the header of the file at path; *size gets its size. PACK_ERR_SYS when it
 * cannot be opened or read (errno set), PACK_ERR_BAD as pack_header_check. */
int pack_header_read(const char *path, pack_header *h, int64_t *size, char *why, size_t why_len);

/* data_offset + layers x experts x expert_stride: the size of the file a checked header
 * describes (no overflow after pack_header_check). */
int64_t pack_file_bytes(const pack_header *h);

#endif

/*
 * tools.h - what the tools (src/tools/, built on the public API only) share
 * among themselves.  Not installed; nothing here is exported.
 */
#ifndef CKPT_TOOLS_INTERNAL_H
#define CKPT_TOOLS_INTERNAL_H

#include "ckpt.h"

#include <stddef.h>

/* Nonzero when this machine stores integers big-endian. */
int ck_tools_host_big_endian(void);

/* Bytes of one number to reverse for little-endian output: the element, or
 * each half of a complex element. */
size_t ck_tools_swap_unit(ckpt_dtype dtype);

/* Reverse the bytes of each `unit`-byte number of p[0..n). */
void ck_tools_swap_bytes(unsigned char *p, size_t n, size_t unit);

#endif /* CKPT_TOOLS_INTERNAL_H */

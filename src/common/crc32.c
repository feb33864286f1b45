/*
 * crc32.c - layer 1 (common): CRC-32 as zlib's crc32() computes it (the ZIP
 * checksum), folded 64 bytes a step with carry-less multiplication where
 * the CPU has it: x86-64 with PCLMULQDQ, checked at run time.  Elsewhere,
 * and for short inputs and tails, zlib.  The only CPU-specific code of ckpt.
 */
#include "common.h"

#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CK_CRC_CLMUL 1
/* The method of Intel's "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ" (and Linux's crc32-pclmul), constants for the reflected
 * polynomial 0xEDB88320.  n >= 64, a multiple of 16; returns the raw
 * (uninverted) state. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t crc,
                                                                   const unsigned char *p, size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    __m128i t;
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
#define FOLD(x, k, next)                                                                           \
    t = _mm_clmulepi64_si128(x, k, 0x11);                                                          \
    x = _mm_clmulepi64_si128(x, k, 0x00);                                                          \
    x = _mm_xor_si128(_mm_xor_si128(x, t), next)
    while (n >= 64) {
        FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)(const void *)p));
        FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        n -= 64;
    }
    FOLD(x1, k3k4, x2);
    FOLD(x1, k3k4, x3);
    FOLD(x1, k3k4, x4);
    while (n >= 16) {
        FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD
    /* 128 -> 64 bits */
    t = _mm_clmulepi64_si128(k3k4, x1, 0x01);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    /* 64 -> 32 bits */
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(x1, t);
    /* Barrett reduction */
    t = x1;
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* Equal to zlib's for every input (tests/unit and tests/tools compare). */
uint32_t ck_crc32(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
#ifdef CK_CRC_CLMUL
    if (n >= 256 && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
        size_t m = n & ~(size_t)15;
        crc = ~crc_clmul(~crc, p, m);
        p += m;
        n -= m;
    }
#endif
    uLong c = crc;
    while (n > 0) {
        uInt k = n > 0x40000000u ? 0x40000000u : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

uint32_t ckpt_crc32(uint32_t crc, const void *p, size_t n)
{
    return p || n == 0 ? ck_crc32(crc, p ? p : "", n) : crc;
}

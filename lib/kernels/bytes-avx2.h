/*
 * Helpers shared by the AVX2 byte kernels (gemm-u8.c, attn-u8.c): the
 * target they are built for, scratch alignment, partial-vector lane
 * masks, and the pack of 8 int32 lanes into 8 bytes. Every function here
 * is inline and needs nothing but AVX2, F16C and FMA.
 */
#ifndef SOTTO_BYTES_AVX2_H
#define SOTTO_BYTES_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define V3	__attribute__((target("avx2,f16c,fma")))

/* n rounded up to a cache line, so that carved buffers do not share one */
static inline size_t
align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Lanes [0, n) of 8 set (all of them for n >= 8). */
V3 static inline __m256i
lanes8(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
	    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

V3 static inline __m256
lanes8_ps(int n)
{
	return _mm256_castsi256_ps(lanes8(n));
}

/* 8 int32 lanes within -128..127 as 8 signed bytes, lane 0 lowest */
V3 static inline uint64_t
s8_of8(__m256i q)
{
	__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
	    _mm256_extracti128_si256(q, 1));

	return (uint64_t)_mm_cvtsi128_si64(_mm_packs_epi16(w, w));
}

/* 8 int32 lanes within 0..255 as 8 unsigned bytes, lane 0 lowest */
V3 static inline uint64_t
u8_of8(__m256i q)
{
	__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
	    _mm256_extracti128_si256(q, 1));

	return (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(w, w));
}

#endif

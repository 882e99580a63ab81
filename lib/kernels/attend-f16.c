/*
 * layer_attend (attend.c) over keys and values stored as IEEE binary16,
 * for precision int8 on AVX2 (the decoder's cross-attention): a cached
 * step reads every layer's window K and V, 18 MB a token in f32 for
 * tiny.en and 37 MB for base, and is bound by those reads. In f16 they
 * are half the bytes, widened exactly by F16C as they are read. Built
 * for AVX2, FMA and F16C only: that path exists only where the CPU has
 * them (gemv_i8_avx2_supported). layer_attend's loops (attend-window.h),
 * so that a query's floats do not depend on the others; its products
 * fused (FMA), as they have been since the path came.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "layers.h"

#define V3	__attribute__((target("avx2,fma,f16c")))

V3 static inline __m256
ld8h(const uint16_t *x)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x));
}

V3 static inline float
f16_value(uint16_t h)
{
	return _cvtsh_ss(h);
}

#define AW_ELEM			uint16_t
#define AW_LOAD8(x)		ld8h(x)
#define AW_VALUE(x)		f16_value(x)
#define AW_MADD8(a, b, c)	_mm256_fmadd_ps((a), (b), (c))
#define AW_MADD(a, b, c)	fmaf((a), (b), (c))
#define AW_ATTR			V3
#define AW_NAME(x)		x##_f16
#include "attend-window.h"

V3 void
layer_attend_f16(const float *q, int ldq, int nq, const uint16_t *k,
    const uint16_t *v, int ldk, int n, int dh, float scale, float *out,
    int ldo, float *p)
{
	attend_f16(q, ldq, nq, k, v, ldk, n, dh, scale, out, ldo, p);
}

V3 void
layer_to_f16(const float *x, uint16_t *y, size_t n)
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(
		    _mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

V3 void
layer_from_f16(const uint16_t *x, float *y, size_t n)
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, ld8h(x + i));
	for (; i < n; i++)
		y[i] = f16_value(x[i]);
}

/*
 * Helpers shared by the hand-written AMX / AVX-512 kernels (gemv.c,
 * gemm-amx.c, attn-amx.c, logits.c). Every function here is inline and
 * compiled for the target of the kernel that calls it.
 */
#ifndef SOTTO_AMX_H
#define SOTTO_AMX_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* AVX512-BF16 kernels; the AMX targets below include it. */
#define BF16_TARGET __attribute__((target( \
	"avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX_TARGET_BF16 __attribute__((target( \
	"amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX_TARGET_INT8 __attribute__((target( \
	"amx-tile,amx-int8,avx512f,avx512bw,avx512vl,f16c,fma")))

/* The LDTILECFG operand (palette 1). */
struct amx_config {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* Tiles 0 .. n-1 as 16 rows of 64 bytes, the only shape the kernels use. */
#define AMX_CONFIGURE(n) do {						\
	struct amx_config amx_cfg_ = { 0 };				\
	int amx_i_;							\
									\
	amx_cfg_.palette = 1;						\
	for (amx_i_ = 0; amx_i_ < (n); amx_i_++) {			\
		amx_cfg_.rows[amx_i_] = 16;				\
		amx_cfg_.colsb[amx_i_] = 64;				\
	}								\
	/* GCC 12 drops the stores above: it does not see that	\
	 * LDTILECFG reads all 64 bytes. */				\
	__asm__ __volatile__("" : : "m"(amx_cfg_));			\
	_tile_loadconfig(&amx_cfg_);					\
} while (0)

/* Round to nearest even, as oneDNN and the hardware converts do. */
static inline uint16_t
bf16_round(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float
bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Lanes of the 16 positions from j that are below n. */
static inline __mmask16
lanes16(int j, int n)
{
	if (n - j >= 16)
		return 0xffff;
	return n - j <= 0 ? 0 : (__mmask16)((1u << (n - j)) - 1);
}

/* exp(x), x clamped below at -87: range reduction + degree-6 polynomial. */
__attribute__((target("avx512f"))) static inline __m512
exp512(__m512 x)
{
	__m512 k, r, p;

	x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
	k = _mm512_roundscale_ps(_mm512_mul_ps(x,
	    _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT |
	    _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
	p = _mm512_set1_ps(1.0f / 720.0f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, k);
}

/* erf-GELU, as layers.c's: erfc(z) = t exp(-z^2 + P(t)). */
BF16_TARGET static inline __m512
gelu512(__m512 v)
{
	static const float c[] = { 0.17087277f, -0.82215223f, 1.48851587f,
	    -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
	    0.37409196f, 1.00002368f, -1.26551223f };
	__m512 z = _mm512_mul_ps(_mm512_abs_ps(v), _mm512_set1_ps(
	    0.70710678f)), t, p, erfc_z;
	size_t i;

	t = _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f));
	/* 1 / t by rcp14 and one Newton step (~1e-8 relative), not div */
	p = _mm512_rcp14_ps(t);
	t = _mm512_mul_ps(p, _mm512_fnmadd_ps(t, p, _mm512_set1_ps(2.0f)));
	p = _mm512_set1_ps(c[0]);
	for (i = 1; i < sizeof(c) / sizeof(c[0]); i++)
		p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
	erfc_z = _mm512_mul_ps(t, exp512(_mm512_fmadd_ps(_mm512_sub_ps(
	    _mm512_setzero_ps(), z), z, p)));
	/* v >= 0: v (1 - erfc/2); v < 0: v erfc/2 */
	erfc_z = _mm512_mask_sub_ps(erfc_z, _mm512_cmp_ps_mask(v,
	    _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(2.0f), erfc_z);
	return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), erfc_z);
}

/*
 * Rows a and b (16 values each) as bf16 pairs (a[j], b[j]) in dword j:
 * one 64-byte row of the B layout (gemm-win.h), both operand shapes of
 * AMX tile and vdpbf16ps products.
 */
BF16_TARGET static inline __m512i
bf16_pairs(__m512 a, __m512 b)
{
	__m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
	__m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));

	return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* 16 values of a row (lanes m, zero elsewhere), through GELU if gelu. */
BF16_TARGET static inline __m512
load_lanes(const float *row, __mmask16 m, int gelu)
{
	__m512 v = _mm512_maskz_loadu_ps(m, row);

	return gelu ? _mm512_maskz_mov_ps(m, gelu512(v)) : v;
}

#endif

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

#endif

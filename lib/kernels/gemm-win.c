/*
 * What the two window-product kernels (gemm-amx.c, gemm-dp.c) share: the
 * B layout of X and the sizes of their buffers (gemm-win.h).
 */
#include <immintrin.h>
#include <omp.h>

#include "amx.h"
#include "gemm-win.h"

size_t
win_packed_bytes(int m, int n)
{
	return (size_t)(m + 31) / 32 * 32 * ((n + 31) / 32 * 32) * 2;
}

size_t
win_scratch_bytes(int m, int k, int n)
{
	/* X in the B layout, then the AMX bias tiles and a tile of ones */
	return win_packed_bytes(k, n) + (size_t)(m + 15) / 16 * 1024 + 1024;
}

int
win_gemm_fits(int m, int k, int n, int ldy, int amx)
{
	(void)m;
	(void)k;
	if (!amx)
		return ldy >= n;
	return ldy % 16 == 0 && ldy >= (n + 31) / 32 * 32;
}

/*
 * One 64-byte row of the B layout is two rows of X interleaved. With
 * gelu, the rows go through GELU as they are packed: the activation
 * costs no pass of its own over memory.
 */
BF16_TARGET void
win_pack_x(const float *x, int ldx, int k, int n, int gelu, uint16_t *xv)
{
	int kc = (k + 31) / 32, nbs = (n + 31) / 32 * 2, kp;

#pragma omp parallel for schedule(static)
	for (kp = 0; kp < kc * 16; kp++) {
		int r0 = 2 * kp, nb;
		const float *a = r0 < k ? x + (size_t)r0 * ldx : x;
		const float *b = r0 + 1 < k ? a + ldx : x;

		for (nb = 0; nb < nbs; nb++) {
			__mmask16 m = lanes16(16 * nb, n);
			__mmask16 ma = r0 < k ? m : 0, mb = r0 + 1 < k ? m : 0;

			_mm512_storeu_si512(xv + (((size_t)nb * kc + kp / 16) *
			    16 + kp % 16) * 32, bf16_pairs(
			    load_lanes(a + 16 * nb, ma, gelu),
			    load_lanes(b + 16 * nb, mb, gelu)));
		}
	}
}

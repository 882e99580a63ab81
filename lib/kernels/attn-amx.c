/*
 * The window attention's two products on AMX tiles (attn-win.c has the
 * buffers and the softmax between them):
 *
 *   S[16][1504] = Q[16][dh] K^T     tile products, 2 per 16 keys
 *   O[16][dh] = P V / sum(P)        tile products, dh/16 per 32 keys
 */
#include <immintrin.h>

#include "amx.h"
#include "attn-win.h"

#define NP	ATTN_NP
#define QB	ATTN_QB
#define DH	ATTN_DH
/*
 * How far ahead of the K and V tile loads to prefetch, as gemv.c and
 * logits.c do for their weights: in the decoder's cross-attention K and
 * V come from memory at every step (in the encoder they sit in L2 and
 * the prefetches cost next to nothing).
 */
#define PREFETCH_BYTES	16384

#define AMX_TARGET	AMX_TARGET_BF16

/* tile registers (macros: the intrinsics paste the number into asm) */
#define T_O0	0
#define T_O1	1
#define T_O2	2
#define T_O3	3
#define T_A0	4
#define T_A1	5
#define T_B0	6
#define T_B1	7

AMX_TARGET void
attn_amx_begin(void)
{
	AMX_CONFIGURE(8);
}

AMX_TARGET void
attn_amx_end(void)
{
	_tile_release();
}

/* Queries [q0, q0 + 16) of head h against slot's keys into o. */
AMX_TARGET void
attn_amx_block(const struct attn_win *a, struct attn_thread *t, int slot,
    int h, int q0, const struct attn_out *o)
{
	size_t at = ((size_t)slot * a->n_head + h) * NP * DH;
	int nq = o->n - q0 < QB ? o->n - q0 : QB, kb, c, i, n;
	const uint16_t *q = a->q + ((size_t)h * a->q_rows + q0) * DH;
	const uint16_t *k = a->k + at, *v = a->v + at;
	float res[QB][DH], inv[QB];

	/* S = Q K^T, 16 keys at a time, two 32-channel chunks each */
	_tile_loadd(T_A0, q, DH * 2);
	_tile_loadd(T_A1, q + 32, DH * 2);
	for (kb = 0; kb < NP / 16; kb++) {
		const uint16_t *kt = k + (size_t)kb * 2 * 512;

		_tile_zero(T_O0);
		_mm_prefetch((const char *)kt + PREFETCH_BYTES, _MM_HINT_T0);
		_mm_prefetch((const char *)(kt + 512) + PREFETCH_BYTES,
		    _MM_HINT_T0);
		_tile_loadd(T_B0, kt, 64);
		_tile_loadd(T_B1, kt + 512, 64);
		_tile_dpbf16ps(T_O0, T_A0, T_B0);
		_tile_dpbf16ps(T_O0, T_A1, T_B1);
		_tile_stored(T_O0, &t->s[0][kb * 16], NP * 4);
	}
	for (i = 0; i < nq; i++)
		inv[i] = 1.0f / attn_softmax_row(t->s[i], t->p[i]);

	/* O = P V, 32 keys at a time into four 16-channel tiles */
	_tile_zero(T_O0);
	_tile_zero(T_O1);
	_tile_zero(T_O2);
	_tile_zero(T_O3);
	for (c = 0; c < NP / 32; c++) {
		const uint16_t *vt = v + (size_t)c * 4 * 512;

		for (i = 0; i < 4; i++)
			_mm_prefetch((const char *)(vt + i * 512) +
			    PREFETCH_BYTES, _MM_HINT_T0);
		_tile_loadd(T_A0, &t->p[0][32 * c], NP * 2);
		_tile_loadd(T_B0, vt, 64);
		_tile_loadd(T_B1, vt + 512, 64);
		_tile_dpbf16ps(T_O0, T_A0, T_B0);
		_tile_dpbf16ps(T_O1, T_A0, T_B1);
		_tile_loadd(T_B0, vt + 1024, 64);
		_tile_loadd(T_B1, vt + 1536, 64);
		_tile_dpbf16ps(T_O2, T_A0, T_B0);
		_tile_dpbf16ps(T_O3, T_A0, T_B1);
	}
	_tile_stored(T_O0, &res[0][0], DH * 4);
	_tile_stored(T_O1, &res[0][16], DH * 4);
	_tile_stored(T_O2, &res[0][32], DH * 4);
	_tile_stored(T_O3, &res[0][48], DH * 4);
	for (n = 0; n < DH; n++)
		for (i = 0; i < nq; i++)
			o->out[((size_t)h * DH + n) * o->ldo + q0 + i] =
			    res[i][n] * inv[i];
}


/*
 * The window attention's two products by AVX512-BF16 dot products
 * (vdpbf16ps), for CPUs without AMX; attn-win.c has the buffers and the
 * softmax between them. The tile layouts serve as they are: a 64-byte
 * tile row is the vector operand, and a dword of Q or P (two
 * consecutive dims or keys of one query) the broadcast one.
 *
 *   S[i][16 keys] += dp(Q[i][pair r], K row r)     for the 32 dim pairs
 *   O[i][16 dims] += dp(P[i][pair r], V row r)     for the 752 key pairs
 *
 * Queries go up to 8 at a time for the scores (16 accumulators) and 6
 * for the output (24); a decoder step's one or few queries (beams) take
 * an instance of their own number, so K and V, which come from memory at
 * every step, are read once and the cost follows the number of queries.
 * 16 queries (the encoder) go 8 + 8 and 4 + 4 + 4 + 4.
 */
#include <immintrin.h>
#include <string.h>

#include "amx.h"
#include "attn-win.h"

#define NP	ATTN_NP
#define QB	ATTN_QB
#define DH	ATTN_DH
#define NKG	2	/* key groups of 16 per pass of the scores */
#define SCORES_MQ	8	/* most queries per pass: 16 accumulators */
#define WEIGHTED_MQ	6	/* 24 accumulators */

/* Scores of mq queries (token-major q, scaled) against all keys into s. */
BF16_TARGET static inline __attribute__((always_inline)) void
scores(const uint16_t *q, const uint16_t *k, float (*s)[NP], const int mq)
{
	const uint32_t *qd = (const uint32_t *)q;	/* [i][DH / 2] */
	int kb, i, g, r;

	for (kb = 0; kb < NP / 16; kb += NKG) {
		/* key group kb + g, dim pair r: row (kb + g) * 32 + r */
		const __m512i *kt = (const __m512i *)(k + (size_t)kb * 1024);
		__m512 acc[SCORES_MQ][NKG];

		for (i = 0; i < mq; i++)
			for (g = 0; g < NKG; g++)
				acc[i][g] = _mm512_setzero_ps();
		for (r = 0; r < DH / 2; r++) {
			__m512bh kr[NKG];

			for (g = 0; g < NKG; g++)
				kr[g] = (__m512bh)_mm512_load_si512(kt +
				    g * 32 + r);
			for (i = 0; i < mq; i++) {
				__m512bh qi = (__m512bh)_mm512_set1_epi32(
				    (int)qd[i * (DH / 2) + r]);

				for (g = 0; g < NKG; g++)
					acc[i][g] = _mm512_dpbf16_ps(acc[i][g],
					    qi, kr[g]);
			}
		}
		for (i = 0; i < mq; i++)
			for (g = 0; g < NKG; g++)
				_mm512_storeu_ps(&s[i][(kb + g) * 16],
				    acc[i][g]);
	}
}

/* O[i][DH] = P[i] V of mq queries (unnormalised bf16 p) into res. */
BF16_TARGET static inline __attribute__((always_inline)) void
weighted(uint16_t (*p)[NP], const uint16_t *v, float (*res)[DH],
    const int mq)
{
	__m512 acc[WEIGHTED_MQ][DH / 16];
	int c, i, b, r;

	for (i = 0; i < mq; i++)
		for (b = 0; b < DH / 16; b++)
			acc[i][b] = _mm512_setzero_ps();
	for (c = 0; c < NP / 32; c++) {
		/* key chunk c, dim block b, key pair r: row (c * 4 + b) * 16 + r */
		const __m512i *vt = (const __m512i *)(v + (size_t)c * 2048);

		for (r = 0; r < 16; r++) {
			__m512bh vr[DH / 16];

			for (b = 0; b < DH / 16; b++)
				vr[b] = (__m512bh)_mm512_load_si512(vt +
				    b * 16 + r);
			for (i = 0; i < mq; i++) {
				uint32_t pair;
				__m512bh pi;

				memcpy(&pair, &p[i][32 * c + 2 * r], 4);
				pi = (__m512bh)_mm512_set1_epi32((int)pair);
				for (b = 0; b < DH / 16; b++)
					acc[i][b] = _mm512_dpbf16_ps(acc[i][b],
					    pi, vr[b]);
			}
		}
	}
	for (i = 0; i < mq; i++)
		for (b = 0; b < DH / 16; b++)
			_mm512_storeu_ps(&res[i][16 * b], acc[i][b]);
}

/* An instance per number of queries, so the accumulators stay in registers. */
#define SCORES(mq)							\
BF16_TARGET static void							\
scores_##mq(const uint16_t *q, const uint16_t *k, float (*s)[NP])	\
{									\
	scores(q, k, s, mq);						\
}
#define WEIGHTED(mq)							\
BF16_TARGET static void							\
weighted_##mq(uint16_t (*p)[NP], const uint16_t *v, float (*res)[DH])	\
{									\
	weighted(p, v, res, mq);					\
}

SCORES(1) SCORES(2) SCORES(3) SCORES(4) SCORES(5) SCORES(6) SCORES(7)
SCORES(8)
WEIGHTED(1) WEIGHTED(2) WEIGHTED(3) WEIGHTED(4) WEIGHTED(5) WEIGHTED(6)

typedef void (*scores_fn)(const uint16_t *, const uint16_t *, float (*)[NP]);
typedef void (*weighted_fn)(uint16_t (*)[NP], const uint16_t *,
    float (*)[DH]);

static const scores_fn scores_for[SCORES_MQ + 1] = { NULL, scores_1,
    scores_2, scores_3, scores_4, scores_5, scores_6, scores_7, scores_8 };
static const weighted_fn weighted_for[WEIGHTED_MQ + 1] = { NULL,
    weighted_1, weighted_2, weighted_3, weighted_4, weighted_5,
    weighted_6 };

BF16_TARGET void
attn_dp_block(const struct attn_win *a, struct attn_thread *t, int slot,
    int h, int q0, const struct attn_out *o)
{
	size_t at = ((size_t)slot * a->n_head + h) * NP * DH;
	int nq = o->n - q0 < QB ? o->n - q0 : QB, i, n, mq;
	const uint16_t *q = a->q + ((size_t)h * a->q_rows + q0) * DH;
	const uint16_t *k = a->k + at, *v = a->v + at;
	float res[QB][DH], inv[QB];

	/* a decoder step's few queries in one pass over K and one over V */
	for (i = 0; i < nq; i += mq) {
		mq = nq - i < SCORES_MQ ? nq - i : SCORES_MQ;
		scores_for[mq](q + (size_t)i * DH, k, &t->s[i]);
	}
	for (i = 0; i < nq; i++)
		inv[i] = 1.0f / attn_softmax_row(t->s[i], t->p[i]);
	for (i = 0; i < nq; i += mq) {
		mq = nq - i <= WEIGHTED_MQ ? nq - i : 4;
		weighted_for[mq](&t->p[i], v, &res[i]);
	}
	for (n = 0; n < DH; n++)
		for (i = 0; i < nq; i++)
			o->out[((size_t)h * DH + n) * o->ldo + q0 + i] =
			    res[i][n] * inv[i];
}

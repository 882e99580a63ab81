/*
 * Attention over the window (attn-win.h): buffers, packing, threads.
 *
 * Why by hand: composed from oneDNN 2.6 products, the scores product
 * (K = 64) falls back to a slow gemm and the softmax between two products
 * streams 9 MB of scores per head; attention was about half of the
 * encoder's time. Here a block of 16 queries goes through all 1500 keys
 * while its scores (96 KB) stay in L2:
 *
 *   S[16][1504] = Q[16][dh] K^T     (attn-amx.c or attn-dp.c)
 *   P = exp(S - max) in bf16        AVX-512, unnormalised
 *   O[16][dh] = P V / sum(P)        (attn-amx.c or attn-dp.c)
 *
 * Q, K and V are repacked (rounded to bf16, Q scaled) into the shapes the
 * kernels load: Q token-major, K as B tiles of K^T, V as B tiles of V
 * (pairs of consecutive keys interleaved). Keys are padded to 1504, a
 * multiple of 32, with zero K and V; their scores are masked.
 *
 * The decoder's cross-attention is the same computation with its tokens
 * (or beams) as the queries: its K/V are packed once per window, one slot
 * per decoder layer, and read in bf16 at every step (half the memory
 * traffic of f32).
 *
 * ref: whisper/model.py MultiHeadAttention.qkv_attention
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "attn-win.h"
#include "bigmem.h"
#include "err.h"

#define NA	WHISPER_N_AUDIO_CTX
#define LD	WHISPER_AUDIO_LD	/* row stride of qkv and out */
#define NP	ATTN_NP
#define QB	ATTN_QB
#define DH	ATTN_DH

int
attn_win_new(int d, int n_head, int n_slots, int max_q, int amx,
    struct attn_win **ret, char *err)
{
	struct attn_win *a;
	size_t kv = (size_t)n_slots * NP * d * 2;

	if (d % n_head != 0 || d / n_head != DH)
		return err_set(err, SOTTO_EINVAL, "window attention needs "
		    "heads of %d channels (d %d, %d heads)", DH, d, n_head);
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	a->d = d;
	a->n_head = n_head;
	a->n_slots = n_slots;
	a->max_q = max_q;
	a->amx = amx;
	a->q_rows = (max_q + QB - 1) / QB * QB;
	a->n_threads = omp_get_max_threads();
	a->q = bigmem_alloc((size_t)a->q_rows * d * 2);
	a->k = bigmem_alloc(kv);
	a->v = bigmem_alloc(kv);
	a->t = bigmem_alloc(sizeof(*a->t) * a->n_threads);
	if (a->q == NULL || a->k == NULL || a->v == NULL || a->t == NULL) {
		attn_win_free(a);
		return err_set(err, SOTTO_ENOMEM, "out of memory for "
		    "attention buffers");
	}
	/* padding keys and queries stay zero */
	memset(a->q, 0, (size_t)a->q_rows * d * 2);
	memset(a->k, 0, kv);
	memset(a->v, 0, kv);
	memset(a->t, 0, sizeof(*a->t) * a->n_threads);
	*ret = a;
	return 0;
}

void
attn_win_free(struct attn_win *a)
{
	if (a == NULL)
		return;
	bigmem_free(a->q);
	bigmem_free(a->k);
	bigmem_free(a->v);
	bigmem_free(a->t);
	free(a);
}

/* 16 floats to bf16, rounding to nearest even. */
BF16_TARGET static inline __m256i
cvt16(__m512 x)
{
	return (__m256i)_mm512_cvtneps_pbh(x);
}

/* Lanes of the 16 positions from j that are real keys. */
static __mmask16
tail_mask(int j)
{
	return lanes16(j, NA);
}

BF16_TARGET static inline __m512i
dword_index(int stride)
{
	return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9,
	    8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(stride));
}

/* Head h's queries (rows of q, ldq apart, n of them) scaled, token-major. */
BF16_TARGET static void
pack_q(struct attn_win *a, const float *q, int ldq, int n, int h,
    float scale)
{
	uint16_t *qo = a->q + (size_t)h * a->q_rows * DH;
	__m512 sc = _mm512_set1_ps(scale);
	__m512i idx = dword_index(DH / 2);
	int r, j;

	q += (size_t)h * DH * ldq;
	/* dims (2r, 2r+1) of 16 queries, scattered to their rows */
	for (r = 0; r < DH / 2; r++)
		for (j = 0; j < n; j += 16) {
			__mmask16 m = lanes16(j, n);

			_mm512_mask_i32scatter_epi32(qo + (size_t)j * DH +
			    2 * r, m, idx, bf16_pairs(_mm512_mul_ps(
			    _mm512_maskz_loadu_ps(m, q + (size_t)2 * r * ldq +
			    j), sc), _mm512_mul_ps(_mm512_maskz_loadu_ps(m,
			    q + (size_t)(2 * r + 1) * ldq + j), sc)), 4);
		}
}

/* Head h of k and v [d][LD] into slot's tiles. */
BF16_TARGET static void
pack_kv(struct attn_win *a, int slot, const float *k, const float *v, int h)
{
	size_t at = ((size_t)slot * a->n_head + h) * NP * DH;
	uint16_t *ko = a->k + at, *vo = a->v + at;
	__m512i idx = dword_index(16);
	int r, j, c, n;

	k += (size_t)h * DH * LD;
	v += (size_t)h * DH * LD;
	/* K: B tile row r of (key block, dim chunk c) = dims (2r, 2r+1) */
	for (c = 0; c < DH / 32; c++)
		for (r = 0; r < 16; r++) {
			const float *k0 = k + (size_t)(32 * c + 2 * r) * LD;

			for (j = 0; j < NA; j += 16)
				_mm512_storeu_si512(ko + (((size_t)(j / 16) *
				    (DH / 32) + c) * 16 + r) * 32, bf16_pairs(
				    _mm512_maskz_loadu_ps(tail_mask(j), k0 + j),
				    _mm512_maskz_loadu_ps(tail_mask(j),
				    k0 + LD + j)));
		}
	/* V: B tile row r of (key chunk, dim block) = keys (2r, 2r+1) */
	for (n = 0; n < DH; n++)
		for (j = 0; j < NA; j += 32) {
			const float *row = v + (size_t)n * LD + j;
			__m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(
			    _mm512_maskz_loadu_ps(tail_mask(j + 16), row + 16),
			    _mm512_maskz_loadu_ps(tail_mask(j), row));

			_mm512_i32scatter_epi32(vo + ((((size_t)(j / 32) *
			    (DH / 16) + n / 16) * 16) * 16 + n % 16) * 2, idx,
			    pairs, 4);
		}
}

/* e = bf16(exp(s - max)) of 16 keys from j, stored to p; adds e to sum. */
BF16_TARGET static inline __m512
exp16(const float *s, uint16_t *p, int j, __m512 mx, __m512 sum)
{
	__m512 e = _mm512_maskz_mov_ps(tail_mask(j),
	    exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), mx)));
	__m256i b = cvt16(e);

	_mm256_storeu_si256((__m256i *)(p + j), b);
	/* sum what the product will see: the rounded values */
	return _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(
	    _mm512_cvtepu16_epi32(b), 16)));
}

/*
 * Four independent accumulators per pass: with one, the chain of
 * dependent max and add instructions was the kernel's largest cost.
 */
BF16_TARGET float
attn_softmax_row(const float *s, uint16_t *p)
{
	__m512 m0, m1, m2, m3, s0, s1, s2, s3, mx;
	int j;

	m0 = m1 = m2 = m3 = _mm512_set1_ps(-INFINITY);
	for (j = 0; j + 64 <= NP; j += 64) {
		m0 = _mm512_mask_max_ps(m0, tail_mask(j), m0,
		    _mm512_loadu_ps(s + j));
		m1 = _mm512_mask_max_ps(m1, tail_mask(j + 16), m1,
		    _mm512_loadu_ps(s + j + 16));
		m2 = _mm512_mask_max_ps(m2, tail_mask(j + 32), m2,
		    _mm512_loadu_ps(s + j + 32));
		m3 = _mm512_mask_max_ps(m3, tail_mask(j + 48), m3,
		    _mm512_loadu_ps(s + j + 48));
	}
	for (; j < NP; j += 16)
		m0 = _mm512_mask_max_ps(m0, tail_mask(j), m0,
		    _mm512_loadu_ps(s + j));
	mx = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(
	    _mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
	s0 = s1 = s2 = s3 = _mm512_setzero_ps();
	for (j = 0; j + 64 <= NP; j += 64) {
		s0 = exp16(s, p, j, mx, s0);
		s1 = exp16(s, p, j + 16, mx, s1);
		s2 = exp16(s, p, j + 32, mx, s2);
		s3 = exp16(s, p, j + 48, mx, s3);
	}
	for (; j < NP; j += 16)
		s0 = exp16(s, p, j, mx, s0);
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1),
	    _mm512_add_ps(s2, s3)));
}

/*
 * The scores a block left in t->s (both kernels keep them: the softmax
 * writes p beside them) for the caller's keep, if it wants head h.
 */
static void
keep_scores(const struct attn_thread *t, int h, int q0,
    const struct attn_out *o)
{
	const struct attn_keep *k = o->keep;
	int nq = o->n - q0 < QB ? o->n - q0 : QB, i;

	if (k == NULL || k->slot[h] < 0)
		return;
	for (i = 0; i < nq; i++)
		memcpy(k->out + ((size_t)k->slot[h] * o->n + q0 + i) *
		    k->n_keys, t->s[i], k->n_keys * sizeof(float));
}

/* Thread t of nt: its share of the (head, query block) pairs. */
static void
run_share(const struct attn_win *a, int slot, const struct attn_out *o,
    int t, int nt)
{
	int n_blocks = (o->n + QB - 1) / QB, total = a->n_head * n_blocks, w;

	if (a->amx)
		attn_amx_begin();
	for (w = total * t / nt; w < total * (t + 1) / nt; w++) {
		(a->amx ? attn_amx_block : attn_dp_block)(a, &a->t[t], slot,
		    w / n_blocks, w % n_blocks * QB, o);
		keep_scores(&a->t[t], w / n_blocks, w % n_blocks * QB, o);
	}
	if (a->amx)
		attn_amx_end();
}

int
attn_win_set_kv(struct attn_win *a, int slot, const float *k,
    const float *v, char *err)
{
	int h;

	if (slot < 0 || slot >= a->n_slots)
		return err_set(err, SOTTO_EINVAL, "window attention: no K/V "
		    "slot %d", slot);
#pragma omp parallel for schedule(static)
	for (h = 0; h < a->n_head; h++)
		pack_kv(a, slot, k, v, h);
	return 0;
}

int
attn_win_query(struct attn_win *a, int slot, const float *q, int ldq, int n,
    float *out, int ldo, char *err)
{
	return attn_win_query_keep(a, slot, q, ldq, n, out, ldo, NULL, err);
}

int
attn_win_query_keep(struct attn_win *a, int slot, const float *q, int ldq,
    int n, float *out, int ldo, const struct attn_keep *keep, char *err)
{
	struct attn_out o = { out, ldo, n, keep };
	float scale = 1.0f / sqrtf((float)DH);
	int h;

	if (slot < 0 || slot >= a->n_slots || n < 1 || n > a->max_q)
		return err_set(err, SOTTO_EINVAL, "window attention: %d "
		    "queries in slot %d", n, slot);
	if (omp_get_max_threads() > a->n_threads)
		return err_set(err, SOTTO_ECOMPUTE, "window attention: %d "
		    "threads but buffers for %d", omp_get_max_threads(),
		    a->n_threads);
	if (keep != NULL && (keep->n_keys < 1 || keep->n_keys > NA))
		return err_set(err, SOTTO_EINVAL, "window attention: %d "
		    "scores to keep", keep->n_keys);
#pragma omp parallel for schedule(static) if (n > QB)
	for (h = 0; h < a->n_head; h++)
		pack_q(a, q, ldq, n, h, scale);
#pragma omp parallel
	run_share(a, slot, &o, omp_get_thread_num(), omp_get_num_threads());
	return 0;
}

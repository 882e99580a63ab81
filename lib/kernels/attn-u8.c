/*
 * The encoder's self-attention over the window from bytes, by oneDNN's
 * u8 x s8 GEMM: precision int8 on CPUs without AVX512-VNNI, where the
 * fp32 attention was half of an encoder pass. On a Zen 3 core that GEMM
 * ran a block's q.k (64 queries x 1500 keys x 64) in 76 us against
 * sgemm's 174, and its weighted sums of V in 71 against 136.
 *
 * As in gemm-u8.c one side of each byte product keeps 7 bits, so that
 * `vpmaddubsw`'s 16-bit pair sums cannot saturate:
 *   - q.k: each query rounded to 0..127 over its head's dh channels (a
 *     scale and a zero point), each key to -127..127 (a scale; its sum
 *     kept for the zero point);
 *   - p.v: the probabilities exp(s - max), whose largest is 1, rounded
 *     to 0..127 in steps of 1/127; each channel of V to -127..127 over
 *     the keys (a scale).
 * The softmax's sum is taken before its rounding. On the 15 test files
 * tiny.en and base, greedy and beam 5, stayed within a word of what they
 * gave with this attention in fp32 (docs/architecture.md, "Numerics").
 *
 * K and V are rounded once a layer (all threads), then each thread
 * takes whole blocks of queries of any head, start to end, its buffers
 * its own, and oneDNN's GEMM single-threaded inside.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "attn-u8.h"
#include "bytes-avx2.h"
#include "err.h"
#include "gemm-win.h"

#define QB	64	/* queries per block */
#define DH_MAX	128	/* channels per head this handles */

/* K and V rounded, for all the threads (in the scratch). */
struct kv8 {
	int8_t *k8, *v8;	/* [d][n] */
	float *sk;		/* [n_head][n] */
	int32_t *ksum;		/* [n_head][n] */
	float *sv;		/* [d] */
};

/* One thread's buffers for a block. */
struct block_bufs {
	uint8_t *q8;		/* [dh][QB] */
	int32_t *c;		/* [QB][n] q.k, then [QB][dh] p.v */
	float *sq, *szq;	/* [QB] */
	float *row;		/* [n] one query's scores */
	uint8_t *p8;		/* [QB][n] */
};

static size_t
shared_bytes(int d, int n, int n_head)
{
	/* K and V as bytes, then sk, ksum [n_head][n] (and 8 more, which
	 * query_probs reads past the last head's) and sv [d] */
	return 2 * align64((size_t)d * n) + 2 * align64(((size_t)n_head * n +
	    8) * 4) + align64((size_t)d * 4);
}

/* n rounded up to 8 for the rows of q.k and scores (query_probs) */
static size_t
block_bytes(int n)
{
	size_t np = ((size_t)n + 7) & ~(size_t)7;

	return align64((size_t)DH_MAX * QB) + align64(QB * np * 4) +
	    2 * align64(QB * 4) + align64(np * 4) + align64((size_t)QB * n);
}

size_t
attn_u8_bytes(int d, int n, int n_head, int threads)
{
	return shared_bytes(d, n, n_head) + (size_t)threads * block_bytes(n);
}

int
attn_u8_fits(int d, int n_head, int n)
{
	return d % n_head == 0 && d / n_head <= DH_MAX && n >= 8;
}

/* |v| of 8 floats */
V3 static inline __m256
abs8(__m256 v)
{
	return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* 127 / m per lane, 0 where m is 0 */
V3 static inline __m256
inv127(__m256 m)
{
	return _mm256_and_ps(_mm256_cmp_ps(m, _mm256_setzero_ps(),
	    _CMP_GT_OQ), _mm256_div_ps(_mm256_set1_ps(127.0f), m));
}

/* Row c of V rounded to -127..127 over its n keys (scale sv). */
V3 static void
round_v_row(const float *v, int n, int8_t *v8, float *sv)
{
	__m256 mx = _mm256_setzero_ps(), inv;
	float lanes[8], m = 0.0f;
	int j;

	for (j = 0; j + 8 <= n; j += 8)
		mx = _mm256_max_ps(mx, abs8(_mm256_loadu_ps(v + j)));
	_mm256_storeu_ps(lanes, mx);
	for (; j < n; j++)
		m = fabsf(v[j]) > m ? fabsf(v[j]) : m;
	for (j = 0; j < 8; j++)
		m = lanes[j] > m ? lanes[j] : m;
	*sv = m / 127.0f;
	inv = inv127(_mm256_set1_ps(m));
	for (j = 0; j + 8 <= n; j += 8) {
		uint64_t b = s8_of8(_mm256_cvtps_epi32(_mm256_mul_ps(
		    _mm256_loadu_ps(v + j), inv)));

		memcpy(v8 + j, &b, 8);
	}
	for (; j < n; j++)
		v8[j] = (int8_t)lrintf(v[j] * _mm256_cvtss_f32(inv));
}

/*
 * Keys [j, j + 8) of a head (dh rows of k, row stride ldk) rounded to
 * -127..127 over the channels: scale sk, sum of the bytes ksum. n - j
 * must be 8 or more (the last keys take the 8 that end at n).
 */
V3 static void
round_k8(const float *k, int ldk, int dh, int n, int j, int8_t *k8,
    float *sk, int32_t *ksum)
{
	__m256 mx = _mm256_setzero_ps(), inv;
	__m256i sum = _mm256_setzero_si256();
	int c;

	for (c = 0; c < dh; c++)
		mx = _mm256_max_ps(mx, abs8(_mm256_loadu_ps(k + (size_t)c *
		    ldk + j)));
	_mm256_storeu_ps(sk + j, _mm256_div_ps(mx, _mm256_set1_ps(127.0f)));
	inv = inv127(mx);
	for (c = 0; c < dh; c++) {
		__m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(
		    k + (size_t)c * ldk + j), inv));
		uint64_t b = s8_of8(q);

		sum = _mm256_add_epi32(sum, q);
		memcpy(k8 + (size_t)c * n + j, &b, 8);
	}
	_mm256_storeu_si256((__m256i *)(ksum + j), sum);
}

static struct block_bufs
block_bufs(void *scratch, int d, int n, int n_head)
{
	char *at = (char *)scratch + shared_bytes(d, n, n_head) +
	    (size_t)omp_get_thread_num() * block_bytes(n);
	struct block_bufs b;

	size_t np = ((size_t)n + 7) & ~(size_t)7;

	b.q8 = (uint8_t *)at;
	b.c = (int32_t *)(at += align64((size_t)DH_MAX * QB));
	b.sq = (float *)(at += align64(QB * np * 4));
	b.szq = (float *)(at += align64(QB * 4));
	b.row = (float *)(at += align64(QB * 4));
	b.p8 = (uint8_t *)(at + align64(np * 4));
	return b;
}

/*
 * 2^t for t <= 0 to about 1e-4 (a cubic on the fraction): enough for
 * probabilities rounded to steps of 1/127. Below -60 it gives 2^-60.
 */
V3 static inline __m256
exp2_fast(__m256 t)
{
	__m256 n, f, p;

	t = _mm256_max_ps(t, _mm256_set1_ps(-60.0f));
	n = _mm256_floor_ps(t);
	f = _mm256_sub_ps(t, n);
	p = _mm256_fmadd_ps(_mm256_set1_ps(0.07944023f), f,
	    _mm256_set1_ps(0.22606716f));
	p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.69583354f));
	p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.99992522f));
	return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p),
	    _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23)));
}

/*
 * One query's scores from the int32 q.k, in log2 units (s = sk (sq c -
 * sq zq ksum) log2(e) / sqrt(dh)), then exp(s - max) rounded to 0..127
 * into p8; returns the sum of exp(s - max) before the rounding (which
 * normalised by the rounded values' own sum cost tiny.en greedy two
 * words on the test files). c, sk, ksum and row are read up to n rounded
 * up to 8, the lanes past n ignored.
 */
V3 static float
query_probs(const int32_t *c, float sq, float szq, const float *sk,
    const int32_t *ksum, float scale, int n, float *row, uint8_t *p8)
{
	__m256 vsq = _mm256_set1_ps(sq * scale), vszq = _mm256_set1_ps(szq *
	    scale), mx = _mm256_set1_ps(-INFINITY), sum = _mm256_setzero_ps();
	float lanes[8], m = -INFINITY, total = 0.0f;
	int j;

	for (j = 0; j < n; j += 8) {
		__m256 t = _mm256_mul_ps(_mm256_fmsub_ps(vsq,
		    _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(c +
		    j))), _mm256_mul_ps(vszq, _mm256_cvtepi32_ps(
		    _mm256_loadu_si256((const __m256i *)(ksum + j))))),
		    _mm256_loadu_ps(sk + j));

		if (n - j < 8)	/* past n: no probability */
			t = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), t,
			    lanes8_ps(n - j));
		_mm256_storeu_ps(row + j, t);
		mx = _mm256_max_ps(mx, t);
	}
	_mm256_storeu_ps(lanes, mx);
	for (j = 0; j < 8; j++)
		m = lanes[j] > m ? lanes[j] : m;
	mx = _mm256_set1_ps(m);
	for (j = 0; j < n; j += 8) {
		__m256 e = exp2_fast(_mm256_sub_ps(_mm256_loadu_ps(row + j),
		    mx));
		__m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(e,
		    _mm256_set1_ps(127.0f)));
		uint64_t b = u8_of8(q);

		if (n - j < 8)
			e = _mm256_and_ps(e, lanes8_ps(n - j));
		sum = _mm256_add_ps(sum, e);
		memcpy(p8 + j, &b, n - j < 8 ? (size_t)(n - j) : 8);
	}
	_mm256_storeu_ps(lanes, sum);
	for (j = 0; j < 8; j++)
		total += lanes[j];
	return total;
}

/* Queries [q0, q0 + nq) of head h, in this thread. */
static int
block_run(const struct attn_u8 *a, const struct kv8 *kv, int h, int q0,
    int nq, const struct block_bufs *b)
{
	const int32_t zero = 0;
	int dh = a->d / a->n_head, n = a->n, np = (n + 7) & ~7, i, c;
	const int8_t *k8 = kv->k8 + (size_t)h * dh * n;
	const int8_t *v8 = kv->v8 + (size_t)h * dh * n;
	const float *sk = kv->sk + (size_t)h * n;
	const int32_t *ksum = kv->ksum + (size_t)h * n;
	float inv[QB], scale = (float)M_LOG2E / sqrtf((float)dh);

	for (i = 0; i < nq; i += 8)
		u8_round_cols(a->qkv + (size_t)h * dh * a->ld + q0, a->ld, dh,
		    nq, i, nq - i < 8 ? nq - i : 8, b->q8, b->sq, b->szq);
	if (dnnl_gemm_u8s8s32('T', 'N', 'F', nq, n, dh, 1.0f, b->q8, nq, 0,
	    k8, n, 0, 0.0f, b->c, np, &zero) != dnnl_success)
		return -1;
	for (i = 0; i < nq; i++)
		inv[i] = 1.0f / (127.0f * query_probs(b->c + (size_t)i * np,
		    b->sq[i], b->szq[i], sk, ksum, scale, n, b->row,
		    b->p8 + (size_t)i * n));
	if (dnnl_gemm_u8s8s32('N', 'T', 'F', nq, dh, n, 1.0f, b->p8, n, 0,
	    v8, n, 0, 0.0f, b->c, dh, &zero) != dnnl_success)
		return -1;
	for (c = 0; c < dh; c++) {
		float *out = a->out + ((size_t)h * dh + c) * a->ldo + q0;
		float sv = kv->sv[h * dh + c];

		for (i = 0; i < nq; i++)
			out[i] = (float)b->c[(size_t)i * dh + c] * sv * inv[i];
	}
	return 0;
}

/*
 * K and V of every head rounded: V's rows, then K's keys 64 at a time
 * (n is at least 8).
 */
static void
round_kv(const struct attn_u8 *a, const struct kv8 *kv)
{
	int d = a->d, n = a->n, dh = d / a->n_head, chunks = (n + 63) / 64;
	int t;

#pragma omp parallel for schedule(static) num_threads(a->threads)
	for (t = 0; t < d + a->n_head * chunks; t++) {
		int h = (t - d) / chunks, j = (t - d) % chunks * 64, j1;

		if (t < d) {
			round_v_row(a->qkv + ((size_t)2 * d + t) * a->ld, n,
			    kv->v8 + (size_t)t * n, kv->sv + t);
			continue;
		}
		for (j1 = j + 64 < n ? j + 64 : n; j < j1; j += 8)
			round_k8(a->qkv + ((size_t)d + h * dh) * a->ld, a->ld,
			    dh, n, j + 8 <= n ? j : n - 8, kv->k8 + (size_t)h *
			    dh * n, kv->sk + (size_t)h * n, kv->ksum +
			    (size_t)h * n);
	}
}

int
attn_u8_run(const struct attn_u8 *a, void *scratch, char *err)
{
	int d = a->d, n = a->n, n_head = a->n_head;
	int blocks = (n + QB - 1) / QB, tasks = n_head * blocks, t, bad = 0;
	char *at = scratch;
	struct kv8 kv;

	kv.k8 = (int8_t *)at;
	kv.v8 = (int8_t *)(at += align64((size_t)d * n));
	kv.sk = (float *)(at += align64((size_t)d * n));
	kv.ksum = (int32_t *)(at += align64(((size_t)n_head * n + 8) * 4));
	kv.sv = (float *)(at + align64(((size_t)n_head * n + 8) * 4));
	round_kv(a, &kv);
#pragma omp parallel for schedule(static) num_threads(a->threads) \
    reduction(|:bad)
	for (t = 0; t < tasks; t++) {
		struct block_bufs b = block_bufs(scratch, d, n, n_head);
		int q0 = t % blocks * QB;

		bad |= block_run(a, &kv, t / blocks, q0, n - q0 < QB ? n - q0 :
		    QB, &b) != 0;
	}
	return bad ? err_set(err, SOTTO_ECOMPUTE, "oneDNN gemm_u8s8s32 "
	    "failed in the encoder's attention") : 0;
}

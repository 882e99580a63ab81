/*
 * Window products Y[M][N] = W[M][K] X[K][N] + b from int8 weights by
 * oneDNN's u8 x s8 GEMM: precision int8's encoder on CPUs without
 * AVX512-VNNI (its out, fc1 and fc2 products; q/k/v stay fp32). On a
 * Zen 3 core that GEMM ran tiny.en's window products 1.5-2.1x faster than
 * sgemm (docs/benchmarks.md, 2026-11-28 10:50).
 *
 * Without VNNI the byte products are summed in pairs into 16 bits
 * (vpmaddubsw), which saturates past 32767: 255 x 127 twice does. So
 * the positions keep 7 bits: each position (column of X) is rounded to
 * 0..127 between its own minimum and maximum (zero point zp, scale sx),
 * and a pair of products stays within 2 x 127 x 127. W: each row
 * rounded to -127..127 with one scale sw = max |w| / 127, and its sum
 * kept. Then, exactly in int32 (|C| <= 127 * 127 * K),
 *
 *   y = sw sx (sum q_x q_w - zp sum q_w) + b
 *
 * On the 15 test files that rounding of these three products kept
 * tiny.en's and base's WER, greedy and beam 5 (docs/architecture.md,
 * "Numerics"); rounding q/k/v too cost tiny.en greedy a word.
 *
 * oneDNN's GEMM is row-major with the unsigned operand first, so it
 * gives Y transposed (C[N][M]); the last pass turns it back while it
 * scales.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "bytes-avx2.h"
#include "err.h"
#include "gemm-win.h"
#include "layers.h"

#define QMAX	127.0f
#define NC	64	/* positions per chunk (u8_gemm_run) */

V3 void
u8_gemm_pack(const uint16_t *f16, int rows, int k, int row0, int8_t *w,
    float *scale, int32_t *rowsum)
{
	int r;

#pragma omp parallel for schedule(static) if (rows >= 64)
	for (r = 0; r < rows; r++) {
		const uint16_t *src = f16 + (size_t)r * k;
		int8_t *dst = w + (size_t)(row0 + r) * k;
		float mx = 0.0f, inv;
		int32_t sum = 0;
		int c;

		for (c = 0; c < k; c++)
			mx = fmaxf(mx, fabsf(_cvtsh_ss(src[c])));
		scale[row0 + r] = mx / QMAX;
		inv = mx > 0.0f ? QMAX / mx : 0.0f;
		for (c = 0; c < k; c++) {
			dst[c] = (int8_t)lrintf(_cvtsh_ss(src[c]) * inv);
			sum += dst[c];
		}
		rowsum[row0 + r] = sum;
	}
}

/*
 * 8 floats, or lanes [0, nj) of them through a masked load (lanes8):
 * masked stores are slow on AMD cores, and the loads slower than plain
 * ones, so whole groups of 8 do without.
 */
V3 static inline __m256
load8(const float *x, int nj, __m256i lanes)
{
	return nj == 8 ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, lanes);
}

/*
 * Positions [j0, j0 + nj) (nj <= 8) of X into bytes, the same [k][n]
 * layout (oneDNN reads it transposed). Each position's range over the
 * k rows always holds 0 (lanes past nj load as 0), so that zp is in
 * 0..127; sx and sx * zp go to sx[], szp[].
 */
V3 void
u8_round_cols(const float *x, int ldx, int k, int n, int j0, int nj,
    uint8_t *xq, float *sx, float *szp)
{
	__m256i lanes = lanes8(nj);
	__m256 mn = _mm256_setzero_ps(), mx = mn, span, inv, zp;
	float s[8], sz[8];
	int r;

	for (r = 0; r < k; r++) {
		__m256 v = load8(x + (size_t)r * ldx + j0, nj, lanes);

		mn = _mm256_min_ps(mn, v);
		mx = _mm256_max_ps(mx, v);
	}
	span = _mm256_sub_ps(mx, mn);
	inv = _mm256_and_ps(_mm256_cmp_ps(span, _mm256_setzero_ps(),
	    _CMP_GT_OQ), _mm256_div_ps(_mm256_set1_ps(QMAX), span));
	zp = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(),
	    mn), inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	_mm256_storeu_ps(s, _mm256_div_ps(span, _mm256_set1_ps(QMAX)));
	_mm256_storeu_ps(sz, _mm256_mul_ps(_mm256_loadu_ps(s), zp));
	memcpy(sx + j0, s, nj * sizeof(float));
	memcpy(szp + j0, sz, nj * sizeof(float));
	for (r = 0; r < k; r++) {
		__m256 v = load8(x + (size_t)r * ldx + j0, nj, lanes);
		__m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(
		    _mm256_fmadd_ps(v, inv, zp), _mm256_setzero_ps()),
		    _mm256_set1_ps(QMAX)));
		uint64_t b = u8_of8(q);

		if (nj == 8)
			memcpy(xq + (size_t)r * n + j0, &b, 8);
		else
			memcpy(xq + (size_t)r * n + j0, &b, nj);
	}
}

/* 8 vectors of 8 transposed in place. */
V3 static inline void
transpose8(__m256 *v)
{
	__m256 a[8], b[8];
	int i;

	for (i = 0; i < 4; i++) {
		a[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
		a[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
	}
	for (i = 0; i < 2; i++) {
		b[4 * i] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0x44);
		b[4 * i + 1] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], 0xee);
		b[4 * i + 2] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3],
		    0x44);
		b[4 * i + 3] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3],
		    0xee);
	}
	for (i = 0; i < 4; i++) {
		v[i] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x20);
		v[i + 4] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x31);
	}
}

/*
 * Rows [i0, i0 + 8) of Y at positions [j0, j0 + nj) from C [n][m]:
 * y = sw (sx c - sx zp rowsum) + b, added to y with WIN_ACCUMULATE.
 */
V3 static void
finish8x8(const struct i8_win *p, const int32_t *c, const float *sx,
    const float *szp, int i0, int j0, int nj)
{
	__m256i lanes = lanes8(nj);
	__m256 v[8], vsx, vszp;
	int i, j;

	for (j = 0; j < 8; j++)
		v[j] = j < nj ? _mm256_cvtepi32_ps(_mm256_loadu_si256(
		    (const __m256i *)(c + (size_t)(j0 + j) * p->m + i0))) :
		    _mm256_setzero_ps();
	transpose8(v);
	vsx = load8(sx + j0, nj, lanes);
	vszp = load8(szp + j0, nj, lanes);
	for (i = 0; i < 8; i++) {
		float *y = p->y + (size_t)(i0 + i) * p->ldy + j0;
		__m256 t = _mm256_fnmadd_ps(vszp, _mm256_set1_ps(
		    (float)p->rowsum[i0 + i]), _mm256_mul_ps(vsx, v[i]));

		t = _mm256_fmadd_ps(t, _mm256_set1_ps(p->scale[i0 + i]),
		    _mm256_set1_ps(p->bias != NULL ? p->bias[i0 + i] : 0.0f));
		if (p->flags & WIN_ACCUMULATE)
			t = _mm256_add_ps(t, load8(y, nj, lanes));
		if (nj == 8)
			_mm256_storeu_ps(y, t);
		else
			_mm256_maskstore_ps(y, lanes, t);
	}
}

/* One thread's buffers for a chunk of NC positions (u8_scratch_bytes). */
struct u8_bufs {
	uint8_t *xq;		/* [k][NC] */
	int32_t *c;		/* [NC][m] */
	float *sx, *szp;	/* [NC] */
	float *hidden;		/* [m1][NC]: the MLP's hidden layer */
};

static size_t
thread_bytes(int m, int k, int hidden)
{
	return align64((size_t)k * NC) + align64((size_t)NC * m * 4) +
	    2 * align64(NC * sizeof(float)) +
	    align64((size_t)hidden * NC * sizeof(float));
}

size_t
u8_scratch_bytes(int m, int k, int hidden)
{
	return (size_t)omp_get_max_threads() * thread_bytes(m, k, hidden);
}

static struct u8_bufs
thread_bufs(void *scratch, int m, int k, int hidden)
{
	char *at = (char *)scratch + (size_t)omp_get_thread_num() *
	    thread_bytes(m, k, hidden);
	struct u8_bufs b;

	b.xq = (uint8_t *)at;
	b.c = (int32_t *)(at += align64((size_t)k * NC));
	b.sx = (float *)(at += align64((size_t)NC * m * 4));
	b.szp = (float *)(at += align64(NC * sizeof(float)));
	b.hidden = (float *)(at + align64(NC * sizeof(float)));
	return b;
}

/*
 * p over its n positions (n <= NC), in this thread: X to bytes, oneDNN's
 * GEMM (single-threaded here, as called inside a parallel region), then
 * Y back in place, scaled.
 */
static int
chunk_run(const struct i8_win *p, const struct u8_bufs *b)
{
	const int32_t zero = 0;
	int j, i;

	for (j = 0; j < p->n; j += 8)
		u8_round_cols(p->x, p->ldx, p->k, p->n, j, p->n - j < 8 ?
		    p->n - j : 8, b->xq, b->sx, b->szp);
	if (dnnl_gemm_u8s8s32('T', 'T', 'F', p->n, p->m, p->k, 1.0f, b->xq,
	    p->n, 0, (const int8_t *)p->w, p->k, 0, 0.0f, b->c, p->m,
	    &zero) != dnnl_success)
		return -1;
	for (i = 0; i < p->m; i += 8)
		for (j = 0; j < p->n; j += 8)
			finish8x8(p, b->c, b->sx, b->szp, i, j, p->n - j < 8 ?
			    p->n - j : 8);
	if (p->flags & WIN_GELU)
		layer_gelu(p->y, p->m, p->n, p->ldy);
	return 0;
}

/* p restricted to positions [j0, j0 + NC); x or y NULL (the MLP's hidden
 * layer, set per thread) stays NULL. */
static struct i8_win
chunk_of(const struct i8_win *p, int j0)
{
	struct i8_win c = *p;

	c.x = p->x != NULL ? p->x + j0 : NULL;
	c.y = p->y != NULL ? p->y + j0 : NULL;
	c.n = p->n - j0 < NC ? p->n - j0 : NC;
	return c;
}

static int
failed(char *err)
{
	return err_set(err, SOTTO_ECOMPUTE, "oneDNN gemm_u8s8s32 failed");
}

/*
 * The positions are cut into chunks of NC, each run start to end by one
 * thread, so that its bytes, oneDNN's int32 results and (in the MLP) the
 * hidden layer stay in that core's cache.
 */
int
u8_gemm_run(const struct i8_win *p, void *scratch, char *err)
{
	int chunks = (p->n + NC - 1) / NC, bad = 0, ci;

#pragma omp parallel for schedule(static) reduction(|:bad)
	for (ci = 0; ci < chunks; ci++) {
		struct u8_bufs b = thread_bufs(scratch, p->m, p->k, 0);
		struct i8_win c = chunk_of(p, ci * NC);

		bad |= chunk_run(&c, &b) != 0;
	}
	return bad ? failed(err) : 0;
}

int
u8_mlp_run(const struct i8_win *fc1, const struct i8_win *fc2, void *scratch,
    char *err)
{
	int chunks = (fc1->n + NC - 1) / NC, bad = 0, ci;
	int m = fc1->m > fc2->m ? fc1->m : fc2->m;
	int k = fc1->k > fc2->k ? fc1->k : fc2->k;

#pragma omp parallel for schedule(static) reduction(|:bad)
	for (ci = 0; ci < chunks; ci++) {
		struct u8_bufs b = thread_bufs(scratch, m, k, fc1->m);
		struct i8_win c1 = chunk_of(fc1, ci * NC);
		struct i8_win c2 = chunk_of(fc2, ci * NC);

		c1.y = b.hidden;
		c1.ldy = NC;
		c2.x = b.hidden;
		c2.ldx = NC;
		bad |= chunk_run(&c1, &b) != 0 || chunk_run(&c2, &b) != 0;
	}
	return bad ? failed(err) : 0;
}

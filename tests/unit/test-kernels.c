/*
 * Unit tests for the hand-written decoder kernels (lib/kernels/gemv.c,
 * gemv-f16.c, gemv-i8.c, logits.c, the bf16 cache attention of layers.c) against naive double-precision references on
 * the same bf16-rounded inputs, over shapes that hit their edges: rows
 * and columns that are not whole blocks, k padded to 32, accumulation,
 * GELU, a prompt's worth of columns. The AMX cases are skipped (and
 * reported as skipped) on a CPU or kernel without AMX.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "gemv.h"
#include "layers.h"
#include "logits.h"

#include "kernel-data.h"

static int have_amx, have_bf16, have_i8, have_vnni;

#define NO_BF16	"no AVX512-BF16 here (or ONEDNN_MAX_CPU_ISA): precision " \
	"bf16 is refused; test_gemv_f16 checks the products of the fp32 path"
#define NO_AMX	"no AMX here (or ONEDNN_MAX_CPU_ISA): test_gemv_dot checks " \
	"the same products on AVX512-BF16, test_gemv_f16 on fp32"

static void
check_gemv(int rows, int k, int n, int amx, int accumulate)
{
	float *w = frand_array((size_t)rows * k, 0.5f);
	float *x = frand_array((size_t)k * n, 1.0f);
	float *y = frand_array((size_t)rows * n, 1.0f);
	float *y0 = malloc((size_t)rows * n * sizeof(float));
	uint16_t *wp = pack(w, rows, k);
	uint16_t *scratch = aligned_alloc(64, GEMV_SCRATCH_BYTES(k));
	struct gemv_args a = { 0 };
	int m, j;

	assert_non_null(y0);
	memcpy(y0, y, (size_t)rows * n * sizeof(float));
	a.wp = wp;
	a.rows = rows;
	a.k = k;
	a.x = x;
	a.ldx = n;
	a.n = n;
	a.y = y;
	a.ym = 1;		/* y[j][m]: the logits layout */
	a.yj = rows;
	a.accumulate = accumulate;
	a.amx = amx;
	gemv_bf16(&a, scratch);
	for (m = 0; m < rows; m++)
		for (j = 0; j < n; j++) {
			double want = dot_ref(w, k, m, x, n, j) +
			    (accumulate ? y0[(size_t)j * rows + m] : 0.0);

			assert_float_equal(y[(size_t)j * rows + m], want,
			    1e-3 * (1.0 + fabs(want)));
		}
	free(w);
	free(x);
	free(y);
	free(y0);
	free(wp);
	free(scratch);
}

static void
test_gemv_dot(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_bf16, NO_BF16);
	/* every column instance (1, 2, 3, 4, 5, 8; 5 and 3 leave the last
	 * rows of a block to a short pass), whole and partial blocks */
	check_gemv(37, 64, 1, 0, 0);
	check_gemv(37, 96, 5, 0, 1);
	check_gemv(50, 64, 8, 0, 0);
	check_gemv(48, 64, 3, 0, 1);
	check_gemv(33, 32, 2, 0, 0);
	check_gemv(64, 96, 4, 0, 0);
	check_gemv(45, 64, 6, 0, 1);
	check_gemv(21, 32, 19, 0, 0);	/* more columns than one pass */
}

static void
test_gemv_amx(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_amx, NO_AMX);
	check_gemv(37, 64, 1, 1, 0);
	check_gemv(37, 96, 5, 1, 1);
	check_gemv(64, 384, 16, 1, 0);
	check_gemv(21, 32, 40, 1, 0);	/* a prompt: three column blocks */
}

/*
 * gemv-i8.c against i8_check's references, the columns rounded to 16 bits
 * (32639 steps). Also the weights made bf16 again (gemv_i8_unpack)
 * through gemv_bf16.
 */
static void
check_gemv_i8(int rows, int k, int n, int accumulate, int logits_layout)
{
	float *x = frand_array((size_t)k * n, 1.0f);
	float *y = frand_array((size_t)rows * n, 1.0f);
	float *y0 = malloc((size_t)rows * n * sizeof(float));
	uint8_t *wp = aligned_alloc(64, gemv_i8_bytes(rows, k));
	float *scale = malloc((size_t)rows * sizeof(float));
	void *scratch = aligned_alloc(64, GEMV_I8_SCRATCH_BYTES(k));
	uint16_t *w = i8_data(rows, k, x, n);
	struct gemv_i8_args a = { .wp = wp, .scale = scale, .rows = rows,
	    .k = k, .x = x, .ldx = n, .n = n, .y = y,
	    .ym = logits_layout ? 1 : n, .yj = logits_layout ? rows : 1,
	    .accumulate = accumulate };
	int m, j, kk;

	assert_true(y0 != NULL && wp != NULL && scale != NULL);
	memcpy(y0, y, (size_t)rows * n * sizeof(float));
	gemv_i8_pack(w, rows, k, 0, wp, scale, NULL);
	gemv_i8(&a, scratch);
	i8_check(&a, w, y0, 32639.0);

	/* bf16 again: gemv_pack's layout */
	{
		uint16_t *bp = aligned_alloc(64, gemv_packed_elems(rows, k) *
		    2);
		uint16_t *bs = aligned_alloc(64, GEMV_SCRATCH_BYTES(k));
		struct gemv_args b = { 0 };

		gemv_i8_unpack(wp, scale, rows, k, bp);
		b.wp = bp;
		b.rows = rows;
		b.k = k;
		b.x = x;
		b.ldx = n;
		b.n = n;
		b.y = y;
		b.ym = 1;
		b.yj = rows;
		gemv_bf16(&b, bs);
		for (m = 0; m < rows; m++)
			for (j = 0; j < n; j++) {
				double want = 0.0, s = scale[m];

				for (kk = 0; kk < k; kk++) {
					double q = s > 0.0 ? rint((float)f16d(
					    w[(size_t)m * k + kk]) * (127.0f /
					    (float)(s * 127.0))) : 0.0;

					want += bf(q * s) * bf(x[(size_t)kk *
					    n + j]);
				}
				assert_float_equal(y[(size_t)j * rows + m], want,
				    1e-3 * (1.0 + fabs(want)));
			}
		free(bp);
		free(bs);
	}
	free(w);
	free(x);
	free(y);
	free(y0);
	free(wp);
	free(scale);
	free(scratch);
}

static void
test_gemv_i8(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_i8, "no AVX512-VNNI and -BF16 here (or "
	    "ONEDNN_MAX_CPU_ISA): precision int8 is refused; test_gemv_dot "
	    "and test_gemv_f16 check the products of bf16 and fp32");
	/* every column instance (1, 2, 3, 4, 5, 8), two passes (11) */
	check_gemv_i8(64, 64, 1, 0, 0);
	check_gemv_i8(128, 128, 2, 1, 0);
	check_gemv_i8(64, 192, 3, 0, 1);
	check_gemv_i8(192, 64, 4, 1, 1);
	check_gemv_i8(64, 128, 5, 0, 0);
	check_gemv_i8(64, 64, 7, 1, 0);
	check_gemv_i8(128, 64, 11, 0, 1);
	check_gemv_i8(256, 320, 1, 1, 0);	/* shared among the threads */
}

/*
 * Rows of V x D f16 weights, every column but channel 5 small and random,
 * channel 5 large with a spread of its own (as in Whisper's token
 * embedding), and channel 9 offset by a constant.
 */
static uint16_t *
head_weights(int v, int d)
{
	uint16_t *w = malloc((size_t)v * d * 2);
	int i, c;

	for (i = 0; i < v; i++)
		for (c = 0; c < d; c++) {
			float e = frand() * 0.02f;

			if (c == 5)
				e = 0.3f + frand() * 0.1f;
			else if (c == 9)
				e += 0.05f;
			w[(size_t)i * d + c] = to_f16(e);
		}
	return w;
}

/*
 * The head of kernel run on columns j .. j + n - 1 of x [D][N] alone into
 * out (rows V apart).
 */
static void
run_cols(const struct logits_head *lh, const float *x, int N, int j, int n,
    int D, float *out, int8_t *scratch)
{
	float *xs = malloc((size_t)D * n * sizeof(float));
	char err[SOTTO_ERR_MAX];
	int c, i;

	assert_non_null(xs);
	for (c = 0; c < D; c++)
		for (i = 0; i < n; i++)
			xs[(size_t)c * n + i] = x[(size_t)c * N + j + i];
	assert_int_equal(logits_head_run(lh, xs, n, n, out, scratch, err), 0);
	free(xs);
}

/*
 * n columns (up to 5 a pass on either path: 1, 4, 5, 6 as 5 + 1, 7 as
 * 5 + 2, 16 as 5 + 5 + 5 + 1) against a vocabulary of 2001 (a
 * partial last block of 16 rows); each column alone gives the same
 * floats as among the others (a beam's words do not depend on its
 * company).
 */
static void
check_logits_head(enum logits_kernel kernel, int N)
{
	enum { V = 2001, D = 128 };
	uint16_t *w;
	float *x, *out;
	int8_t *scratch;
	struct logits_head *lh;
	char err[SOTTO_ERR_MAX];
	int i, j, c;

	w = head_weights(V, D);
	x = frand_array((size_t)D * N, 1.0f);
	out = malloc((size_t)N * V * sizeof(float));
	scratch = aligned_alloc(64, LOGITS_SCRATCH(D));
	assert_int_equal(logits_head_new(w, V, D, kernel, &lh, err), 0);
	assert_int_equal(logits_head_run(lh, x, N, N, out, scratch, err), 0);
	for (j = 0; j < N; j++) {
		double ref[V], mean = 0.0, spread = 0.0, e2 = 0.0;
		int exact = 0, above;
		float alone[V];

		run_cols(lh, x, N, j, 1, D, alone, scratch);
		assert_memory_equal(alone, out + (size_t)j * V, sizeof(alone));

		for (i = 0; i < V; i++) {
			_Float16 h;
			double s = 0.0;

			for (c = 0; c < D; c++) {
				memcpy(&h, &w[(size_t)i * D + c], 2);
				s += (double)h * x[(size_t)c * N + j];
			}
			ref[i] = s;
			mean += s / V;
			e2 += pow(out[(size_t)j * V + i] - s, 2) / V;
			if (fabs(out[(size_t)j * V + i] - s) < 1e-4)
				exact++;
		}
		for (i = 0; i < V; i++)
			spread += pow(ref[i] - mean, 2) / V;
		/* the estimates follow the logits' spread across the
		 * vocabulary to within a fifth of it, outlier channel and
		 * all */
		assert_true(sqrt(e2) < 0.2 * sqrt(spread));
		/* the top of each column is exact: the values at or above
		 * the 32nd largest are reproduced to f32 precision */
		for (i = 0; i < V; i++) {
			above = 0;
			for (c = 0; c < V; c++)
				above += ref[c] > ref[i];
			if (above < LOGITS_EXACT / 2)
				assert_float_equal(out[(size_t)j * V + i],
				    ref[i], 1e-4);
		}
		assert_true(exact >= LOGITS_EXACT - 8);
	}
	assert_int_not_equal(logits_head_run(lh, x, N, 17, out, scratch, err),
	    0);
	logits_head_free(lh);
	free(w);
	free(x);
	free(out);
	free(scratch);
}

static void
test_logits_head_amx(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_amx, NO_AMX);
	check_logits_head(LOGITS_AMX, 3);
}

static void
test_logits_head_vnni(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_vnni, "no AVX512-VNNI or no bf16 here (or "
	    "ONEDNN_MAX_CPU_ISA): the 4-bit head serves bf16 models only; fp32 "
	    "keeps the exact product of test_gemv_f16");
	check_logits_head(LOGITS_VNNI, 1);
	check_logits_head(LOGITS_VNNI, 5);
	check_logits_head(LOGITS_VNNI, 4);
	check_logits_head(LOGITS_VNNI, 6);
	check_logits_head(LOGITS_VNNI, 8);	/* 5 + 3 */
}

/* The int8 models' head on AVX2 (logits-avx2.c). */
static void
test_logits_head_avx2(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA below avx2)");
	check_logits_head(LOGITS_AVX2, 1);
	check_logits_head(LOGITS_AVX2, 7);
	check_logits_head(LOGITS_AVX2, 16);
}

/*
 * The AVX2 head is the VNNI head by other instructions: the same nibbles
 * and scales, the same integer sums, the same estimates to the bit. Only
 * each column's LOGITS_EXACT recomputed logits may differ, by the order
 * in which 8 or 16 lanes sum the f32 dot product (a few ulp).
 */
static void
test_logits_head_avx2_as_vnni(void **state)
{
	enum { V = 2001, D = 128, N = 6 };
	uint16_t *w;
	float *x, *a, *b;
	int8_t *scratch;
	struct logits_head *la, *lb;
	char err[SOTTO_ERR_MAX];

	(void)state;
	SKIP_WITHOUT(logits_head_vnni() && gemv_i8_avx2_supported(),
	    "no AVX512-VNNI here: test_logits_head_avx2 checks the AVX2 head "
	    "against exact products");
	w = head_weights(V, D);
	x = frand_array((size_t)D * N, 1.0f);
	a = malloc((size_t)N * V * sizeof(float));
	b = malloc((size_t)N * V * sizeof(float));
	scratch = aligned_alloc(64, LOGITS_SCRATCH(D));
	assert_int_equal(logits_head_new(w, V, D, LOGITS_AVX2, &la, err), 0);
	assert_int_equal(logits_head_new(w, V, D, LOGITS_VNNI, &lb, err), 0);
	run_cols(la, x, N, 0, N, D, a, scratch);
	run_cols(lb, x, N, 0, N, D, b, scratch);
	for (int j = 0; j < N; j++) {
		int differ = 0;

		for (int v = 0; v < V; v++) {
			float p = a[(size_t)j * V + v], q = b[(size_t)j * V + v];

			if (memcmp(&p, &q, sizeof(p)) == 0)
				continue;
			differ++;
			if (fabsf(p - q) > 1e-5f * fmaxf(1.0f, fabsf(q)))
				fail_msg("column %d logit %d: AVX2 %.9g, VNNI "
				    "%.9g", j, v, p, q);
		}
		assert_true(differ <= LOGITS_EXACT);
	}
	logits_head_free(la);
	logits_head_free(lb);
	free(w);
	free(x);
	free(a);
	free(b);
	free(scratch);
}

/*
 * The fp32 path's few-column products from F16 weights against a double
 * reference: one column, beams (5), more columns than a pass (11),
 * accumulation, and a width that is not a multiple of 32 (the plain
 * loop); without accumulation, each column also alone, which must give
 * the very same floats (a beam's words do not depend on its company).
 */
static void
check_gemv_f16(int rows, int k, int n, int accumulate)
{
	uint16_t *w = malloc((size_t)rows * k * 2);
	float *x = frand_array((size_t)k * n, 1.0f);
	float *y = frand_array((size_t)rows * n, 1.0f);
	float *y0 = malloc((size_t)rows * n * sizeof(float));
	float *scratch = malloc(GEMV_F16_SCRATCH(k) * sizeof(float));
	struct gemv_args a = { 0 };
	int m, j, kk;

	assert_non_null(w);
	assert_non_null(y0);
	assert_non_null(scratch);
	for (m = 0; m < rows * k; m++)
		w[m] = to_f16(frand() * 0.5f);
	memcpy(y0, y, (size_t)rows * n * sizeof(float));
	a.wp = w;
	a.rows = rows;
	a.k = k;
	a.x = x;
	a.ldx = n;
	a.n = n;
	a.y = y;
	a.ym = n;		/* y[m][j], as gemm_wx writes */
	a.yj = 1;
	a.accumulate = accumulate;
	gemv_f16(&a, scratch);
	for (m = 0; m < rows; m++)
		for (j = 0; j < n; j++) {
			double want = accumulate ? y0[(size_t)m * n + j] : 0.0;

			for (kk = 0; kk < k; kk++) {
				_Float16 h;

				memcpy(&h, &w[(size_t)m * k + kk], 2);
				want += (double)h * x[(size_t)kk * n + j];
			}
			assert_float_equal(y[(size_t)m * n + j], want,
			    1e-5 * (1.0 + fabs(want)));
		}
	/* a beam's column: the same floats alone as beside the others */
	for (j = 0; j < n && !accumulate; j++) {
		a.x = x + j;
		a.n = 1;
		a.y = y0 + j;
		gemv_f16(&a, scratch);
		for (m = 0; m < rows; m++)
			assert_memory_equal(&y0[(size_t)m * n + j],
			    &y[(size_t)m * n + j], sizeof(float));
	}
	free(w);
	free(x);
	free(y);
	free(y0);
	free(scratch);
}

static void
test_gemv_f16(void **state)
{
	(void)state;
	check_gemv_f16(37, 64, 1, 0);
	check_gemv_f16(300, 384, 1, 1);	/* shared among the threads */
	check_gemv_f16(21, 96, 5, 1);
	check_gemv_f16(19, 64, 11, 0);
	check_gemv_f16(23, 384, 5, 0);	/* beams: a whole pass (AVX-512) */
	check_gemv_f16(9, 64, 4, 0);	/* AVX2: rows in pairs, one alone */
	check_gemv_f16(17, 40, 3, 0);
	check_gemv_f16(16, 96, 2, 1);	/* AVX2: pairs only, accumulated */
}

/*
 * layer_attend_tm and layer_attend_tm_bf16 (token-major K and V, as the
 * decoder's self-attention caches hold them), against softmax(scale q.K)
 * V in double on the values each reads. The positions lie in two slots
 * (beams that share a history), each position in one of them and other
 * values in the other, which the kernel must not read.
 */
static void
check_attend_tm(int bf16)
{
	enum { DH = 64, N = 301, LDQ = 3, LDO = 2, SLOT = N * DH };
	float *q = frand_array((size_t)DH * LDQ, 1.0f);
	float *kf = frand_array((size_t)N * DH, 2.0f);
	float *vf = frand_array((size_t)N * DH, 1.0f);
	float *k2f = frand_array((size_t)2 * SLOT, 9.0f);
	float *v2f = frand_array((size_t)2 * SLOT, 9.0f);
	uint16_t *k = malloc((size_t)2 * SLOT * 2);
	uint16_t *v = malloc((size_t)2 * SLOT * 2);
	float out[DH * LDO], p[N], scale = 0.125f;
	int32_t slot[N];
	double s[N], sum;
	int c, t, i;

	assert_non_null(k);
	assert_non_null(v);
	for (t = 0; t < N; t++)
		slot[t] = t % 3 == 1 || t > 250;
	for (t = 0; t < N; t++)
		for (c = 0; c < DH; c++) {
			i = t * DH + c;
			if (bf16) {
				kf[i] = bf(kf[i]);
				vf[i] = bf(vf[i]);
			}
			k2f[slot[t] * SLOT + i] = kf[i];
			v2f[slot[t] * SLOT + i] = vf[i];
		}
	for (i = 0; i < 2 * SLOT; i++) {
		k[i] = to_bf16(k2f[i]);
		v[i] = to_bf16(v2f[i]);
	}
	if (bf16)
		layer_attend_tm_bf16(q, LDQ, k, v, slot, SLOT, N, DH, scale,
		    out, LDO, p);
	else
		layer_attend_tm(q, LDQ, k2f, v2f, slot, SLOT, N, DH, scale, out,
		    LDO, p);
	for (t = 0; t < N; t++) {
		s[t] = 0.0;
		for (c = 0; c < DH; c++)
			s[t] += (double)q[c * LDQ] * kf[t * DH + c];
		s[t] *= scale;
	}
	sum = softmax_ref(s, N);
	for (c = 0; c < DH; c++) {
		double want = 0.0;

		for (t = 0; t < N; t++)
			want += s[t] / sum * vf[t * DH + c];
		assert_float_equal(out[c * LDO], want, 1e-4);
	}
	free(q);
	free(kf);
	free(vf);
	free(k2f);
	free(v2f);
	free(k);
	free(v);
}

static void
test_attend_tm(void **state)
{
	(void)state;
	check_attend_tm(0);
	check_attend_tm(1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemv_dot),
		cmocka_unit_test(test_gemv_amx),
		cmocka_unit_test(test_logits_head_amx),
		cmocka_unit_test(test_logits_head_vnni),
		cmocka_unit_test(test_logits_head_avx2),
		cmocka_unit_test(test_logits_head_avx2_as_vnni),
		cmocka_unit_test(test_attend_tm),
		cmocka_unit_test(test_gemv_f16),
		cmocka_unit_test(test_gemv_i8),
	};

	have_bf16 = __builtin_cpu_supports("avx512bf16") &&
	    runs_isa(dnnl_cpu_isa_avx512_core_bf16);
	have_amx = have_bf16 && runs_isa(dnnl_cpu_isa_avx512_core_amx) &&
	    gemv_amx_init();
	have_i8 = have_bf16 && gemv_i8_supported();
	have_vnni = have_bf16 && logits_head_vnni();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

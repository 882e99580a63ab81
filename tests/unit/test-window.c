/*
 * Unit tests for the window kernels (lib/kernels/gemm-amx.c, gemm-dp.c,
 * gemm-i8.c, attn-amx.c, attn-dp.c) against naive double-precision references on
 * the same bf16-rounded inputs, over shapes that hit their edges: rows
 * and columns that are not whole blocks, k padded to 32, accumulation,
 * GELU, the fused MLP, one to forty queries. The AMX cases are skipped
 * (and reported as skipped) on a CPU or kernel without AMX, the others on
 * one without AVX512-BF16.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attn-win.h"
#include "err.h"
#include "gemm-win.h"
#include "gemv.h"

#include "kernel-data.h"

static int have_amx, have_bf16, have_i8;

#define FP32_WINDOW "fp32 windows go through oneDNN's matmul, which " \
	"tests/numerics/test_encoder.py::test_encoder_fp32 checks"
#define NO_BF16	"no AVX512-BF16 here (or ONEDNN_MAX_CPU_ISA): precision " \
	"bf16 is refused; " FP32_WINDOW
#define NO_AMX	"no AMX here (or ONEDNN_MAX_CPU_ISA): the dot-product " \
	"kernel's test checks the same on AVX512-BF16; " FP32_WINDOW

typedef void (*win_run_fn)(const struct win_gemm *, uint16_t *);

/* ld 0: rows of y with room for whole 32-column blocks, as AMX needs */
static void
check_win_gemm(win_run_fn run, int m, int k, int n, int flags,
    int with_bias, int ld)
{
	float *w = frand_array((size_t)m * k, 0.3f);
	float *x = frand_array((size_t)k * n, 1.0f);
	float *b = frand_array((size_t)m, 1.0f);
	float *y, *y0;
	uint16_t *wp = pack(w, m, k);
	uint16_t *scratch = aligned_alloc(64, win_scratch_bytes(m, k, n));
	struct win_gemm p = { 0 };
	int i, j;

	if (ld == 0)
		ld = (n + 31) / 32 * 32 + 16;
	y = frand_array((size_t)m * ld, 1.0f);
	y0 = malloc((size_t)m * ld * sizeof(float));

	assert_non_null(y0);
	assert_non_null(y);
	assert_true(win_gemm_fits(m, k, n, ld, run == amx_gemm_run));
	memcpy(y0, y, (size_t)m * ld * sizeof(float));
	p.w = wp;
	p.m = m;
	p.k = k;
	p.n = n;
	p.x = x;
	p.ldx = n;
	p.y = y;
	p.ldy = ld;
	p.bias = with_bias ? b : NULL;
	p.flags = flags;
	run(&p, scratch);
	if (flags & WIN_GELU_X)		/* the reference on gelu(x) */
		for (i = 0; i < k * n; i++)
			x[i] = (float)gelu_ref(x[i]);
	for (i = 0; i < m; i++)
		for (j = 0; j < n; j++) {
			double v = dot_ref(w, k, i, x, n, j) +
			    (with_bias ? b[i] : 0.0);

			if (flags & WIN_GELU)
				v = gelu_ref(v);
			if (flags & WIN_ACCUMULATE)
				v += y0[(size_t)i * ld + j];
			assert_float_equal(y[(size_t)i * ld + j], v,
			    2e-3 * (1.0 + fabs(v)));
		}
	/* the dot-product kernel leaves the columns past n alone */
	if (run == dp_gemm_run)
		for (i = 0; i < m; i++)
			assert_memory_equal(&y[(size_t)i * ld + n],
			    &y0[(size_t)i * ld + n], (size_t)(ld - n) * 4);
	free(w);
	free(x);
	free(b);
	free(y);
	free(y0);
	free(wp);
	free(scratch);
}

/*
 * The MLP with fc1's results written straight into fc2's input tiles
 * (y_packed, x_packed) against the same two products through an f32
 * hidden layer: the arithmetic is the same, so the results must be too.
 * fc1's rows (48) leave a half block and a padded k for fc2; the hidden
 * tiles start as NaN so any padding the fused path fails to zero shows.
 */
static void
check_mlp_fused(win_run_fn run, int m1, int k1, int m2, int n)
{
	int ld = (n + 31) / 32 * 32 + 16, i, j;
	size_t hidden_bytes = win_packed_bytes(m1, n);
	float *w1 = frand_array((size_t)m1 * k1, 0.3f);
	float *w2 = frand_array((size_t)m2 * m1, 0.3f);
	float *b1 = frand_array((size_t)m1, 1.0f);
	float *b2 = frand_array((size_t)m2, 1.0f);
	float *x = frand_array((size_t)k1 * n, 1.0f);
	float *h = frand_array((size_t)m1 * ld, 1.0f);
	float *ya = frand_array((size_t)m2 * ld, 1.0f);
	float *yb = malloc((size_t)m2 * ld * sizeof(float));
	uint16_t *hp = aligned_alloc(64, hidden_bytes);
	uint16_t *w1p = pack(w1, m1, k1), *w2p = pack(w2, m2, m1);
	size_t sb = win_scratch_bytes(m1, k1, n);
	uint16_t *scratch;
	struct win_gemm p = { 0 };

	if (win_scratch_bytes(m2, m1, n) > sb)
		sb = win_scratch_bytes(m2, m1, n);
	scratch = aligned_alloc(64, sb);
	assert_non_null(yb);
	assert_non_null(hp);
	assert_non_null(scratch);
	memcpy(yb, ya, (size_t)m2 * ld * sizeof(float));
	memset(hp, 0xff, hidden_bytes);		/* NaN */
	/* through f32: fc1, then fc2 on gelu(hidden), added to ya */
	p.w = w1p;
	p.m = m1;
	p.k = k1;
	p.n = n;
	p.x = x;
	p.ldx = n;
	p.y = h;
	p.ldy = ld;
	p.bias = b1;
	run(&p, scratch);
	p.w = w2p;
	p.m = m2;
	p.k = m1;
	p.x = h;
	p.ldx = ld;
	p.y = ya;
	p.bias = b2;
	p.flags = WIN_ACCUMULATE | WIN_GELU_X;
	run(&p, scratch);
	/* fused */
	memset(&p, 0, sizeof(p));
	p.w = w1p;
	p.m = m1;
	p.k = k1;
	p.n = n;
	p.x = x;
	p.ldx = n;
	p.bias = b1;
	p.flags = WIN_GELU;
	p.y_packed = hp;
	run(&p, scratch);
	/* padding rows (k of fc2) and columns hold zeros, as pack_x's */
	for (i = 0; i < (m1 + 31) / 32 * 32; i++)
		for (j = 0; j < (n + 31) / 32 * 32; j++)
			if (i >= m1 || j >= n)
				assert_int_equal(hp[(((size_t)(j / 16) *
				    ((m1 + 31) / 32) + i / 32) * 16 + i % 32 /
				    2) * 32 + j % 16 * 2 + i % 2], 0);
	memset(&p, 0, sizeof(p));
	p.w = w2p;
	p.m = m2;
	p.k = m1;
	p.n = n;
	p.x_packed = hp;
	p.y = yb;
	p.ldy = ld;
	p.bias = b2;
	p.flags = WIN_ACCUMULATE;
	run(&p, scratch);
	for (i = 0; i < m2; i++)
		for (j = 0; j < n; j++)
			assert_memory_equal(&ya[(size_t)i * ld + j],
			    &yb[(size_t)i * ld + j], sizeof(float));
	free(w1);
	free(w2);
	free(b1);
	free(b2);
	free(x);
	free(h);
	free(ya);
	free(yb);
	free(hp);
	free(w1p);
	free(w2p);
	free(scratch);
}

static void
test_amx_gemm(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_amx, NO_AMX);
	check_win_gemm(amx_gemm_run, 64, 64, 64, 0, 0, 0);
	check_win_gemm(amx_gemm_run, 48, 240, 100, WIN_GELU, 1, 0); /* 1x2 tail, k pad */
	check_win_gemm(amx_gemm_run, 32, 96, 33, WIN_ACCUMULATE, 1, 0);
	check_win_gemm(amx_gemm_run, 16, 32, 17, 0, 1, 0);
	check_win_gemm(amx_gemm_run, 64, 96, 70, WIN_GELU_X | WIN_ACCUMULATE,
	    1, 0);
	check_mlp_fused(amx_gemm_run, 48, 96, 32, 70);
	check_mlp_fused(amx_gemm_run, 128, 64, 64, 1500); /* a window */
}

/*
 * The dot-product kernel: blocks of 8 rows by 3 groups of 16 columns,
 * so rows that are not whole blocks (37), panels of 1 and 2 groups
 * (100 = 3 + 3 + 1 groups, 70 = 3 + 2), and a fused MLP whose hidden
 * rows (37, 40) leave padding rows and half pairs in its tiles.
 */
static void
test_dp_gemm(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_bf16, NO_BF16);
	check_win_gemm(dp_gemm_run, 64, 64, 64, 0, 0, 0);
	check_win_gemm(dp_gemm_run, 48, 240, 100, WIN_GELU, 1, 0);
	check_win_gemm(dp_gemm_run, 37, 96, 70, WIN_ACCUMULATE, 1, 0);
	check_win_gemm(dp_gemm_run, 16, 32, 17, 0, 1, 0);
	/* a decoder prompt: rows of y n apart, n not a multiple of 16 */
	check_win_gemm(dp_gemm_run, 48, 64, 37, 0, 0, 37);
	check_win_gemm(dp_gemm_run, 40, 96, 150, WIN_ACCUMULATE, 1, 150);
	check_win_gemm(dp_gemm_run, 64, 96, 33, WIN_GELU_X | WIN_ACCUMULATE,
	    1, 0);
	check_mlp_fused(dp_gemm_run, 48, 96, 32, 70);
	check_mlp_fused(dp_gemm_run, 37, 64, 32, 100);
	check_mlp_fused(dp_gemm_run, 40, 64, 24, 33);
	check_mlp_fused(dp_gemm_run, 128, 64, 64, 1500); /* a window */
}

/* Naive attention of query j of head h: out[c] for c < 64. */
static void
attn_ref(const float *q, int ldq, int j, const float *k, const float *v,
    int h, double *out)
{
	static double s[WHISPER_N_AUDIO_CTX];
	double max = -INFINITY, sum = 0.0;
	int t, c;

	for (t = 0; t < WHISPER_N_AUDIO_CTX; t++) {
		double d = 0.0;

		for (c = 0; c < 64; c++)
			d += bf(q[(size_t)(64 * h + c) * ldq + j] * 0.125f) *
			    bf(k[(size_t)(64 * h + c) * WHISPER_AUDIO_LD + t]);
		s[t] = d;
		max = fmax(max, d);
	}
	for (t = 0; t < WHISPER_N_AUDIO_CTX; t++)
		sum += s[t] = exp(s[t] - max);
	for (c = 0; c < 64; c++) {
		double o = 0.0;

		for (t = 0; t < WHISPER_N_AUDIO_CTX; t++)
			o += s[t] * bf(v[(size_t)(64 * h + c) *
			    WHISPER_AUDIO_LD + t]);
		out[c] = o / sum;
	}
}

/*
 * gemm-i8.c against a double reference on the same rounding: each row
 * of W to int8 (scale max |w| / 127), each position of X to 8 bits
 * (scale max |x| / 127, round to nearest); then bias, GELU or
 * accumulation. Tolerance: f32 summation only. And against the exact
 * product, loosely (the error of 8-bit columns and weights).
 */
static void
check_i8_gemm(int m, int k, int n, int flags, int with_bias)
{
	uint16_t *w16 = malloc((size_t)m * k * 2);
	float *x = frand_array((size_t)k * n, 1.0f);
	float *b = frand_array((size_t)m, 1.0f);
	float *y = frand_array((size_t)m * (n + 3), 1.0f);
	float *y0 = malloc((size_t)m * (n + 3) * sizeof(float));
	uint8_t *wp = aligned_alloc(64, gemv_i8_bytes(m, k));
	float *sw = malloc((size_t)m * sizeof(float));
	int32_t *rs = malloc((size_t)m * sizeof(int32_t));
	void *scratch = aligned_alloc(64, i8_win_scratch_bytes(k, n) + 64);
	double *sx = malloc((size_t)n * sizeof(double));
	struct i8_win p = { 0 };
	int ldy = n + 3, r, j, kk;

	assert_true(w16 && y0 && wp && sw && rs && scratch && sx);
	for (r = 0; r < m * k; r++)
		w16[r] = to_f16(frand() * 0.3f);
	for (kk = 0; kk < k; kk++)	/* an outlier channel */
		x[(size_t)kk * n] *= kk == 5 ? 8.0f : 1.0f;
	memcpy(y0, y, (size_t)m * ldy * sizeof(float));
	gemv_i8_pack(w16, m, k, 0, wp, sw, rs);
	p.w = wp;
	p.scale = sw;
	p.rowsum = rs;
	p.m = m;
	p.k = k;
	p.n = n;
	p.x = x;
	p.ldx = n;
	p.y = y;
	p.ldy = ldy;
	p.bias = with_bias ? b : NULL;
	p.flags = flags;
	i8_gemm_run(&p, scratch);
	for (j = 0; j < n; j++) {
		double mx = 0.0;

		for (kk = 0; kk < k; kk++)
			mx = fmax(mx, fabs(x[(size_t)kk * n + j]));
		sx[j] = (float)mx / 127.0f;
	}
	for (r = 0; r < m; r++)
		for (j = 0; j < ldy; j++) {
			double want = 0.0, exact = 0.0, mag = 0.0;
			double got = y[(size_t)r * ldy + j];

			if (j >= n) {	/* past n: untouched */
				assert_float_equal(got, y0[(size_t)r * ldy + j],
				    0.0);
				continue;
			}
			for (kk = 0; kk < k; kk++) {
				_Float16 h;
				double wv, qw, qx, xv = x[(size_t)kk * n + j];

				memcpy(&h, &w16[(size_t)r * k + kk], 2);
				wv = (double)h;
				qw = sw[r] > 0 ? rint((float)wv * (127.0f /
				    (sw[r] * 127.0f))) : 0.0;
				qx = sx[j] > 0 ? rint((float)xv * (127.0f /
				    (float)(sx[j] * 127.0))) : 0.0;
				want += qw * qx;
				exact += wv * xv;
				mag += fabs(wv * xv);
			}
			want *= sw[r] * sx[j];
			if (with_bias) {
				want += b[r];
				exact += b[r];
			}
			if (flags & WIN_GELU) {
				want = gelu_ref(want);
				exact = gelu_ref(exact);
			}
			if (flags & WIN_ACCUMULATE) {
				want += y0[(size_t)r * ldy + j];
				exact += y0[(size_t)r * ldy + j];
			}
			assert_float_equal(got, want, 2e-5 * (1.0 + mag +
			    fabs(want)));
			assert_float_equal(got, exact, 0.05 * (1.0 + mag));
		}
	free(w16);
	free(x);
	free(b);
	free(y);
	free(y0);
	free(wp);
	free(sw);
	free(rs);
	free(scratch);
	free(sx);
}

static void
test_i8_gemm(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_i8, "no AVX512-VNNI and -BF16 here (or "
	    "ONEDNN_MAX_CPU_ISA): precision int8 is refused; " FP32_WINDOW);
	/* 1, 2, 3 groups per block; n not a whole group; many blocks */
	check_i8_gemm(32, 64, 16, 0, 0);
	check_i8_gemm(64, 128, 33, WIN_GELU, 1);
	check_i8_gemm(96, 64, 50, WIN_ACCUMULATE, 1);
	check_i8_gemm(32, 256, 7, WIN_ACCUMULATE, 0);
	check_i8_gemm(128, 192, 100, 0, 1);
}

static void
check_attention(struct attn_win *a, int slot, const float *k,
    const float *v, int n)
{
	int d = 128, ld = n + 3, h, j, c;
	float *q = frand_array((size_t)d * ld, 2.0f);
	float *out = frand_array((size_t)d * ld, 1.0f);
	char err[SOTTO_ERR_MAX];
	double want[64];

	assert_int_equal(attn_win_query(a, slot, q, ld, n, out, ld, err), 0);
	for (h = 0; h < 2; h++)
		for (j = 0; j < n; j += n > 16 ? 7 : 1) {
			attn_ref(q, ld, j, k, v, h, want);
			for (c = 0; c < 64; c++)
				assert_float_equal(out[(size_t)(64 * h + c) *
				    ld + j], want[c], 2e-2 * (1.0 +
				    fabs(want[c])));
		}
	free(q);
	free(out);
}

/*
 * attn_win_query_keep(): head 1's scores of the first n_keys keys (the
 * scaled q . k before the softmax, as word timing reads them) are handed
 * out, head 0's are not, and the attention itself is the same as
 * without keeping.
 */
static void
check_keep(struct attn_win *a, int slot, const float *k, int n, int n_keys)
{
	int d = 128, j, t, c;
	float *q = frand_array((size_t)d * n, 2.0f);
	float *out = frand_array((size_t)d * n, 1.0f);
	float *out0 = frand_array((size_t)d * n, 1.0f);
	float *kept = malloc((size_t)n * n_keys * sizeof(float));
	const int8_t slots[2] = { -1, 0 };
	struct attn_keep keep = { slots, kept, n_keys };
	char err[SOTTO_ERR_MAX];

	assert_non_null(kept);
	assert_int_equal(attn_win_query(a, slot, q, n, n, out0, n, err), 0);
	assert_int_equal(attn_win_query_keep(a, slot, q, n, n, out, n, &keep,
	    err), 0);
	assert_memory_equal(out, out0, (size_t)d * n * sizeof(float));
	for (j = 0; j < n; j++)
		for (t = 0; t < n_keys; t++) {
			double want = 0.0;

			for (c = 0; c < 64; c++)
				want += bf(q[(size_t)(64 + c) * n + j] *
				    0.125f) * bf(k[(size_t)(64 + c) *
				    WHISPER_AUDIO_LD + t]);
			assert_float_equal(kept[(size_t)j * n_keys + t], want,
			    1e-4 * (1.0 + fabs(want)));
		}
	keep.n_keys = WHISPER_N_AUDIO_CTX + 1;
	assert_int_not_equal(attn_win_query_keep(a, slot, q, n, n, out, n,
	    &keep, err), 0);
	free(q);
	free(out);
	free(out0);
	free(kept);
}

/*
 * Both kernels on the same cases: 1 to 7 queries (a decoder step's
 * beams; the dot-product kernel has an instance per number), 13 (8 + 5
 * and 4 + 4 + 5), 40 (three query blocks), two slots.
 */
static void
check_attention_kernel(int amx)
{
	struct attn_win *a;
	char err[SOTTO_ERR_MAX];
	float *k, *v, *k2;
	size_t plane = (size_t)128 * WHISPER_AUDIO_LD;

	assert_int_equal(attn_win_new(128, 2, 2, 40, amx, &a, err), 0);
	k = frand_array(plane, 1.0f);
	v = frand_array(plane, 1.0f);
	k2 = frand_array(plane, 0.5f);
	assert_int_equal(attn_win_set_kv(a, 0, k, v, err), 0);
	assert_int_equal(attn_win_set_kv(a, 1, k2, v, err), 0);
	check_attention(a, 0, k, v, 1);
	check_attention(a, 0, k, v, 2);
	check_attention(a, 0, k, v, 5);
	check_attention(a, 0, k, v, 6);
	check_attention(a, 0, k, v, 7);
	check_attention(a, 0, k, v, 13);
	check_attention(a, 1, k2, v, 40);	/* three query blocks */
	check_attention(a, 0, k, v, 16);	/* slot 0 kept intact */
	check_keep(a, 1, k2, 40, 777);
	check_keep(a, 0, k, 3, WHISPER_N_AUDIO_CTX);
	assert_int_not_equal(attn_win_query(a, 2, k, 1, 1, v, 1, err), 0);
	assert_int_not_equal(attn_win_query(a, 0, k, 41, 41, v, 41, err), 0);
	attn_win_free(a);
	free(k);
	free(v);
	free(k2);
}

static void
test_attention_amx(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_amx, NO_AMX);
	check_attention_kernel(1);
}

static void
test_attention_dp(void **state)
{
	(void)state;
	SKIP_WITHOUT(have_bf16, NO_BF16);
	check_attention_kernel(0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_amx_gemm),
		cmocka_unit_test(test_dp_gemm),
		cmocka_unit_test(test_i8_gemm),
		cmocka_unit_test(test_attention_amx),
		cmocka_unit_test(test_attention_dp),
	};

	have_bf16 = __builtin_cpu_supports("avx512bf16") &&
	    runs_isa(dnnl_cpu_isa_avx512_core_bf16);
	have_amx = have_bf16 && runs_isa(dnnl_cpu_isa_avx512_core_amx) &&
	    gemv_amx_init();
	have_i8 = have_bf16 && gemv_i8_supported();
	if (!have_bf16) {
		/* every kernel here is bf16's (int8's too): meson's SKIP */
		printf("skipped: %s\n", NO_BF16);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for precision int8's window products without VNNI
 * (lib/kernels/gemm-u8.c): weights and positions chosen so that their
 * rounding is exact must give the exact product, at the extremes where
 * byte products summed in pairs into 16 bits would saturate; random
 * data within the rounding's error of the double-precision product,
 * over tails of positions, accumulation, bias and GELU; and the MLP
 * equal to its two products one after the other. meson runs it as it is
 * and with ONEDNN_MAX_CPU_ISA=AVX2, so that an AVX-512 machine runs
 * oneDNN's AVX2 GEMM too (the one that saturates).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gemm-win.h"

#include "kernel-data.h"

#define LD	1504	/* a row stride past n, as the engine's */

struct u8_case {
	int m, k, n;
	uint16_t *w;		/* [m][k] F16 */
	int8_t *wq;
	float *scale, *x, *y, *bias;
	int32_t *rowsum;
	void *scratch;
};

static void
case_new(struct u8_case *c, int m, int k, int n, int hidden)
{
	memset(c, 0, sizeof(*c));
	c->m = m;
	c->k = k;
	c->n = n;
	c->w = malloc((size_t)m * k * sizeof(uint16_t));
	c->wq = aligned_alloc(64, ((size_t)m * k + 63) / 64 * 64);
	c->scale = malloc((size_t)m * sizeof(float));
	c->rowsum = malloc((size_t)m * sizeof(int32_t));
	c->x = calloc((size_t)k * LD, sizeof(float));
	c->y = calloc((size_t)m * LD, sizeof(float));
	c->bias = malloc((size_t)m * sizeof(float));
	c->scratch = aligned_alloc(64, u8_scratch_bytes(m > k ? m : k,
	    m > k ? m : k, hidden));
	assert_true(c->w != NULL && c->wq != NULL && c->scale != NULL &&
	    c->rowsum != NULL && c->x != NULL && c->y != NULL &&
	    c->bias != NULL && c->scratch != NULL);
}

static void
case_free(struct u8_case *c)
{
	free(c->w);
	free(c->wq);
	free(c->scale);
	free(c->rowsum);
	free(c->x);
	free(c->y);
	free(c->bias);
	free(c->scratch);
}

static struct i8_win
win_of(const struct u8_case *c, int flags)
{
	struct i8_win p = { .w = (const uint8_t *)c->wq, .scale = c->scale,
	    .rowsum = c->rowsum, .m = c->m, .k = c->k, .n = c->n, .x = c->x,
	    .ldx = LD, .y = c->y, .ldy = LD, .bias = c->bias, .flags = flags };

	return p;
}

/* sum over k of w[i][r] x[r][j], and of their magnitudes, in double */
static double
exact(const struct u8_case *c, int i, int j, double *mag)
{
	double s = 0.0;
	int r;

	*mag = 0.0;
	for (r = 0; r < c->k; r++) {
		double t = f16d(c->w[(size_t)i * c->k + r]) *
		    c->x[(size_t)r * LD + j];

		s += t;
		*mag += fabs(t);
	}
	return s;
}

/*
 * Weights q_w / 1024 with a +-127 in each row, positions (q_x - zp) / 64
 * with a 0 and a 127 in each: both round to themselves. extreme: every
 * q_w 127 and every q_x 127 (bar the 0 each position needs), where the
 * pairs of byte products are largest.
 */
static void
fill_exact(struct u8_case *c, int extreme)
{
	int i, r, j;

	for (i = 0; i < c->m; i++)
		for (r = 0; r < c->k; r++) {
			int q = extreme || r == i % c->k ? 127 :
			    (int)(frand() * 127.0f);

			c->w[(size_t)i * c->k + r] = to_f16((float)q / 1024.0f);
		}
	for (j = 0; j < c->n; j++) {
		int zp = extreme ? 0 : j % 128;

		for (r = 0; r < c->k; r++) {
			int q = r == j % c->k ? 0 : r == (j + 1) % c->k ||
			    extreme ? 127 : (int)((frand() + 1.0f) * 63.5f);

			c->x[(size_t)r * LD + j] = (float)(q - zp) / 64.0f;
		}
	}
	for (i = 0; i < c->m; i++)
		c->bias[i] = 0.0f;
}

static void
check_exact(int m, int k, int n, int extreme)
{
	struct u8_case c;
	struct i8_win p;
	char err[256];
	int i, j;

	case_new(&c, m, k, n, 0);
	fill_exact(&c, extreme);
	u8_gemm_pack(c.w, m, k, 0, c.wq, c.scale, c.rowsum);
	p = win_of(&c, 0);
	assert_int_equal(u8_gemm_run(&p, c.scratch, err), 0);
	for (i = 0; i < m; i++) {
		double sumw = 0.0;
		int r;

		/* float rounding of y = sw (sx c - sx zp rowsum): the second
		 * term is up to 2 sum |w| here */
		for (r = 0; r < k; r++)
			sumw += fabs(f16d(c.w[(size_t)i * k + r]));
		for (j = 0; j < n; j++) {
			double mag, want = exact(&c, i, j, &mag);

			assert_float_equal(c.y[(size_t)i * LD + j], want,
			    2e-6 * (mag + 2.0 * sumw) + 1e-6);
		}
	}
	case_free(&c);
}

static void
test_u8_exact(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA): precision int8 is refused; "
	    "test-kernels checks the fp32 products");
	check_exact(64, 384, 200, 0);
	check_exact(8, 1536, 67, 0);	/* a long k; positions past 64 */
	check_exact(16, 384, 70, 1);	/* the largest pairs of products */
	check_exact(24, 1536, 9, 1);
}

/* y against the double product within the 7-bit positions' rounding */
static void
check_random(int m, int k, int n, int flags)
{
	struct u8_case c;
	struct i8_win p;
	float *y0;
	char err[256];
	double se = 0.0, ss = 0.0;
	int i, j, r;

	case_new(&c, m, k, n, 0);
	for (i = 0; i < m * k; i++)
		c.w[i] = to_f16(frand() * 0.1f);
	for (r = 0; r < k; r++)
		for (j = 0; j < n; j++)
			c.x[(size_t)r * LD + j] = frand() * (1.0f + j % 5) +
			    (j % 3 == 0 ? 0.5f : 0.0f);
	for (i = 0; i < m; i++) {
		c.bias[i] = frand();
		for (j = 0; j < LD; j++)
			c.y[(size_t)i * LD + j] = frand();
	}
	y0 = malloc((size_t)m * LD * sizeof(float));
	assert_non_null(y0);
	memcpy(y0, c.y, (size_t)m * LD * sizeof(float));
	u8_gemm_pack(c.w, m, k, 0, c.wq, c.scale, c.rowsum);
	p = win_of(&c, flags);
	assert_int_equal(u8_gemm_run(&p, c.scratch, err), 0);
	for (i = 0; i < m; i++) {
		for (j = 0; j < n; j++) {
			double mag, v = exact(&c, i, j, &mag) + c.bias[i];

			if (flags & WIN_GELU)
				v = gelu_ref(v);
			if (flags & WIN_ACCUMULATE)
				v += y0[(size_t)i * LD + j];
			/*
			 * The rounding's error is about a random walk of k
			 * steps of |w| x's span / 254: 1-2% of mag /
			 * sqrt(k) in rms, a few times that at most.
			 */
			assert_float_equal(c.y[(size_t)i * LD + j], v,
			    0.12 * mag / sqrt(k) + 1e-4);
			se += (c.y[(size_t)i * LD + j] - v) *
			    (c.y[(size_t)i * LD + j] - v);
			ss += mag * mag / k;
		}
		/* past n, untouched */
		for (j = n; j < LD; j++)
			assert_true(c.y[(size_t)i * LD + j] ==
			    y0[(size_t)i * LD + j]);
	}
	assert_true(se < 0.03 * 0.03 * ss);
	free(y0);
	case_free(&c);
}

static void
test_u8_random(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA)");
	check_random(64, 384, 1500, 0);		/* the window */
	check_random(40, 256, 131, WIN_ACCUMULATE);
	check_random(16, 512, 7, WIN_GELU);	/* less than one group */
}

/* u8_mlp_run gives what its two products give one after the other. */
static void
test_u8_mlp(void **state)
{
	const int d = 64, n = 333;
	struct u8_case c1, c2;
	struct i8_win p1, p2;
	float *y, *hidden;
	char err[256];
	int i, j;

	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA)");
	case_new(&c1, 4 * d, d, n, 4 * d);
	case_new(&c2, d, 4 * d, n, 4 * d);
	for (i = 0; i < 4 * d * d; i++) {
		c1.w[i] = to_f16(frand() * 0.2f);
		c2.w[i] = to_f16(frand() * 0.1f);
	}
	for (i = 0; i < d * LD; i++)
		c1.x[i] = frand();
	for (i = 0; i < 4 * d; i++)
		c1.bias[i] = frand() * 0.5f;
	for (i = 0; i < d; i++)
		c2.bias[i] = frand() * 0.5f;
	for (i = 0; i < d * LD; i++)
		c2.y[i] = frand();
	u8_gemm_pack(c1.w, 4 * d, d, 0, c1.wq, c1.scale, c1.rowsum);
	u8_gemm_pack(c2.w, d, 4 * d, 0, c2.wq, c2.scale, c2.rowsum);
	y = malloc((size_t)d * LD * sizeof(float));
	hidden = c1.y;
	assert_non_null(y);
	memcpy(y, c2.y, (size_t)d * LD * sizeof(float));
	/* one after the other: fc1 into c1.y, fc2 from it into c2.y */
	p1 = win_of(&c1, WIN_GELU);
	p2 = win_of(&c2, WIN_ACCUMULATE);
	p2.x = hidden;
	assert_int_equal(u8_gemm_run(&p1, c1.scratch, err), 0);
	assert_int_equal(u8_gemm_run(&p2, c2.scratch, err), 0);
	/* fused, into y */
	p2.y = y;
	assert_int_equal(u8_mlp_run(&p1, &p2, c1.scratch, err), 0);
	for (i = 0; i < d; i++)
		for (j = 0; j < LD; j++)
			assert_true(y[(size_t)i * LD + j] ==
			    c2.y[(size_t)i * LD + j]);
	free(y);
	case_free(&c1);
	case_free(&c2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u8_exact),
		cmocka_unit_test(test_u8_random),
		cmocka_unit_test(test_u8_mlp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

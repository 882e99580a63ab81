/*
 * Unit tests for lib/decode/align.c's pieces that need no model: the median
 * filter (against sorting every window) and the dynamic time warping
 * (against an exhaustive search of every monotone path).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "align.h"

static uint32_t rng = 12345;

static float
frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static int
float_cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* The median of x[c-3 .. c+3], reflecting at the ends (numpy 'reflect'). */
static float
median_ref(const float *x, int m, int c)
{
	float w[7];
	int i, at;

	for (i = 0; i < 7; i++) {
		at = c - 3 + i;
		if (at < 0)
			at = -at;
		if (at >= m)
			at = 2 * (m - 1) - at;
		w[i] = x[at];
	}
	qsort(w, 7, sizeof(float), float_cmp);
	return w[3];
}

static void
test_median(void **state)
{
	static const int sizes[] = { 4, 5, 7, 8, 31, 750, 1500 };
	float x[1500], out[1500];
	size_t k;
	int c;

	(void)state;
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int m = sizes[k];

		for (c = 0; c < m; c++)	/* with ties, as softmax rows have */
			x[c] = c % 5 == 0 ? 0.25f : frand();
		align_median7(x, m, out);
		for (c = 0; c < m; c++)
			if (out[c] != median_ref(x, m, c))
				fail_msg("width %d, column %d: %g, want %g", m,
				    c, out[c], median_ref(x, m, c));
	}
}

/*
 * The cheapest monotone path from (0, 0) to (n - 1, m - 1) in steps
 * right, down or diagonal, by trying all of them: its cost and the
 * first column of every row.
 */
static void
search(const float *x, int n, int m, int i, int j, double cost, int *first,
    double *best, int *best_first)
{
	int save = first[i];

	cost += x[i * m + j];
	if (first[i] < 0)
		first[i] = j;
	if (i == n - 1 && j == m - 1) {
		if (cost < *best) {
			*best = cost;
			memcpy(best_first, first, n * sizeof(int));
		}
	} else {
		if (i + 1 < n)
			search(x, n, m, i + 1, j, cost, first, best,
			    best_first);
		if (j + 1 < m)
			search(x, n, m, i, j + 1, cost, first, best,
			    best_first);
		if (i + 1 < n && j + 1 < m)
			search(x, n, m, i + 1, j + 1, cost, first, best,
			    best_first);
	}
	first[i] = save;
}

static void
test_dtw_exhaustive(void **state)
{
	float x[6 * 7];
	int first[6], want[6], seen[6], n, m, trial, i;
	double best;

	(void)state;
	for (trial = 0; trial < 200; trial++) {
		n = 1 + trial % 6;
		m = 1 + (trial / 6) % 7;
		for (i = 0; i < n * m; i++)
			x[i] = frand();
		for (i = 0; i < n; i++)
			seen[i] = -1;
		best = INFINITY;
		search(x, n, m, 0, 0, 0.0, seen, &best, want);
		assert_int_equal(align_dtw(x, n, m, first), 0);
		for (i = 0; i < n; i++)
			if (first[i] != want[i])
				fail_msg("%d x %d, trial %d: row %d starts at "
				    "%d, want %d", n, m, trial, i, first[i],
				    want[i]);
	}
}

/*
 * A similarity that is high along a staircase (what aligned speech
 * looks like: token i spoken over columns [10i, 10i + 10)) is followed:
 * each row starts where its stair does. (With exact ties openai's
 * loop prefers the step left, which this test stays clear of.)
 */
static void
test_dtw_staircase(void **state)
{
	enum { N = 12, M = 130 };
	static float x[N * M];
	int first[N], i, j;

	(void)state;
	for (i = 0; i < N; i++)
		for (j = 0; j < M; j++)
			x[i * M + j] = j / 10 == i ? -1.0f : 0.5f;
	assert_int_equal(align_dtw(x, N, M, first), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(first[i], 10 * i);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_median),
		cmocka_unit_test(test_dtw_exhaustive),
		cmocka_unit_test(test_dtw_staircase),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

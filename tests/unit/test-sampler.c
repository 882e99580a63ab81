/*
 * Unit tests for lib/decode/sampler.c's sampler_topk: against sorting
 * every index by value (larger first, ties to the lower index), on rows
 * with ties, -inf (suppressed tokens), a large value late in the row and
 * lengths that are no multiple of the 8 values it passes over at once.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sampler.h"

static uint32_t rng = 4242;

static uint32_t
next(void)
{
	rng = rng * 1664525u + 1013904223u;
	return rng >> 8;
}

static const float *ref_x;

static int
ref_cmp(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;

	if (ref_x[i] != ref_x[j])
		return ref_x[i] > ref_x[j] ? -1 : 1;
	return i - j;
}

static void
check_topk(const float *x, int n, int k)
{
	int *all = malloc((size_t)n * sizeof(int)), got[16], i;

	assert_non_null(all);
	for (i = 0; i < n; i++)
		all[i] = i;
	ref_x = x;
	qsort(all, n, sizeof(int), ref_cmp);
	sampler_topk(x, n, k, got);
	for (i = 0; i < k; i++)
		assert_int_equal(got[i], all[i]);
	free(all);
}

static void
test_topk(void **state)
{
	enum { N = 51864 };
	float *x = malloc(N * sizeof(float));
	int n, k, i, round;

	(void)state;
	assert_non_null(x);
	for (round = 0; round < 40; round++) {
		n = round < 20 ? N - round : 1 + (int)(next() % 40);
		for (i = 0; i < n; i++) {
			/* few distinct values: ties everywhere */
			x[i] = (float)(next() % (round % 2 ? 50 : 5000)) *
			    0.25f;
			if (next() % 7 == 0)
				x[i] = -INFINITY;
		}
		if (round % 3 == 0)
			x[n - 1] = 1e6f;	/* the largest, last */
		k = 1 + round % 11;
		if (k > n)
			k = n;
		check_topk(x, n, k);
	}
	free(x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for logits_top (lib/kernels/logits.c): the top of a column of
 * logits that the output heads recompute exactly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "logits.h"

/*
 * logits_top against the one-by-one scan it replaced (the same indices
 * in the same slots): rows of many ties (values from 16 levels), of
 * rising values (a new top at every step), with a NaN (taken, as the
 * scan took it), and lengths that leave a tail of fewer than 8.
 */
static void
slow_top(const float *row, int n, int *top)
{
	float val[LOGITS_EXACT];
	int i, k, min_at = 0;

	for (k = 0; k < LOGITS_EXACT; k++) {
		top[k] = k;
		val[k] = row[k];
		if (val[k] < val[min_at])
			min_at = k;
	}
	for (i = LOGITS_EXACT; i < n; i++) {
		if (row[i] <= val[min_at])
			continue;
		top[min_at] = i;
		val[min_at] = row[i];
		for (k = 0; k < LOGITS_EXACT; k++)
			if (val[k] < val[min_at])
				min_at = k;
	}
}

static void
test_logits_top(void **state)
{
	static const int lens[] = { 64, 65, 71, 72, 1003, 51864 };
	int top[LOGITS_EXACT], want[LOGITS_EXACT], kind, li, i;
	float *row = malloc(51864 * sizeof(float));

	(void)state;
	assert_non_null(row);
	for (kind = 0; kind < 4; kind++)
		for (li = 0; li < (int)(sizeof(lens) / sizeof(lens[0])); li++) {
			int n = lens[li];

			for (i = 0; i < n; i++)
				row[i] = kind == 0 ? (float)rand() / RAND_MAX :
				    kind == 1 ? (float)(rand() % 16) :
				    kind == 2 ? (float)i : (float)rand() /
				    RAND_MAX;
			if (kind == 3)
				row[n * 2 / 3] = NAN;
			logits_top(row, n, top);
			slow_top(row, n, want);
			assert_memory_equal(top, want, sizeof(top));
		}
	free(row);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logits_top),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

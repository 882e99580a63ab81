/*
 * Unit tests for daemon/wyoming/wyoming-proto.c's PCM conversion: every width's
 * extremes land in [-1, 1) as the header promises. Full-scale 32-bit
 * samples rounded to 1.0f until the fuzz target found it
 * (tests/fuzz/corpus/wyoming/crash-int32-full-scale).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wyoming-proto.h"

/* One little-endian sample of width bytes holding v. */
static float
test_one(int width, int64_t v)
{
	uint8_t b[4];
	float out;
	int i;

	for (i = 0; i < width; i++)
		b[i] = (uint8_t)((uint64_t)v >> (8 * i));
	wy_pcm_float(b, 1, width, &out);
	return out;
}

static void
test_extremes(void **state)
{
	static const struct {
		int width;
		int64_t lo, hi;	/* as stored: 8-bit is unsigned */
	} w[] = {
		{ 1, 0, 255 },
		{ 2, -32768, 32767 },
		{ 3, -8388608, 8388607 },
		{ 4, INT32_MIN, INT32_MAX },
	};
	size_t i;
	int64_t d;
	float f;

	(void)state;
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		assert_true(test_one(w[i].width, w[i].lo) == -1.0f);
		for (d = 0; d < (w[i].width == 1 ? 1 : 200); d++) {
			f = test_one(w[i].width, w[i].hi - d);
			if (!(f < 1.0f && f > 0.99f))
				fail_msg("width %d, %lld: %.9g is not in "
				    "(0.99, 1)", w[i].width,
				    (long long)(w[i].hi - d), f);
		}
	}
	assert_true(test_one(2, 0) == 0.0f);
	assert_true(test_one(1, 128) == 0.0f);
	assert_true(test_one(4, 1 << 30) == 0.5f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extremes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lib/decode/pcm.c: sotto_pcm_mix(), the sanitising every input
 * of sottod and `sotto transcribe` goes through.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sotto.h"

/* Mono: NaN and infinities become 0 and are counted; the rest clipped. */
static void
test_mono(void **state)
{
	const float in[] = { 0.25f, -0.5f, NAN, INFINITY, -INFINITY, 1e10f,
	    -1e20f, 1.0f, -1.0f, 1.0000001f, -0.0f, 3e-39f };
	const float want[] = { 0.25f, -0.5f, 0.0f, 0.0f, 0.0f, 1.0f, -1.0f,
	    1.0f, -1.0f, 1.0f, 0.0f, 3e-39f };
	float out[sizeof(in) / sizeof(in[0])];
	size_t n = sizeof(in) / sizeof(in[0]), i;

	memset(out, 0xff, sizeof(out));
	assert_int_equal(sotto_pcm_mix(in, n, 1, out), 3);
	for (i = 0; i < n; i++) {
		if (out[i] != want[i])
			fail_msg("sample %zu: got %g, want %g", i, out[i],
			    want[i]);
	}
}

/*
 * Channels are averaged after each bad one is zeroed, then the mix is
 * clipped: the values sottod produced before the helper existed.
 */
static void
test_channels(void **state)
{
	const float in[] = {
		0.5f, 0.25f,		/* 0.375 */
		NAN, 0.5f,		/* 0.25 */
		1.0f, 1.0f,		/* 1 */
		2.0f, 2.0f,		/* 2 -> 1 */
		1e30f, -1e30f,		/* 0 */
		INFINITY, -0.5f,	/* -0.25 */
	};
	const float want[] = { 0.375f, 0.25f, 1.0f, 1.0f, 0.0f, -0.25f };
	float out[6];
	size_t i;

	assert_int_equal(sotto_pcm_mix(in, 6, 2, out), 2);
	for (i = 0; i < 6; i++)
		assert_true(out[i] == want[i]);
}

/* out may be in: frame i is read before out[i] is written. */
static void
test_in_place(void **state)
{
	float x[3 * 4] = {
		0.3f, 0.3f, 0.3f,
		NAN, 0.9f, 0.9f,
		-3.0f, -3.0f, -3.0f,
		0.1f, 0.2f, 0.3f,
	};
	float want[4] = { 0.3f, 0.6f, -1.0f, (0.1f + 0.2f + 0.3f) / 3 };
	size_t i;

	assert_int_equal(sotto_pcm_mix(x, 4, 3, x), 1);
	for (i = 0; i < 4; i++)
		assert_true(fabsf(x[i] - want[i]) < 1e-7f);
	x[0] = NAN;
	assert_int_equal(sotto_pcm_mix(x, 1, 1, x), 1);
	assert_true(x[0] == 0.0f);
}

/* Nothing to do: no frames, or no channels (nothing written). */
static void
test_empty(void **state)
{
	float in[2] = { NAN, NAN }, out[2] = { 7.0f, 7.0f };

	assert_int_equal(sotto_pcm_mix(in, 0, 1, out), 0);
	assert_int_equal(sotto_pcm_mix(in, 2, 0, out), 0);
	assert_true(out[0] == 7.0f && out[1] == 7.0f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mono),
		cmocka_unit_test(test_channels),
		cmocka_unit_test(test_in_place),
		cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lib/speaker/track.c's decision (track_decide): pieces
 * around a few random directions get one label per direction, in order
 * of first appearance, and keep it; a short piece never starts a speaker
 * nor moves a centroid; the join threshold, the new-speaker one and the
 * band between them; a speaker's centroid follows its pieces weighted by
 * their seconds.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "speaker.h"

#define DIM	SOTTO_SPEAKER_DIM

static float
uniform(uint32_t *seed)
{
	*seed = *seed * 1664525u + 1013904223u;
	return (float)(*seed >> 8) / (float)(1u << 24) * 2 - 1;
}

static void
normalise(float *x)
{
	float s = 0.0f;
	int i;

	for (i = 0; i < DIM; i++)
		s += x[i] * x[i];
	s = sqrtf(s);
	for (i = 0; i < DIM; i++)
		x[i] /= s;
}

/* A random unit direction. */
static void
direction(float *x, uint32_t *seed)
{
	int i;

	for (i = 0; i < DIM; i++)
		x[i] = uniform(seed);
	normalise(x);
}

/* dir plus noise of about that length, unit length: its cosine with dir
   is about 1 / sqrt(1 + noise^2), two such pieces' 1 / (1 + noise^2) */
static void
near(float *x, const float *dir, float noise, uint32_t *seed)
{
	int i;

	for (i = 0; i < DIM; i++)
		x[i] = dir[i] + noise * uniform(seed) / sqrtf(DIM / 3.0f);
	normalise(x);
}

/* Three speakers taking turns: S1, S2, S3 by first appearance, kept. */
static void
test_turns(void **state)
{
	static const int who[] = { 2, 2, 0, 1, 0, 2, 1, 1, 0, 2, 0, 1 };
	float dir[3][DIM], x[DIM];
	int label[3] = { 0, 0, 0 }, next = 1, i, got;
	struct track_state t;
	uint32_t seed = 7;

	(void)state;
	for (i = 0; i < 3; i++)
		direction(dir[i], &seed);
	track_init(&t, 0);
	for (i = 0; i < (int)(sizeof(who) / sizeof(who[0])); i++) {
		near(x, dir[who[i]], 0.9f, &seed);	/* pairs ~0.55 */
		got = track_decide(&t, x, 2.0 + i % 3, NULL, NULL);
		if (label[who[i]] == 0)
			label[who[i]] = next++;
		assert_int_equal(got, label[who[i]]);
	}
	assert_int_equal(t.n, 3);
	track_clear(&t);
}

/*
 * Short pieces: the nearest speaker, never a new one, no centroid moved.
 * A short first piece starts S1 without a centroid: the first long one
 * gives it one.
 */
static void
test_short(void **state)
{
	float a[DIM], b[DIM], x[DIM], before[DIM];
	struct track_state t;
	uint32_t seed = 11;
	float c;

	(void)state;
	direction(a, &seed);
	direction(b, &seed);
	track_init(&t, 0);
	assert_int_equal(track_decide(&t, b, 0.6, NULL, NULL), 1);
	assert_float_equal(t.weight[0], 0.0, 0);
	/* a long piece of another voice is S1's centroid, not S2 */
	near(x, a, 0.5f, &seed);
	assert_int_equal(track_decide(&t, x, 3.0, &c, NULL), 1);
	assert_float_equal(c, -2.0f, 0);
	assert_float_equal(t.weight[0], 3.0, 1e-9);
	memcpy(before, t.sum, sizeof(before));
	/* another voice, short: S1 still, and S1 unchanged */
	assert_int_equal(track_decide(&t, b, 0.9, &c, NULL), 1);
	assert_true(c < 0.3f);
	assert_int_equal(t.n, 1);
	assert_memory_equal(before, t.sum, sizeof(before));
	/* the same voice, 1 s: S2 */
	assert_int_equal(track_decide(&t, b, 1.0, NULL, NULL), 2);
	track_clear(&t);
}

/*
 * Over the threshold joins; under TRACK_NEW starts a speaker; in between a
 * piece of 3 s or more starts one, a shorter one takes the nearest and
 * moves nothing.
 */
static void
test_threshold(void **state)
{
	float a[DIM], x[DIM], y[DIM], z[DIM], before[DIM], c;
	struct track_state t;
	uint32_t seed = 3;
	int i;

	(void)state;
	direction(a, &seed);
	/* x: cosine 0.7 with a; y: 0.6; z: 0.2 */
	direction(x, &seed);
	c = 0;
	for (i = 0; i < DIM; i++)
		c += x[i] * a[i];
	for (i = 0; i < DIM; i++)
		x[i] -= c * a[i];
	normalise(x);
	for (i = 0; i < DIM; i++) {
		y[i] = 0.6f * a[i] + 0.8f * x[i];
		z[i] = 0.2f * a[i] + sqrtf(1 - 0.04f) * x[i];
		x[i] = 0.7f * a[i] + sqrtf(1 - 0.49f) * x[i];
	}
	track_init(&t, 0.65f);
	assert_int_equal(track_decide(&t, a, 2.0, NULL, NULL), 1);
	assert_int_equal(track_decide(&t, x, 2.0, &c, NULL), 1);
	assert_float_equal(c, 0.7f, 1e-4);
	assert_float_equal(t.weight[0], 4.0, 1e-9);
	track_clear(&t);

	track_init(&t, 0.65f);
	assert_int_equal(track_decide(&t, a, 2.0, NULL, NULL), 1);
	memcpy(before, t.sum, sizeof(before));
	assert_int_equal(track_decide(&t, y, 2.9, &c, NULL), 1);
	assert_float_equal(c, 0.6f, 1e-4);
	assert_int_equal(t.n, 1);
	assert_memory_equal(before, t.sum, sizeof(before));
	assert_int_equal(track_decide(&t, y, 3.0, NULL, NULL), 2);
	track_clear(&t);

	track_init(&t, 0.65f);
	assert_int_equal(track_decide(&t, a, 2.0, NULL, NULL), 1);
	assert_int_equal(track_decide(&t, z, 1.0, &c, NULL), 2);
	assert_float_equal(c, 0.2f, 1e-4);
	track_clear(&t);
}

/* The centroid is the seconds-weighted sum: 3 s of a and 1 s of b. */
static void
test_weights(void **state)
{
	float a[DIM], b[DIM], m[DIM];
	struct track_state t;
	uint32_t seed = 5;
	int i;

	(void)state;
	direction(a, &seed);
	direction(b, &seed);
	for (i = 0; i < DIM; i++)
		b[i] = 0.8f * a[i] + 0.6f * b[i];
	normalise(b);
	track_init(&t, 0.3f);
	assert_int_equal(track_decide(&t, a, 3.0, NULL, NULL), 1);
	assert_int_equal(track_decide(&t, b, 1.0, NULL, NULL), 1);
	for (i = 0; i < DIM; i++)
		m[i] = 3 * a[i] + b[i];
	for (i = 0; i < DIM; i++)
		assert_float_equal(t.sum[i], m[i], 1e-5);
	assert_float_equal(t.weight[0], 4.0, 1e-9);
	track_clear(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_turns),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_threshold),
		cmocka_unit_test(test_weights),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lib/model/mel.c with filter banks built here: an identity
 * bank (one row per FFT bin) makes every value checkable by hand, and a
 * naive double-precision DFT over an explicitly reflect-padded copy checks
 * the edge handling.  tests/numerics/test_mel.py compares against numpy
 * with Whisper's own filters.
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
#include "mel.h"

#define TEST_RATE	16000

static float *
test_identity_filters(void)
{
	float *f;
	int k;

	f = calloc((size_t)MEL_N_BINS * MEL_N_BINS, sizeof(*f));
	assert_non_null(f);
	for (k = 0; k < MEL_N_BINS; k++)
		f[(size_t)k * MEL_N_BINS + k] = 1.0f;
	return f;
}

static struct mel *
test_mel_new(int n_mels, const float *filters)
{
	struct mel *m;
	char err[SOTTO_ERR_MAX];

	assert_int_equal(mel_new(n_mels, filters, &m, err), 0);
	assert_non_null(m);
	return m;
}

/* A sine of amplitude a whose frequency sits on FFT bin k. */
static float *
test_sine(size_t n, int k, float a)
{
	float *x;
	size_t i;

	x = malloc((n > 0 ? n : 1) * sizeof(*x));
	assert_non_null(x);
	for (i = 0; i < n; i++)
		x[i] = a * (float)sin(2.0 * M_PI * k * (double)i / MEL_N_FFT);
	return x;
}

/* Deterministic noise in [-0.5, 0.5). */
static float *
test_noise(size_t n, uint32_t seed)
{
	float *x;
	size_t i;

	x = malloc((n > 0 ? n : 1) * sizeof(*x));
	assert_non_null(x);
	for (i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
	}
	return x;
}

static void
test_new_errors(void **state)
{
	float filters[MEL_N_BINS] = { 0 };
	char err[SOTTO_ERR_MAX] = "";
	struct mel *m = (struct mel *)1;

	(void)state;
	assert_int_equal(mel_new(0, filters, &m, err), SOTTO_EINVAL);
	assert_null(m);
	assert_true(strlen(err) > 0);
	assert_int_equal(mel_new(80, NULL, &m, NULL), SOTTO_EINVAL);
	assert_null(m);
	mel_free(NULL);
}

static void
test_frame_counts(void **state)
{
	(void)state;
	assert_int_equal(mel_total_frames(0, 0), 0);
	assert_int_equal(mel_total_frames(159, 0), 0);
	assert_int_equal(mel_total_frames(160, 0), 1);
	assert_int_equal(mel_total_frames(480000, 0), 3000);
	assert_int_equal(mel_total_frames(480159, 0), 3000);
	assert_int_equal(mel_total_frames(100, 480000), 3000);
	assert_int_equal(mel_total_frames(176000, 480000), 4100);
	assert_int_equal(mel_total_frames(SIZE_MAX, 2), 0);
}

static void
test_zero_length(void **state)
{
	float *f = test_identity_filters(), max = 123.0f;
	char err[SOTTO_ERR_MAX];
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	assert_int_equal(mel_log(m, NULL, 0, 0, 0, 0, NULL, 0, &max, err), 0);
	assert_true(max == MEL_LOG_FLOOR);
	assert_int_equal(mel_log(m, NULL, 0, 0, 0, 1, &max, 1, NULL, err),
	    SOTTO_EINVAL);
	mel_free(m);
	free(f);
}

static void
test_out_of_range(void **state)
{
	float *f = test_identity_filters(), *x = test_noise(1600, 1);
	float out[MEL_N_BINS * 4];
	char err[SOTTO_ERR_MAX] = "";
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	assert_int_equal(mel_log(m, x, 1600, 0, 8, 2, out, 4, NULL, err), 0);
	assert_int_equal(mel_log(m, x, 1600, 0, 9, 2, out, 4, NULL, err),
	    SOTTO_EINVAL);
	assert_non_null(strstr(err, "10 frames"));
	assert_int_equal(mel_log(m, x, 1600, 0, 11, 0, out, 4, NULL, err),
	    SOTTO_EINVAL);
	assert_int_equal(mel_log(m, x, 1600, 0, 0, 4, out, 3, NULL, err),
	    SOTTO_EINVAL);
	mel_free(m);
	free(x);
	free(f);
}

static void
test_silence(void **state)
{
	static const size_t pads[] = { 0, 1, 160, 480000 };
	float *f = test_identity_filters(), *x = calloc(16000, sizeof(float));
	float *out, max;
	size_t i, p, frames;
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	assert_non_null(x);
	for (p = 0; p < sizeof(pads) / sizeof(pads[0]); p++) {
		frames = mel_total_frames(16000, pads[p]);
		out = malloc(frames * MEL_N_BINS * sizeof(*out));
		assert_non_null(out);
		assert_int_equal(mel_log(m, x, 16000, pads[p], 0, frames, out,
		    frames, &max, NULL), 0);
		for (i = 0; i < frames * MEL_N_BINS; i++)
			assert_true(out[i] == -10.0f);
		assert_true(max == -10.0f);
		free(out);
	}
	mel_free(m);
	free(x);
	free(f);
}

/*
 * A bin-centred sine of amplitude a through the periodic Hann window:
 * |X[k]| = a / 2 * sum(w) = 100 a, and the side lobes |X[k +- 1]| = 50 a.
 */
static void
test_sine_bins(void **state)
{
	const size_t n = TEST_RATE;
	const int k0 = 25;		/* 1 kHz */
	float *f = test_identity_filters(), *x = test_sine(n, k0, 0.5f);
	float out[MEL_N_BINS], max;
	struct mel *m = test_mel_new(MEL_N_BINS, f);
	int k;

	(void)state;
	assert_int_equal(mel_log(m, x, n, 0, 50, 1, out, 1, &max, NULL), 0);
	assert_float_equal(out[k0], log10(1e4 * 0.25), 1e-4);
	assert_float_equal(out[k0 - 1], log10(2500 * 0.25), 1e-4);
	assert_float_equal(out[k0 + 1], log10(2500 * 0.25), 1e-4);
	assert_float_equal(max, out[k0], 0);
	for (k = 0; k < MEL_N_BINS; k++)
		if (abs(k - k0) > 1)
			assert_true(out[k] < out[k0] - 6.0f);
	mel_free(m);
	free(x);
	free(f);
}

/* Two bands, 600-1000 Hz and 4-5 kHz: a 1 kHz tone lands in the first. */
static void
test_sine_bands(void **state)
{
	const size_t n = TEST_RATE;
	float filters[2 * MEL_N_BINS] = { 0 };
	float *x = test_sine(n, 25, 0.5f), out[2 * 3];
	struct mel *m;
	int k, t;

	(void)state;
	for (k = 15; k <= 25; k++)
		filters[k] = 1.0f;
	for (k = 100; k <= 125; k++)
		filters[MEL_N_BINS + k] = 1.0f;
	m = test_mel_new(2, filters);
	assert_int_equal(mel_log(m, x, n, 0, 40, 3, out, 3, NULL, NULL), 0);
	for (t = 0; t < 3; t++) {
		/* bins 24 and 25 of the tone: 2500/4 + 1e4/4 */
		assert_float_equal(out[t], log10(3125.0), 1e-4);
		assert_true(out[3 + t] < out[t] - 6.0f);
	}
	mel_free(m);
	free(x);
}

/* Columns of windows [first, first + k) equal those of one full call. */
static void
test_windows(void **state)
{
	static const size_t firsts[] = { 0, 1, 2, 137, 290, 299 };
	const size_t n = 3 * TEST_RATE + 77, pad = 333;
	const size_t total = mel_total_frames(n, pad), ld = 64;
	float *f = test_identity_filters(), *x = test_noise(n, 7);
	float *full, *win, max, wmax;
	size_t i, k, r, c, first;
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	assert_int_equal(total, 302);
	full = malloc(total * MEL_N_BINS * sizeof(*full));
	win = malloc(ld * MEL_N_BINS * sizeof(*win));
	assert_non_null(full);
	assert_non_null(win);
	assert_int_equal(mel_log(m, x, n, pad, 0, total, full, total, &max,
	    NULL), 0);
	for (i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		first = firsts[i];
		k = total - first < 50 ? total - first : 50;
		assert_int_equal(mel_log(m, x, n, pad, first, k, win, ld,
		    &wmax, NULL), 0);
		assert_true(wmax <= max);
		for (r = 0; r < MEL_N_BINS; r++)
			for (c = 0; c < k; c++)
				assert_true(win[r * ld + c] ==
				    full[r * total + first + c]);
	}
	mel_free(m);
	free(win);
	free(full);
	free(x);
	free(f);
}

/*
 * mel_log_span over a copy of only the samples the frames read gives the
 * full signal's columns, at the start (reflection), inside and at the
 * end (zero padding); one sample fewer is refused, not read.
 */
static void
test_span(void **state)
{
	static const size_t firsts[] = { 0, 1, 2, 40, 250, 290, 300 };
	const size_t n = 3 * TEST_RATE + 77, pad = 480, k = 12;
	const size_t total = mel_total_frames(n, pad);
	float *f = test_identity_filters(), *x = test_noise(n, 11);
	float *full, *win, max, wmax, wmax2;
	size_t i, c, r, first, last, lo, hi;
	struct mel *m = test_mel_new(MEL_N_BINS, f);
	struct mel_span sp;
	char err[SOTTO_ERR_MAX];

	(void)state;
	full = malloc(total * MEL_N_BINS * sizeof(*full));
	win = malloc(k * MEL_N_BINS * sizeof(*win));
	assert_non_null(full);
	assert_non_null(win);
	assert_int_equal(mel_log(m, x, n, pad, 0, total, full, total, &max,
	    NULL), 0);
	for (i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		first = firsts[i];
		last = first + k - 1 < total ? first + k - 1 : total - 1;
		lo = first * MEL_HOP > 200 ? first * MEL_HOP - 200 : 0;
		hi = last * MEL_HOP + 200 > 201 ? last * MEL_HOP + 200 : 201;
		hi = hi < n ? hi : n;
		lo = lo < hi ? lo : hi;
		sp = (struct mel_span){ x + lo, lo, hi - lo, n, pad };
		assert_int_equal(mel_log_span(m, &sp, first, last - first + 1,
		    win, k, &wmax, err), 0);
		for (r = 0; r < MEL_N_BINS; r++)
			for (c = 0; c + first <= last; c++)
				assert_true(win[r * k + c] ==
				    full[r * total + first + c]);
		if (hi == lo)
			continue;
		/* the span one sample short at either end */
		sp = (struct mel_span){ x + lo + 1, lo + 1, hi - lo - 1, n,
		    pad };
		assert_int_equal(mel_log_span(m, &sp, first, last - first + 1,
		    win, k, &wmax2, err), SOTTO_EINVAL);
		sp = (struct mel_span){ x + lo, lo, hi - lo - 1, n, pad };
		assert_int_equal(mel_log_span(m, &sp, first, last - first + 1,
		    win, k, &wmax2, err), SOTTO_EINVAL);
		assert_non_null(strstr(err, "outside"));
	}
	mel_free(m);
	free(win);
	free(full);
	free(x);
	free(f);
}

/* pad zeros behave exactly like zeros present in pcm. */
static void
test_pad_equals_zeros(void **state)
{
	const size_t n = 5000, pad = 4321, total = mel_total_frames(n, pad);
	float *f = test_identity_filters(), *x = test_noise(n + pad, 3);
	float *a, *b, amax, bmax;
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	memset(x + n, 0, pad * sizeof(*x));
	a = malloc(total * MEL_N_BINS * sizeof(*a));
	b = malloc(total * MEL_N_BINS * sizeof(*b));
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(mel_log(m, x, n, pad, 0, total, a, total, &amax,
	    NULL), 0);
	assert_int_equal(mel_log(m, x, n + pad, 0, 0, total, b, total, &bmax,
	    NULL), 0);
	assert_memory_equal(a, b, total * MEL_N_BINS * sizeof(*a));
	assert_true(amax == bmax);
	mel_free(m);
	free(b);
	free(a);
	free(x);
	free(f);
}

/* ref: np.pad(x, 200, mode="reflect"), then a naive DFT in double. */
static void
test_naive_frame(const float *x, size_t len, size_t t, double *ret)
{
	double re, im, w, s, ph;
	ptrdiff_t i, j;
	int k;

	for (k = 0; k < MEL_N_BINS; k++) {
		re = im = 0.0;
		for (i = 0; i < MEL_N_FFT; i++) {
			j = (ptrdiff_t)(t * MEL_HOP) - MEL_N_FFT / 2 + i;
			if (j < 0)
				j = -j;
			if (j >= (ptrdiff_t)len)
				j = 2 * ((ptrdiff_t)len - 1) - j;
			w = 0.5 - 0.5 * cos(2.0 * M_PI * i / MEL_N_FFT);
			s = w * x[j];
			ph = 2.0 * M_PI * k * i / MEL_N_FFT;
			re += s * cos(ph);
			im -= s * sin(ph);
		}
		ret[k] = log10(fmax(re * re + im * im, 1e-10));
	}
}

/* Edge frames (reflect at both ends, pad = 0) against the naive DFT. */
static void
test_reflect_edges(void **state)
{
	static const size_t frames[] = { 0, 1, 2, 97, 98, 99 };
	const size_t n = 100 * MEL_HOP + 123;
	float *f = test_identity_filters(), *x = test_noise(n, 11);
	float out[MEL_N_BINS];
	double ref[MEL_N_BINS];
	size_t i;
	int k;
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	assert_int_equal(mel_total_frames(n, 0), 100);
	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		assert_int_equal(mel_log(m, x, n, 0, frames[i], 1, out, 1,
		    NULL, NULL), 0);
		test_naive_frame(x, n, frames[i], ref);
		for (k = 0; k < MEL_N_BINS; k++)
			assert_float_equal(out[k], ref[k], 1e-3);
	}
	mel_free(m);
	free(x);
	free(f);
}

/* Signals under 201 samples: no crash, missing reflections read zero. */
static void
test_short(void **state)
{
	static const size_t ns[] = { 1, 2, 159, 160, 161, 200, 201, 399 };
	float *f = test_identity_filters(), *x = test_noise(400, 5);
	float out[MEL_N_BINS * 4], max;
	size_t i, total;
	struct mel *m = test_mel_new(MEL_N_BINS, f);

	(void)state;
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		total = mel_total_frames(ns[i], 0);
		assert_int_equal(mel_log(m, x, ns[i], 0, 0, total, out, 4,
		    &max, NULL), 0);
		total = mel_total_frames(ns[i], 300);
		assert_int_equal(mel_log(m, x, ns[i], 300, 0, total, out, 4,
		    &max, NULL), 0);
		assert_true(max > -10.0f);
	}
	mel_free(m);
	free(x);
	free(f);
}

static void
test_normalize(void **state)
{
	float x[2 * 3] = { 2.0f, -7.0f, 0.0f, 99.0f, -10.0f, 1.5f };

	(void)state;
	/* floor 2 - 8 = -6; x[2] and x[5] lie outside the 2 x 2 block */
	mel_normalize(x, 2, 2, 3, 2.0f);
	assert_float_equal(x[0], 1.5f, 1e-7);
	assert_float_equal(x[1], -0.5f, 1e-7);
	assert_float_equal(x[2], 0.0f, 0);
	assert_float_equal(x[3], 25.75f, 1e-7);
	assert_float_equal(x[4], -0.5f, 1e-7);
	assert_float_equal(x[5], 1.5f, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_errors),
		cmocka_unit_test(test_frame_counts),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_silence),
		cmocka_unit_test(test_sine_bins),
		cmocka_unit_test(test_sine_bands),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_span),
		cmocka_unit_test(test_pad_equals_zeros),
		cmocka_unit_test(test_reflect_edges),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_normalize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lib/speaker/ without the model file: the frame count,
 * the filter bank on a pure tone, spk_conv1d() against a naive
 * convolution, and the head's chunks (campplus-head.c) against one pass
 * over a shorter sequence, with random weights. tests/speaker compares
 * whole embeddings with PyTorch and numpy on real speech.
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

/* Uniform in [-a, a), from a fixed LCG: the same numbers every run. */
static float *
test_random(size_t n, float a, uint32_t *seed)
{
	float *x = malloc(n * sizeof(*x));
	size_t i;

	assert_non_null(x);
	for (i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		x[i] = a * ((float)(*seed >> 8) / (float)(1u << 24) * 2 - 1);
	}
	return x;
}

static void
test_frames(void **state)
{
	(void)state;
	assert_int_equal(fbank_frames(0), 0);
	assert_int_equal(fbank_frames(399), 0);
	assert_int_equal(fbank_frames(400), 1);
	assert_int_equal(fbank_frames(559), 1);
	assert_int_equal(fbank_frames(560), 2);
	assert_int_equal(fbank_frames(16000), 98);
}

/*
 * Noise, then a 1 kHz tone from the middle on: every value is finite and
 * every row's mean over time is 0 (the normalisation), and the filter
 * that weighs 1 kHz most is below its mean before the tone and above it
 * after.
 */
static void
test_fbank_tone(void **state)
{
	struct sotto_speaker *s = calloc(1, sizeof(*s));
	const size_t n = 16000, T = fbank_frames(n);
	const int bin = 1000 * SPK_N_FFT / 16000;	/* 32 */
	uint32_t seed = 7;
	float *x = test_random(n, 1e-4f, &seed), *f;
	char err[SOTTO_ERR_MAX];
	size_t i, t;
	int m, top = 0;

	(void)state;
	assert_non_null(s);
	fbank_init(s);
	for (m = 0; m < SPK_N_MELS; m++) {
		assert_true(s->mel_hi[m] > s->mel_lo[m]);
		if (s->mel[m][bin] > s->mel[top][bin])
			top = m;
	}
	for (i = n / 2; i < n; i++)
		x[i] += 0.5f * (float)sin(2 * M_PI * 1000.0 * i / 16000.0);
	f = malloc(SPK_N_MELS * T * sizeof(*f));
	assert_non_null(f);
	assert_int_equal(fbank_compute(s, x, n, f, err), 0);
	for (m = 0; m < SPK_N_MELS; m++) {
		double sum = 0;

		for (t = 0; t < T; t++) {
			assert_true(isfinite(f[m * T + t]));
			sum += f[m * T + t];
		}
		assert_true(fabs(sum / T) < 1e-4);
	}
	for (t = 0; t < T; t++) {
		if (t * SPK_SHIFT + SPK_FRAME <= n / 2)
			assert_true(f[top * T + t] < 0);
		else if (t * SPK_SHIFT >= n / 2)
			assert_true(f[top * T + t] > 0);
	}
	free(f);
	free(x);
	free(s);
}

/* y[o][t] of a conv1d by the definition, in double. */
static double
naive_conv1d(const float *w, int cin, int k, int stride, int dil, int pad,
    const float *x, int T, int o, int t)
{
	double y = 0;
	int c, j;

	for (c = 0; c < cin; c++)
		for (j = 0; j < k; j++) {
			int at = t * stride + j * dil - pad;

			if (at >= 0 && at < T)
				y += (double)w[(o * cin + c) * k + j] *
				    x[c * T + at];
		}
	return y;
}

static void
check_conv1d(int cout, int cin, int k, int stride, int dil, int pad, int T)
{
	const int To = (T + 2 * pad - dil * (k - 1) - 1) / stride + 1;
	uint32_t seed = 11;
	float *w = test_random((size_t)cout * cin * k, 0.5f, &seed);
	float *x = test_random((size_t)cin * T, 1.0f, &seed);
	float *y = malloc((size_t)cout * To * sizeof(*y));
	float *cols = malloc((size_t)cin * k * To * sizeof(*cols));
	char err[SOTTO_ERR_MAX];
	int o, t;

	assert_non_null(y);
	assert_non_null(cols);
	assert_int_equal(spk_conv1d(w, cout, cin, k, stride, dil, pad, x, T,
	    T, y, To, cols, err), 0);
	for (o = 0; o < cout; o++)
		for (t = 0; t < To; t++)
			assert_true(fabs(y[o * To + t] - naive_conv1d(w, cin,
			    k, stride, dil, pad, x, T, o, t)) < 1e-4);
	free(cols);
	free(y);
	free(x);
	free(w);
}

/* The TDNN's shape, the dilated CAM convolutions, 1x1 products. */
static void
test_conv1d(void **state)
{
	(void)state;
	check_conv1d(8, 6, 5, 2, 1, 2, 37);
	check_conv1d(8, 6, 5, 2, 1, 2, 3);
	check_conv1d(4, 12, 3, 1, 2, 2, 23);
	check_conv1d(4, 12, 3, 1, 1, 1, 1);
	check_conv1d(5, 7, 1, 1, 1, 0, 9);
}

/* p, remembered in mem[] (NULL-terminated) to be freed. */
static float *
test_keep(float **mem, int *k, float *p)
{
	mem[(*k)++] = p;
	mem[*k] = NULL;
	return p;
}

/*
 * Random head weights in s, about He's scale (each layer keeps the size
 * of its input, so that a frame 10 layers away still shows: the chunk
 * test fails with 9 frames of context); mem[] gets what to free.
 */
static void
test_head_weights(struct sotto_speaker *s, float **mem)
{
	const size_t C = SPK_HEAD_C, big = C * C * 9;
	const float w = 0.15f;	/* ~ sqrt(6 / (32 * 9)) */
	uint32_t seed = 3;
	int i, k = 0;

	s->conv1_w = test_keep(mem, &k, test_random(C * 9, 0.8f, &seed));
	s->conv1_b = test_keep(mem, &k, test_random(C, 0.1f, &seed));
	s->conv2_w = test_keep(mem, &k, test_random(big, w, &seed));
	s->conv2_b = test_keep(mem, &k, test_random(C, 0.1f, &seed));
	for (i = 0; i < SPK_HEAD_BLOCKS; i++) {
		struct spk_res_block *rb = &s->block[i];

		rb->stride = i % 2 == 0 ? 2 : 1;
		rb->conv1_w = test_keep(mem, &k, test_random(big, w, &seed));
		rb->conv1_b = test_keep(mem, &k, test_random(C, 0.1f, &seed));
		rb->conv2_w = test_keep(mem, &k, test_random(big, w, &seed));
		rb->conv2_b = test_keep(mem, &k, test_random(C, 0.1f, &seed));
		if (i % 2 == 0) {
			rb->sc_w = test_keep(mem, &k,
			    test_random(C * C, 0.4f, &seed));
			rb->sc_b = test_keep(mem, &k,
			    test_random(C, 0.1f, &seed));
		}
	}
}

/*
 * The head is run in chunks of 256 frames with 10 frames of context on
 * each side, which must give what one pass over the whole sequence
 * gives. A 600-frame sequence, and the same without its first 40 frames:
 * their chunks start at different frames, and wherever both have 10
 * frames on each side (frames 50 to 590) they must agree.
 */
static void
test_head_chunks(void **state)
{
	struct sotto_speaker *s = calloc(1, sizeof(*s));
	const int T = 600, skip = 40, T2 = T - skip;
	uint32_t seed = 5;
	float *feats = test_random((size_t)SPK_N_MELS * T, 1.0f, &seed);
	float *cut = malloc((size_t)SPK_N_MELS * T2 * sizeof(float));
	float *a = malloc((size_t)SPK_TDNN_IN * T * sizeof(float));
	float *b = malloc((size_t)SPK_TDNN_IN * T2 * sizeof(float));
	float *mem[32];
	char err[SOTTO_ERR_MAX];
	int c, t, i;

	(void)state;
	assert_non_null(s);
	assert_non_null(cut);
	assert_non_null(a);
	assert_non_null(b);
	test_head_weights(s, mem);
	for (c = 0; c < SPK_N_MELS; c++)
		memcpy(cut + c * T2, feats + c * T + skip, T2 * sizeof(float));
	assert_int_equal(spk_head(s, feats, T, a, err), 0);
	assert_int_equal(spk_head(s, cut, T2, b, err), 0);
	for (c = 0; c < SPK_TDNN_IN; c++)
		for (t = skip + 10; t < T - 10; t++) {
			float u = a[c * T + t], v = b[c * T2 + t - skip];

			assert_true(fabsf(u - v) <= 1e-5f * (1 + fabsf(u)));
		}
	for (i = 0; mem[i] != NULL; i++)
		free(mem[i]);
	free(b);
	free(a);
	free(cut);
	free(feats);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_fbank_tone),
		cmocka_unit_test(test_conv1d),
		cmocka_unit_test(test_head_chunks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lib/speaker/cluster.c: groups of points around random
 * directions found again; --speakers, --min-speakers, --max-speakers as
 * the counts; the threshold and the weights where the answer is known;
 * and on random sets the same groups as a naive average linkage that
 * recomputes every similarity from the members at each step.
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
normalise(float *x, int dim)
{
	float s = 0.0f;
	int i;

	for (i = 0; i < dim; i++)
		s += x[i] * x[i];
	s = sqrtf(s);
	for (i = 0; i < dim; i++)
		x[i] /= s;
}

/*
 * emb[n][DIM]: point i around direction group[i] of k random ones, with
 * noise of the given size (per coordinate, before scaling to length 1).
 */
static float *
points(const int *group, int n, int k, float noise, uint32_t seed)
{
	float *dir = malloc((size_t)k * DIM * sizeof(float));
	float *emb = malloc((size_t)n * DIM * sizeof(float));
	int i, j;

	assert_non_null(dir);
	assert_non_null(emb);
	for (i = 0; i < k * DIM; i++)
		dir[i] = uniform(&seed);
	for (i = 0; i < k; i++)
		normalise(dir + i * DIM, DIM);
	for (i = 0; i < n; i++) {
		for (j = 0; j < DIM; j++)
			emb[i * DIM + j] = dir[group[i] * DIM + j] +
			    noise * uniform(&seed);
		normalise(emb + i * DIM, DIM);
	}
	free(dir);
	return emb;
}

/* Whether labels[] and truth[] make the same partition of n points. */
static int
same_partition(const int *labels, const int *truth, int n)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			if ((labels[i] == labels[j]) != (truth[i] == truth[j]))
				return 0;
	return 1;
}

/* Labels 0, 1, ... appear in that order. */
static void
assert_first_appearance(const int *labels, int n)
{
	int i, next = 0;

	for (i = 0; i < n; i++) {
		assert_true(labels[i] <= next);
		if (labels[i] == next)
			next++;
	}
}

/* Three speakers, their pieces interleaved, found with the threshold. */
static void
test_three_groups(void **state)
{
	static const int truth[] = { 2, 2, 0, 1, 0, 2, 1, 1, 0, 2, 0, 1 };
	const int n = sizeof(truth) / sizeof(truth[0]);
	struct cluster_params p;
	int labels[sizeof(truth) / sizeof(truth[0])];
	float *emb = points(truth, n, 3, 0.08f, 7);

	(void)state;
	cluster_params_init(&p);
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 3);
	assert_true(same_partition(labels, truth, n));
	assert_first_appearance(labels, n);
	assert_int_equal(labels[0], 0);
	free(emb);
}

/* The counts: exactly n_clusters; the estimate held within min and max. */
static void
test_counts(void **state)
{
	static const int truth[] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 };
	const int n = sizeof(truth) / sizeof(truth[0]);
	struct cluster_params p;
	int labels[sizeof(truth) / sizeof(truth[0])];
	float *emb = points(truth, n, 4, 0.08f, 11);

	(void)state;
	cluster_params_init(&p);
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 4);
	p.n_clusters = 2;
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 2);
	p.n_clusters = 6;
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 6);
	p.n_clusters = 20;	/* more than the points: one each */
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), n);
	p.n_clusters = 0;
	p.max_clusters = 3;
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 3);
	p.max_clusters = 0;
	p.min_clusters = 5;
	assert_int_equal(cluster_ahc(emb, NULL, n, DIM, &p, labels, NULL), 5);
	assert_first_appearance(labels, n);
	free(emb);
}

/* One speaker: one group; no points: none. */
static void
test_one_and_none(void **state)
{
	static const int truth[] = { 0, 0, 0, 0, 0, 0 };
	struct cluster_params p;
	int labels[6];
	float *emb = points(truth, 6, 1, 0.08f, 3);

	(void)state;
	cluster_params_init(&p);
	assert_int_equal(cluster_ahc(emb, NULL, 6, DIM, &p, labels, NULL), 1);
	assert_int_equal(cluster_ahc(emb, NULL, 0, DIM, &p, labels, NULL), 0);
	free(emb);
}

/* Two points whose cosine is 0.6: one group below it, two above. */
static void
test_threshold(void **state)
{
	float emb[2 * DIM] = { 0 };
	struct cluster_params p;
	int labels[2];

	(void)state;
	emb[0] = 1.0f;
	emb[DIM] = 0.6f;
	emb[DIM + 1] = 0.8f;
	cluster_params_init(&p);
	p.threshold = 0.59f;
	assert_int_equal(cluster_ahc(emb, NULL, 2, DIM, &p, labels, NULL), 1);
	p.threshold = 0.61f;
	assert_int_equal(cluster_ahc(emb, NULL, 2, DIM, &p, labels, NULL), 2);
	assert_int_equal(labels[0], 0);
	assert_int_equal(labels[1], 1);
}

/*
 * p0 and p1 (cosine 0.894) merge first; p2's weighted average cosine
 * with them is near 0.6 (its cosine with p0) when p0 weighs most and
 * near 0.537 (with p1) when p1 does: a threshold of 0.57 keeps it apart
 * only in the second case.
 */
static void
test_weights(void **state)
{
	float emb[3 * DIM] = { 0 }, w[3];
	struct cluster_params p;
	int labels[3];

	(void)state;
	emb[0] = 1.0f;
	emb[DIM] = 1.0f;
	emb[DIM + 1] = 0.5f;
	normalise(emb + DIM, DIM);
	emb[2 * DIM] = 0.6f;
	emb[2 * DIM + 2] = 0.8f;
	cluster_params_init(&p);
	p.threshold = 0.57f;
	w[0] = 10.0f, w[1] = 1.0f, w[2] = 1.0f;
	assert_int_equal(cluster_ahc(emb, w, 3, DIM, &p, labels, NULL), 1);
	w[0] = 1.0f, w[1] = 10.0f;
	assert_int_equal(cluster_ahc(emb, w, 3, DIM, &p, labels, NULL), 2);
	assert_int_equal(labels[0], labels[1]);
	assert_int_not_equal(labels[0], labels[2]);
}

/* A naive weighted average linkage to n_clusters groups: labels[n]. */
static void
naive_ahc(const float *emb, const float *w, int n, int k, int *group)
{
	int i, j, a, b, bi = 0, bj = 0, left = n;
	double best, sum, ws;

	for (i = 0; i < n; i++)
		group[i] = i;
	for (; left > k; left--) {
		best = -INFINITY;
		for (i = 0; i < n; i++)
			for (j = i + 1; j < n; j++) {
				int gi = i, gj = j, used = 0;

				for (a = 0; a < i; a++)	/* first member only */
					used |= group[a] == group[i];
				for (b = 0; b < j; b++)
					used |= group[b] == group[j];
				if (used || group[i] == group[j])
					continue;
				sum = ws = 0.0;
				for (a = 0; a < n; a++)
					for (b = 0; b < n; b++) {
						double c = 0.0;
						int d;

						if (group[a] != group[gi] ||
						    group[b] != group[gj])
							continue;
						for (d = 0; d < DIM; d++)
							c += emb[a * DIM + d] *
							    emb[b * DIM + d];
						sum += w[a] * w[b] * c;
						ws += w[a] * w[b];
					}
				if (sum / ws > best) {
					best = sum / ws;
					bi = group[i];
					bj = group[j];
				}
			}
		for (a = 0; a < n; a++)
			if (group[a] == bj)
				group[a] = bi;
	}
}

/* Random points and weights: the same groups as the naive linkage. */
static void
test_against_naive(void **state)
{
	enum { N = 14 };
	int truth[N], labels[N], naive[N], i, k, trial;
	uint32_t seed = 99;
	struct cluster_params p;
	float w[N], *emb;

	(void)state;
	for (trial = 0; trial < 20; trial++) {
		for (i = 0; i < N; i++) {
			truth[i] = (int)((uniform(&seed) + 1.0f) * 2.0f) % 4;
			w[i] = 0.5f + 2.5f * (uniform(&seed) + 1.0f);
		}
		emb = points(truth, N, 4, 0.05f + 0.01f * trial, seed);
		for (k = 1; k <= 5; k++) {
			cluster_params_init(&p);
			p.n_clusters = k;
			assert_int_equal(cluster_ahc(emb, w, N, DIM, &p, labels,
			    NULL), k);
			naive_ahc(emb, w, N, k, naive);
			assert_true(same_partition(labels, naive, N));
		}
		free(emb);
	}
}

static void
test_too_many(void **state)
{
	struct cluster_params p;
	char err[SOTTO_ERR_MAX] = "";
	float dummy[DIM] = { 1.0f };
	int labels[1];

	(void)state;
	cluster_params_init(&p);
	assert_int_equal(cluster_ahc(dummy, NULL, CLUSTER_MAX_POINTS + 1, DIM,
	    &p, labels, err), SOTTO_EINVAL);
	assert_non_null(strstr(err, "shorter"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_three_groups),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_one_and_none),
		cmocka_unit_test(test_threshold),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_against_naive),
		cmocka_unit_test(test_too_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

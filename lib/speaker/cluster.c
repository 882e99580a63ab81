/*
 * Agglomerative clustering of speaker embeddings: every piece starts as
 * a group of its own and the two groups most alike are merged, again and
 * again. Alike is average linkage on the cosine, weighted: the weighted
 * mean of the cosines of every pair of pieces across the two groups, each
 * piece weighing what the caller says (its seconds of speech), so that a
 * long piece, whose embedding is the surer, counts for more.
 *
 * The merged group's similarity to a third is the weighted mean of its two
 * parts' (Lance and Williams), so the n x n matrix is filled once and
 * then only updated. Each group keeps its most similar other group; a
 * merge recomputes only the groups that pointed at one of the two, so a
 * step is O(n) in the usual case (O(n^2) at worst).
 *
 * When to stop: at exactly n_clusters groups when given; else when the
 * best pair is less alike than the threshold (two speakers), though
 * never below min_clusters, and always down to max_clusters.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "speaker.h"

/* The working state; every array owned, freed by cluster_free(). */
struct ahc {
	int n;
	float *sim;		/* [n][n], rows of merged groups updated */
	double *weight;		/* [n] a group's total weight */
	int *alive;		/* [n] 1 while group i exists */
	int *nn;		/* [n] its most similar other group */
	int *parent;		/* [n] point -> the group it went into */
};

static void
ahc_free(struct ahc *a)
{
	free(a->sim);
	free(a->weight);
	free(a->alive);
	free(a->nn);
	free(a->parent);
}

static float
dot(const float *x, const float *y, int dim)
{
	float s = 0.0f;
	int i;

	for (i = 0; i < dim; i++)
		s += x[i] * y[i];
	return s;
}

/* Group i's most similar other living group, or -1. */
static int
nearest(const struct ahc *a, int i)
{
	const float *row = a->sim + (size_t)i * a->n;
	float best = -FLT_MAX;
	int j, nn = -1;

	for (j = 0; j < a->n; j++)
		if (j != i && a->alive[j] && row[j] > best) {
			best = row[j];
			nn = j;
		}
	return nn;
}

static int
ahc_init(struct ahc *a, const float *emb, const float *w, int n, int dim,
    char *err)
{
	int i, j;

	memset(a, 0, sizeof(*a));
	a->n = n;
	a->sim = malloc((size_t)n * n * sizeof(float));
	a->weight = malloc(n * sizeof(double));
	a->alive = malloc(n * sizeof(int));
	a->nn = malloc(n * sizeof(int));
	a->parent = malloc(n * sizeof(int));
	if (a->sim == NULL || a->weight == NULL || a->alive == NULL ||
	    a->nn == NULL || a->parent == NULL) {
		ahc_free(a);
		return err_set(err, SOTTO_ENOMEM, "out of memory clustering "
		    "%d pieces of speech", n);
	}
	for (i = 0; i < n; i++) {
		for (j = i; j < n; j++)
			a->sim[(size_t)i * n + j] = a->sim[(size_t)j * n + i] =
			    dot(emb + (size_t)i * dim, emb + (size_t)j * dim,
			    dim);
		a->weight[i] = w != NULL && w[i] > 0.0f ? w[i] : 1.0;
		a->alive[i] = 1;
		a->parent[i] = i;
	}
	for (i = 0; i < n; i++)
		a->nn[i] = nearest(a, i);
	return 0;
}

/* The most similar pair of living groups as (*ret_i, nn[*ret_i]). */
static float
best_pair(const struct ahc *a, int *ret_i)
{
	float best = -FLT_MAX, s;
	int i;

	*ret_i = -1;
	for (i = 0; i < a->n; i++) {
		if (!a->alive[i] || a->nn[i] < 0)
			continue;
		s = a->sim[(size_t)i * a->n + a->nn[i]];
		if (s > best) {
			best = s;
			*ret_i = i;
		}
	}
	return best;
}

/* Group j goes into group i. */
static void
merge(struct ahc *a, int i, int j)
{
	float *ri = a->sim + (size_t)i * a->n;
	const float *rj = a->sim + (size_t)j * a->n;
	double wi = a->weight[i], wj = a->weight[j];
	int k;

	a->alive[j] = 0;
	a->weight[i] = wi + wj;
	for (k = 0; k < a->n; k++) {
		if (!a->alive[k] || k == i)
			continue;
		ri[k] = (float)((wi * ri[k] + wj * rj[k]) / (wi + wj));
		a->sim[(size_t)k * a->n + i] = ri[k];
	}
	for (k = 0; k < a->n; k++)
		if (a->parent[k] == j)
			a->parent[k] = i;
	for (k = 0; k < a->n; k++) {
		if (!a->alive[k])
			continue;
		if (k == i || a->nn[k] < 0 || a->nn[k] == i || a->nn[k] == j)
			a->nn[k] = nearest(a, k);
		else if (a->sim[(size_t)k * a->n + i] >
		    a->sim[(size_t)k * a->n + a->nn[k]])
			a->nn[k] = i;
	}
}

/* Whether to merge the best pair, of similarity s, with k groups left. */
static int
go_on(const struct cluster_params *p, int k, float s)
{
	if (k <= 1)
		return 0;
	if (p->n_clusters > 0)
		return k > p->n_clusters;
	if (p->max_clusters > 0 && k > p->max_clusters)
		return 1;
	return s >= p->threshold && k > (p->min_clusters > 1 ?
	    p->min_clusters : 1);
}

/* labels[] from the groups, numbered in order of first appearance. */
static int
number_groups(const struct ahc *a, int *labels)
{
	int i, j, k = 0;

	for (i = 0; i < a->n; i++)
		labels[i] = -1;
	for (i = 0; i < a->n; i++) {
		if (labels[i] >= 0)
			continue;
		for (j = i; j < a->n; j++)
			if (a->parent[j] == a->parent[i])
				labels[j] = k;
		k++;
	}
	return k;
}

void
cluster_params_init(struct cluster_params *p)
{
	memset(p, 0, sizeof(*p));
	p->threshold = CLUSTER_THRESHOLD;
}

int
cluster_ahc(const float *emb, const float *w, int n, int dim,
    const struct cluster_params *p, int *labels, char *err)
{
	struct ahc a;
	int i, k, rc;
	float s;

	if (n <= 0)
		return 0;
	if (n > CLUSTER_MAX_POINTS)
		return err_set(err, SOTTO_EINVAL, "%d pieces of speech to "
		    "cluster, at most %d (about %d hours of speech): label "
		    "shorter files", n, CLUSTER_MAX_POINTS,
		    CLUSTER_MAX_POINTS * 3 / 3600);
	if ((rc = ahc_init(&a, emb, w, n, dim, err)) != 0)
		return rc;
	for (k = n; ; k--) {
		s = best_pair(&a, &i);
		if (i < 0 || !go_on(p, k, s))
			break;
		merge(&a, i, a.nn[i]);
	}
	k = number_groups(&a, labels);
	ahc_free(&a);
	return k;
}

/*
 * Speaker changes inside pieces. diarize.c cuts a region of speech into
 * pieces of about 3 s at word boundaries, not where the speaker changes:
 * when two speakers' turns meet with no pause the VAD sees (an overlap,
 * or a pause Silero does not hold under its threshold for the minimum
 * silence), the piece that spans the change gives its one speaker to up
 * to half of it. So each piece that touches a piece of another speaker
 * (no gap between them: one region) is embedded again in windows of
 * EDGE_WIN_S, EDGE_HOP_S apart; each window takes whichever speaker, of
 * the piece's and its touching neighbours', has the mean embedding its
 * own is nearest (a window never makes a new speaker), and the piece is
 * cut halfway between windows whose speakers differ.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diarize.h"
#include "err.h"

#define EDGE_WIN_S	1.5	/* a window's length */
#define EDGE_HOP_S	0.5	/* the most between windows' starts */
#define EDGE_MAX_CAND	3	/* the piece's speaker and its neighbours' */
#define EDGE_LONGEST_S	30.0	/* longer: cut at no word, not looked at */

#define SEC(t)	((size_t)llround((t) * SOTTO_SAMPLE_RATE))

/* The state of one call; cent, sub and of owned. */
struct edges {
	const struct diar_piece *p;
	int n, k;
	const struct sotto_speaker *spk;
	const struct sotto_diarize_params *dp;
	float *cent;		/* [k][dim] each group's mean, unit length */
	struct diar_piece *sub;	/* the parts of the pieces cut, in order */
	int *of;		/* [n_sub] the piece each part is of */
	int n_sub, cap;
};

/* Whether pieces i and j (i < j) are neighbours with no gap. */
static int
touching(const struct edges *e, int i, int j)
{
	return i >= 0 && j < e->n && e->p[i].end >= e->p[j].start;
}

/* The speakers a window of piece i may take into c[]; how many. */
static int
candidates(const struct edges *e, int i, int *c)
{
	int m = 0;

	c[m++] = e->p[i].label;
	if (touching(e, i - 1, i) && e->p[i - 1].label != c[0])
		c[m++] = e->p[i - 1].label;
	if (touching(e, i, i + 1) && e->p[i + 1].label != c[0] &&
	    (m == 1 || e->p[i + 1].label != c[1]))
		c[m++] = e->p[i + 1].label;
	return m;
}

/* How many windows piece i is embedded in, 0 if it is not looked at. */
static int
windows_of(const struct edges *e, int i)
{
	size_t len = e->p[i].end - e->p[i].start, win = SEC(EDGE_WIN_S);
	int c[EDGE_MAX_CAND];

	if (e->k < 2 || len < win + SEC(EDGE_HOP_S) ||
	    len > SEC(EDGE_LONGEST_S) || candidates(e, i, c) < 2)
		return 0;
	return 1 + (int)ceil((double)(len - win) / SEC(EDGE_HOP_S));
}

static int
sub_add(struct edges *e, int i, size_t start, size_t end, int label,
    char *err)
{
	struct diar_piece *s;
	int *of;

	if (e->n_sub > 0 && e->of[e->n_sub - 1] == i &&
	    e->sub[e->n_sub - 1].label == label) {
		e->sub[e->n_sub - 1].end = end;
		return 0;
	}
	if (e->n_sub == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 16;
		if ((s = realloc(e->sub, e->cap * sizeof(*s))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		e->sub = s;
		if ((of = realloc(e->of, e->cap * sizeof(*of))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		e->of = of;
	}
	e->sub[e->n_sub] = (struct diar_piece){ start, end, label };
	e->of[e->n_sub++] = i;
	return 0;
}

/* Piece i's windows embedded and its parts made (a diar_piece_fn). */
static int
cut_piece(void *user, int i, const float *pcm, size_t n, char *err)
{
	struct edges *e = user;
	size_t win = SEC(EDGE_WIN_S), from, at = e->p[i].start, mid, next;
	float emb[SOTTO_SPEAKER_DIM], s, best;
	int c[EDGE_MAX_CAND], m = candidates(e, i, c);
	int nw = windows_of(e, i), w, j, label = 0, rc;

	for (w = 0; w < nw; w++) {
		from = (n - win) * w / (nw - 1);
		if ((rc = sotto_speaker_embed(e->spk, pcm + from, win, emb,
		    err)) != 0 || (rc = diarize_progress(e->dp, err)) != 0)
			return rc;
		for (j = 0, best = -INFINITY; j < m; j++) {
			s = diarize_dot(emb, e->cent + (size_t)c[j] *
			    SOTTO_SPEAKER_DIM);
			if (s > best) {
				best = s;
				label = c[j];
			}
		}
		/* this window's part ends halfway to the next's centre */
		next = (n - win) * (w + 1) / (nw - 1);
		mid = w + 1 == nw ? e->p[i].end : e->p[i].start +
		    (from + next + win) / 2;
		if ((rc = sub_add(e, i, at, mid, label, err)) != 0)
			return rc;
		at = mid;
	}
	return 0;
}

/* The group means from their sums, each of unit length. */
static int
means(struct edges *e, const float *sum, char *err)
{
	size_t j, all = (size_t)e->k * SOTTO_SPEAKER_DIM;
	int g;
	float norm;

	if ((e->cent = malloc(all * sizeof(float) + 1)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(e->cent, sum, all * sizeof(float));
	for (g = 0; g < e->k; g++) {
		float *c = e->cent + (size_t)g * SOTTO_SPEAKER_DIM;

		norm = sqrtf(diarize_dot(c, c));
		for (j = 0; norm > 0.0f && j < SOTTO_SPEAKER_DIM; j++)
			c[j] /= norm;
	}
	return 0;
}

/* The pieces with those cut replaced by their parts, into *ret. */
static int
rebuild(const struct edges *e, struct diar_piece **ret, int *ret_n,
    char *err)
{
	struct diar_piece *out;
	int i, j = 0, m = 0, cut = 0;

	for (i = 0; i < e->n_sub; i++)
		cut += i == 0 || e->of[i] != e->of[i - 1];
	if ((out = malloc((e->n - cut + e->n_sub) * sizeof(*out) + 1)) ==
	    NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < e->n; i++) {
		if (j < e->n_sub && e->of[j] == i) {
			while (j < e->n_sub && e->of[j] == i)
				out[m++] = e->sub[j++];
			continue;
		}
		out[m++] = e->p[i];
	}
	free(*ret);
	*ret = out;
	*ret_n = m;
	return 0;
}

int
diarize_edges(struct diar_piece **p, int *n, const float *sum, int k,
    const struct sotto_speaker *spk, const struct sotto_diarize_params *dp,
    const struct sotto_reader *rd, char *err)
{
	struct edges e = { *p, *n, k, spk, dp, NULL, NULL, NULL, 0, 0 };
	int *want, i, any = 0, rc;

	if (k < 2 || *n < 2)
		return 0;
	if ((want = calloc(*n > 0 ? (size_t)*n : 1, sizeof(int))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < *n; i++)
		any |= want[i] = windows_of(&e, i) > 0;
	rc = any ? means(&e, sum, err) : 0;
	if (rc == 0 && any)
		rc = diarize_stream(*p, *n, want, rd, cut_piece, &e, err);
	if (rc == 0 && e.n_sub > 0)
		rc = rebuild(&e, p, n, err);
	free(want);
	free(e.cent);
	free(e.sub);
	free(e.of);
	return rc;
}

/*
 * sotto_diarize(): who speaks when, for a transcript with word times.
 *
 * Pieces. Silero VAD finds the speech, with a short minimum silence
 * (DIARIZE_MIN_SILENCE_MS) so that the pause between two speakers' turns
 * ends a region; a region too short to embed well joins a near neighbour
 * (join_short()); a region longer than DIARIZE_PIECE_S is cut, at the word
 * boundaries nearest to equal parts, into pieces of about that length:
 * long enough for a sure embedding (docs/speakers.md: 1.5-3 s separate
 * the readers), short enough that a change of speaker without a pause
 * spoils few words.
 *
 * Speakers. The audio is read once more and each piece of at least
 * DIARIZE_EMBED_S embedded as it passes. Pieces of DIARIZE_CLUSTER_S or
 * more are clustered (speaker/cluster.c), weighted by their length; a
 * shorter embedded piece joins the group whose mean embedding it is
 * nearest; a piece too short to embed takes the speaker of the nearest
 * piece in time. diarize-edge.c then looks for a change of speaker
 * inside the pieces at a change with no pause, and diarize-label.c
 * labels the words and segments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diarize.h"
#include "err.h"
#include "speaker.h"
#include "transcribe.h"

#define DIARIZE_PIECE_S		3.0	/* longest piece, about */
#define DIARIZE_EMBED_S		0.5	/* shortest piece embedded */
#define DIARIZE_CLUSTER_S	1.0	/* shortest piece clustered */
#define DIARIZE_MIN_SILENCE_MS	100	/* a pause that ends a region */
#define DIARIZE_PAD_MS		30	/* audio kept around speech */
#define DIARIZE_JOIN_S		0.3	/* a short region joins one this near */
#define READ_BLOCK		(64 * 1024)

#define SEC(t)	((size_t)llround((t) * SOTTO_SAMPLE_RATE))

/* The pieces of one call; owned arrays. */
struct diar {
	struct diar_piece *p;
	int n, cap;
	float *emb;		/* [n][SOTTO_SPEAKER_DIM] */
	int *embedded;		/* [n] 1 if emb[i] is set */
	size_t *bounds;		/* word ends, samples, in time order */
	int n_bounds;
	float *cent;		/* [k][SOTTO_SPEAKER_DIM] each group's sum */
};

void
sotto_diarize_params_init(struct sotto_diarize_params *p)
{
	memset(p, 0, sizeof(*p));
	p->threshold = CLUSTER_THRESHOLD;
}

static void
diar_free(struct diar *d)
{
	free(d->p);
	free(d->emb);
	free(d->embedded);
	free(d->bounds);
	free(d->cent);
}

static int
piece_add(struct diar *d, size_t start, size_t end, char *err)
{
	struct diar_piece *p;

	if (end <= start)
		return 0;
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 64;
		if ((p = realloc(d->p, d->cap * sizeof(*p))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		d->p = p;
	}
	d->p[d->n].start = start;
	d->p[d->n].end = end;
	d->p[d->n].label = -1;
	d->n++;
	return 0;
}

/* The words' ends as cut points; SOTTO_EINVAL if res has no words. */
static int
word_bounds(struct diar *d, const struct sotto_result *res, char *err)
{
	int i, j, n = 0;

	for (i = 0; i < res->n_segments; i++)
		n += res->segments[i].n_words;
	if (n == 0) {
		for (i = 0; i < res->n_segments && res->segments[i].words ==
		    NULL; i++)
			;
		return i < res->n_segments || res->n_segments == 0 ? 0 :
		    err_set(err, SOTTO_EINVAL, "speaker labels need word "
		    "timestamps: transcribe with word_timestamps");
	}
	if ((d->bounds = malloc(n * sizeof(size_t))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < res->n_segments; i++)
		for (j = 0; j < res->segments[i].n_words; j++)
			d->bounds[d->n_bounds++] =
			    SEC(res->segments[i].words[j].end);
	return 0;
}

/* The word boundary in (lo, hi) nearest to t, or t if there is none. */
static size_t
nearest_bound(const struct diar *d, size_t lo, size_t hi, size_t t)
{
	size_t best = t, dist = (size_t)-1, x;
	int i;

	for (i = 0; i < d->n_bounds; i++) {
		x = d->bounds[i];
		if (x <= lo || x >= hi)
			continue;
		if ((x > t ? x - t : t - x) < dist) {
			dist = x > t ? x - t : t - x;
			best = x;
		}
	}
	return best;
}

/* A region of speech [a, b) as pieces of about DIARIZE_PIECE_S. */
static int
region_pieces(struct diar *d, size_t a, size_t b, char *err)
{
	size_t len = b - a, cut, from = a, margin = SEC(DIARIZE_EMBED_S);
	int k, parts = (int)ceil((double)len / SEC(DIARIZE_PIECE_S));
	int rc;

	for (k = 1; k < parts; k++) {
		cut = nearest_bound(d, from + margin, b - margin,
		    a + len * k / parts);
		if (cut <= from || cut >= b)
			continue;
		if ((rc = piece_add(d, from, cut, err)) != 0)
			return rc;
		from = cut;
	}
	return piece_add(d, from, b, err);
}

/*
 * A region too short to cluster joins the next one when the pause between
 * them is under DIARIZE_JOIN_S and the two fit in a piece: a word or two
 * between short pauses ("Ask, not!") alone embeds unreliably, and such a
 * pause is seldom where one speaker hands over to another. Returns the
 * regions left.
 */
static size_t
join_short(struct sotto_vad_span *s, size_t n)
{
	size_t i, m = 0;

	for (i = 0; i < n; i++) {
		if (m > 0 && s[i].start - s[m - 1].end < SEC(DIARIZE_JOIN_S) &&
		    s[i].end - s[m - 1].start <= SEC(DIARIZE_PIECE_S) &&
		    (s[i].end - s[i].start < SEC(DIARIZE_CLUSTER_S) ||
		    s[m - 1].end - s[m - 1].start < SEC(DIARIZE_CLUSTER_S))) {
			s[m - 1].end = s[i].end;
			continue;
		}
		s[m++] = s[i];
	}
	return m;
}

/* Pass 1: the speech regions (the words' extent if the VAD heard none). */
static int
make_pieces(struct diar *d, const struct sotto_vad *v,
    const struct sotto_reader *rd, const struct sotto_result *res,
    char *err)
{
	struct sotto_vad_params vp;
	struct sotto_vad_span *spans = NULL;
	float *probs = NULL;
	size_t np, n, n_spans = 0, i;
	int rc;

	sotto_vad_params_init(&vp);
	vp.min_silence_ms = DIARIZE_MIN_SILENCE_MS;
	vp.speech_pad_ms = DIARIZE_PAD_MS;
	if ((rc = rd->rewind(rd->user, err)) != 0 ||
	    (rc = transcribe_vad_probs(v, rd, &probs, &np, &n, err)) != 0 ||
	    (rc = sotto_vad_speech(probs, np, n, &vp, &spans, &n_spans,
	    err)) != 0)
		goto out;
	n_spans = join_short(spans, n_spans);
	for (i = 0; i < n_spans && rc == 0; i++)
		rc = region_pieces(d, spans[i].start, spans[i].end, err);
	if (rc == 0 && d->n == 0 && d->n_bounds > 0 && res->n_segments > 0)
		rc = region_pieces(d, SEC(res->segments[0].start),
		    d->bounds[d->n_bounds - 1], err);
out:
	free(probs);
	free(spans);
	return rc;
}

/* The samples of piece i within block [pos, pos + got) into buf. */
static void
gather(const struct diar_piece *p, const float *block, size_t pos,
    size_t got, float *buf)
{
	size_t a = p->start > pos ? p->start : pos;
	size_t b = p->end < pos + got ? p->end : pos + got;

	if (b > a)
		memcpy(buf + (a - p->start), block + (a - pos),
		    (b - a) * sizeof(float));
}

int
diarize_stream(const struct diar_piece *p, int n, const int *want,
    const struct sotto_reader *rd, diar_piece_fn fn, void *user, char *err)
{
	float *block = malloc(READ_BLOCK * sizeof(float)), *buf = NULL;
	size_t pos = 0, longest = 1;
	long got = 1;
	int i, cur = 0, rc = 0;

	for (i = 0; i < n; i++)
		if (want[i] && p[i].end - p[i].start > longest)
			longest = p[i].end - p[i].start;
	buf = calloc(longest, sizeof(float));
	if (block == NULL || buf == NULL)
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
	while (rc == 0 && cur < n && got > 0) {
		if ((got = rd->read(rd->user, block, READ_BLOCK, err)) < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0)	/* shorter than at pass 1: not embedded */
			break;
		for (; cur < n && rc == 0; cur++) {
			if (!want[cur])
				continue;
			gather(&p[cur], block, pos, (size_t)got, buf);
			if (p[cur].end > pos + (size_t)got)
				break;	/* the rest of it in the next block */
			rc = fn(user, cur, buf, p[cur].end - p[cur].start, err);
		}
		pos += (size_t)got;
	}
	free(block);
	free(buf);
	return rc != 0 ? rc : rd->rewind(rd->user, err);
}

static int
embeddable(const struct diar_piece *p)
{
	return p->end - p->start >= SEC(DIARIZE_EMBED_S) &&
	    p->end - p->start <= (size_t)SOTTO_SPEAKER_MAX_S *
	    SOTTO_SAMPLE_RATE;
}

int
diarize_progress(const struct sotto_diarize_params *dp, char *err)
{
	if (dp->progress != NULL && dp->progress(dp->progress_user) != 0)
		return err_set(err, SOTTO_ECANCELED, "speaker labels: "
		    "canceled");
	return 0;
}

/* The embedding of one piece's audio (a diar_piece_fn). */
struct embed_one {
	struct diar *d;
	const struct sotto_speaker *spk;
	const struct sotto_diarize_params *dp;
};

static int
embed_one(void *user, int i, const float *pcm, size_t n, char *err)
{
	struct embed_one *e = user;
	int rc = sotto_speaker_embed(e->spk, pcm, n, e->d->emb +
	    (size_t)i * SOTTO_SPEAKER_DIM, err);

	e->d->embedded[i] = rc == 0;
	return rc != 0 ? rc : diarize_progress(e->dp, err);
}

/* Pass 2: each embeddable piece embedded as its audio passes. */
static int
embed_pieces(struct diar *d, const struct sotto_speaker *spk,
    const struct sotto_diarize_params *dp, const struct sotto_reader *rd,
    char *err)
{
	struct embed_one e = { d, spk, dp };
	int *want = calloc(d->n ? d->n : 1, sizeof(int)), i, rc;

	d->emb = malloc((size_t)(d->n ? d->n : 1) * SOTTO_SPEAKER_DIM *
	    sizeof(float));
	d->embedded = calloc(d->n ? d->n : 1, sizeof(int));
	if (want == NULL || d->emb == NULL || d->embedded == NULL) {
		free(want);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	for (i = 0; i < d->n; i++)
		want[i] = embeddable(&d->p[i]);
	rc = diarize_stream(d->p, d->n, want, rd, embed_one, &e, err);
	free(want);
	return rc;
}

float
diarize_dot(const float *x, const float *y)
{
	float s = 0.0f;
	int i;

	for (i = 0; i < SOTTO_SPEAKER_DIM; i++)
		s += x[i] * y[i];
	return s;
}

/* Whether piece i goes into the clustering (min_s: shortest length). */
static int
clustered(const struct diar *d, int i, double min_s)
{
	return d->embedded[i] && d->p[i].end - d->p[i].start >= SEC(min_s);
}

/* Cluster the long pieces (all embedded ones if none is long). */
static int
cluster_pieces(struct diar *d, const struct sotto_diarize_params *dp,
    char *err)
{
	struct cluster_params cp;
	double min_s = DIARIZE_CLUSTER_S;
	float *emb, *w;
	int *idx, *labels, i, m = 0, rc;

	for (i = 0; i < d->n; i++)
		m += clustered(d, i, min_s);
	if (m == 0)
		min_s = 0.0;
	emb = malloc((size_t)d->n * SOTTO_SPEAKER_DIM * sizeof(float) + 1);
	w = malloc(d->n * sizeof(float) + 1);
	idx = malloc(d->n * sizeof(int) + 1);
	labels = malloc(d->n * sizeof(int) + 1);
	if (emb == NULL || w == NULL || idx == NULL || labels == NULL) {
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0, m = 0; i < d->n; i++) {
		if (!clustered(d, i, min_s))
			continue;
		memcpy(emb + (size_t)m * SOTTO_SPEAKER_DIM, d->emb +
		    (size_t)i * SOTTO_SPEAKER_DIM, SOTTO_SPEAKER_DIM *
		    sizeof(float));
		w[m] = (float)(d->p[i].end - d->p[i].start) /
		    SOTTO_SAMPLE_RATE;
		idx[m++] = i;
	}
	cluster_params_init(&cp);
	cp.n_clusters = dp->n_speakers;
	cp.min_clusters = dp->min_speakers;
	cp.max_clusters = dp->max_speakers;
	cp.threshold = dp->threshold;
	rc = cluster_ahc(emb, w, m, SOTTO_SPEAKER_DIM, &cp, labels, err);
	for (i = 0; rc >= 0 && i < m; i++)
		d->p[idx[i]].label = labels[i];
out:
	free(emb);
	free(w);
	free(idx);
	free(labels);
	return rc;
}

/*
 * Embedded pieces left out of the clustering join the group whose mean
 * embedding is nearest. k: the groups, whose embeddings summed (each
 * piece's weighed by its length) are kept in d->cent.
 */
static int
join_nearest(struct diar *d, int k, char *err)
{
	float *c = calloc((size_t)(k ? k : 1) * SOTTO_SPEAKER_DIM,
	    sizeof(float)), best, s;
	int i, j;

	if (c == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < d->n; i++)
		for (j = 0; d->p[i].label >= 0 && j < SOTTO_SPEAKER_DIM; j++)
			c[(size_t)d->p[i].label * SOTTO_SPEAKER_DIM + j] +=
			    d->emb[(size_t)i * SOTTO_SPEAKER_DIM + j] *
			    (float)(d->p[i].end - d->p[i].start);
	for (i = 0; i < d->n; i++) {
		if (d->p[i].label >= 0 || !d->embedded[i])
			continue;
		for (j = 0, best = -INFINITY; j < k; j++) {
			s = diarize_dot(d->emb + (size_t)i * SOTTO_SPEAKER_DIM,
			    c + (size_t)j * SOTTO_SPEAKER_DIM);
			if (s > best) {
				best = s;
				d->p[i].label = j;
			}
		}
	}
	d->cent = c;
	return 0;
}

/* Pieces still without a speaker take the nearest labelled piece's. */
static void
fill_gaps(struct diar *d)
{
	int i, j, best;
	size_t gap, dist;

	for (i = 0; i < d->n; i++) {
		if (d->p[i].label >= 0)
			continue;
		for (j = 0, best = -1, dist = (size_t)-1; j < d->n; j++) {
			if (d->p[j].label < 0 || j == i)
				continue;
			gap = d->p[j].end <= d->p[i].start ? d->p[i].start -
			    d->p[j].end : d->p[j].start >= d->p[i].end ?
			    d->p[j].start - d->p[i].end : 0;
			if (gap < dist) {
				dist = gap;
				best = j;
			}
		}
		d->p[i].label = best >= 0 ? d->p[best].label : 0;
	}
}

/* After a failure: no labels rather than some. */
static void
unlabel(struct sotto_result *res)
{
	int i, j;

	for (i = 0; i < res->n_segments; i++) {
		res->segments[i].speaker = 0;
		for (j = 0; j < res->segments[i].n_words; j++)
			res->segments[i].words[j].speaker = 0;
	}
}

static int
check_params(const struct sotto_diarize_params *p, char *err)
{
	if (p->n_speakers < 0 || p->min_speakers < 0 || p->max_speakers < 0)
		return err_set(err, SOTTO_EINVAL, "speakers: a count cannot "
		    "be negative");
	if (p->max_speakers > 0 && p->min_speakers > p->max_speakers)
		return err_set(err, SOTTO_EINVAL, "speakers: at least %d and "
		    "at most %d cannot both hold", p->min_speakers,
		    p->max_speakers);
	if (!(p->threshold >= -1.0f && p->threshold <= 1.0f))
		return err_set(err, SOTTO_EINVAL, "speakers: the threshold is "
		    "a cosine, from -1 to 1");
	return 0;
}

int
sotto_diarize(const struct sotto_speaker *spk, const struct sotto_vad *v,
    const struct sotto_diarize_params *dp, const struct sotto_reader *rd,
    struct sotto_result *res, char *err)
{
	struct sotto_diarize_params defaults;
	struct diar d = { 0 };
	int rc, k;

	if (spk == NULL || v == NULL || rd == NULL || res == NULL)
		return err_set(err, SOTTO_EINVAL, "speaker labels need the "
		    "speaker and VAD models, the audio and its transcript");
	if (dp == NULL) {
		sotto_diarize_params_init(&defaults);
		dp = &defaults;
	}
	if ((rc = check_params(dp, err)) != 0)
		return rc;
	if ((rc = word_bounds(&d, res, err)) != 0 ||
	    (rc = make_pieces(&d, v, rd, res, err)) != 0 ||
	    (rc = embed_pieces(&d, spk, dp, rd, err)) != 0)
		goto out;
	if ((k = cluster_pieces(&d, dp, err)) < 0) {
		rc = k;
		goto out;
	}
	if ((rc = join_nearest(&d, k, err)) != 0)
		goto out;
	fill_gaps(&d);
	if ((rc = diarize_edges(&d.p, &d.n, d.cent, k, spk, dp, rd,
	    err)) != 0)
		goto out;
	rc = diarize_label(res, d.p, d.n, err);
out:
	if (rc != 0)
		unlabel(res);
	diar_free(&d);
	return rc;
}

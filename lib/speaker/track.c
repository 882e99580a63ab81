/*
 * Live speaker labels (sotto_speaker_track_*): each final of a stream is
 * given a speaker as it comes, and never another one later.
 *
 * Why online and not the files' clustering: a label must go out with its
 * final (docs/protocol.md), and labels once sent cannot be renumbered, so
 * the speakers are decided one piece at a time against what came before:
 * the running centroid of each speaker seen so far (the sum of its
 * pieces' embeddings, each weighing its seconds, so a long piece counts
 * for more). The figures behind the rules (docs/speakers.md, "What the
 * scores look like"): one reader's 1.5 s pieces score 0.70 or more at the
 * 1st percentile but as low as 0.33, two readers' 0.32 at most; on 3 s
 * pieces one reader's score 0.68 or more. A centroid, the mean of many
 * pieces, is surer than one piece. So a piece of at least 1 s:
 *
 * - joins the nearest speaker at a cosine of threshold (0.5) or more,
 *   and moves its centroid;
 * - starts a new speaker under TRACK_NEW (0.3), or under the threshold
 *   when it is TRACK_SURE_S (3 s) or longer;
 * - in between (a short piece that is neither clearly one speaker nor
 *   clearly another: live finals of a noisy recording are often 1-2 s)
 *   takes the nearest speaker and moves nothing. A wrong new speaker
 *   would stay for the whole session; a wrong nearest one is one final.
 *
 * What is embedded: the final's audio, and for a final under
 * TRACK_CONTEXT_S (2 s) the finals just before it with it, back to 2 s,
 * as long as no pause of TRACK_PAUSE_S (0.3 s) separates them: one
 * voice's words run on, a turn mostly starts after a pause. A turn's
 * first final has nothing before it, so it takes the speech after it
 * (the caller knows the next final or the partial), or its first words
 * would take a known speaker's label. Live finals
 * are often a word or three (0.4-1.5 s); alone, a noisy recording's
 * pieces of 1 s scored 0.25-0.45 with their own speaker (jfk.wav), with
 * the run before them 0.65-0.77. A turn that starts without a pause
 * makes its first final's embedding a mix, which lands in the band
 * above (the nearest, nothing moved) rather than starting a speaker.
 *
 * A piece's length in the rules is the length of what was embedded:
 * a short final with the run before it is as sure as the run is long.
 * Under TRACK_LONG_S (1 s) a piece embeds unreliably: it takes the
 * nearest speaker and changes nothing, so a word or two ("Yes.") alone
 * can neither start a speaker of its own nor pull a centroid away. The
 * first piece of a stream starts S1 whatever its length; when it is
 * short S1 has no centroid yet, and the first piece of 1 s or more
 * gives it one.
 *
 * The audio: a final is committed up to a 30 s window (and a catch-up)
 * after it was spoken, so the last TRACK_KEEP_S seconds are kept here,
 * fed the same samples as the stream; a final's audio that is no longer
 * kept is cut to what is.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "speaker.h"

#define TRACK_KEEP_S	45	/* audio kept: a window, a catch-up, margin */
#define TRACK_LONG_S	1.0	/* a piece this long may start a speaker */
#define TRACK_SURE_S	3.0	/* ... under the threshold, not only TRACK_NEW */
#define TRACK_NEW	0.3f	/* under it, surely another speaker */
#define TRACK_CONTEXT_S	2.0	/* a shorter piece: embedded with the finals
				   just before it to this length */
#define TRACK_PAUSE_S	0.3	/* a pause this long may be a new turn */
#define TRACK_SHORT_S	0.5	/* shorter and alone: widened to this */
#define TRACK_MAX_S	10.0	/* a longer piece: its middle 10 s */

/* Ownership: everything owned; the model is borrowed. */
struct sotto_speaker_track {
	const struct sotto_speaker *spk;
	struct track_state st;
	float *pcm;			/* kept audio, from sample base on */
	size_t n, cap;			/* cap: 2 x TRACK_KEEP_S */
	uint64_t base;			/* stream sample index of pcm[0] */
	double run_start, last_end;	/* the finals without a pause so far
					   (seconds): where they began, and
					   the last one's end */
};

void
track_init(struct track_state *t, float threshold)
{
	memset(t, 0, sizeof(*t));
	t->threshold = threshold > 0 ? threshold : TRACK_THRESHOLD;
}

void
track_clear(struct track_state *t)
{
	free(t->sum);
	free(t->weight);
	t->sum = NULL;
	t->weight = NULL;
	t->n = 0;
}

/* The cosine of emb with speaker k's centroid (sum scaled to length 1). */
static float
track_cosine(const struct track_state *t, int k, const float *emb)
{
	const float *c = t->sum + (size_t)k * SPK_DIM;
	double dot = 0, norm = 0;
	int i;

	for (i = 0; i < SPK_DIM; i++) {
		dot += (double)c[i] * emb[i];
		norm += (double)c[i] * c[i];
	}
	return norm > 0 ? (float)(dot / sqrt(norm)) : 0.0f;
}

static int
track_add(struct track_state *t, const float *emb, double w, char *err)
{
	float *sum;
	double *weight;
	int i;

	if ((sum = realloc(t->sum, (size_t)(t->n + 1) * SPK_DIM *
	    sizeof(*sum))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	t->sum = sum;
	if ((weight = realloc(t->weight, (size_t)(t->n + 1) *
	    sizeof(*weight))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	t->weight = weight;
	for (i = 0; i < SPK_DIM; i++)
		t->sum[(size_t)t->n * SPK_DIM + i] = (float)w * emb[i];
	t->weight[t->n] = w;
	return ++t->n;
}

/* Speaker k (0-based) takes the piece: its centroid moves. */
static int
track_join(struct track_state *t, int k, const float *emb, double w)
{
	int i;

	for (i = 0; i < SPK_DIM; i++)
		t->sum[(size_t)k * SPK_DIM + i] += (float)w * emb[i];
	t->weight[k] += w;
	return k + 1;
}

int
track_decide(struct track_state *t, const float *emb, double seconds,
    float *ret_cos, char *err)
{
	float best = -2.0f, c;
	int k, at = -1;

	for (k = 0; k < t->n; k++)
		if (t->weight[k] > 0 && (c = track_cosine(t, k, emb)) > best) {
			best = c;
			at = k;
		}
	if (ret_cos != NULL)
		*ret_cos = best;
	if (t->n == 0)		/* the first piece: S1, a centroid if long */
		return track_add(t, emb, seconds < TRACK_LONG_S ? 0 : seconds,
		    err);
	if (seconds < TRACK_LONG_S)
		return at >= 0 ? at + 1 : 1;
	if (at < 0)		/* S1 began short: this is its centroid */
		return track_join(t, 0, emb, seconds);
	if (best >= t->threshold)
		return track_join(t, at, emb, seconds);
	if (best < TRACK_NEW || seconds >= TRACK_SURE_S)
		return track_add(t, emb, seconds, err);
	return at + 1;
}

int
sotto_speaker_track_new(const struct sotto_speaker *spk, float threshold,
    struct sotto_speaker_track **ret, char *err)
{
	struct sotto_speaker_track *tr;

	*ret = NULL;
	if (spk == NULL)
		return err_set(err, SOTTO_EINVAL, "speaker track: no model");
	if (threshold < 0 || threshold >= 1)
		return err_set(err, SOTTO_EINVAL, "speaker track: threshold "
		    "%g: use a cosine in (0, 1), or 0 for %.2f", threshold,
		    TRACK_THRESHOLD);
	if ((tr = calloc(1, sizeof(*tr))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	tr->spk = spk;
	tr->last_end = -1e9;
	track_init(&tr->st, threshold);
	tr->cap = (size_t)2 * TRACK_KEEP_S * SOTTO_SAMPLE_RATE;
	if ((tr->pcm = malloc(tr->cap * sizeof(float))) == NULL) {
		free(tr);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	*ret = tr;
	return 0;
}

void
sotto_speaker_track_free(struct sotto_speaker_track *tr)
{
	if (tr == NULL)
		return;
	track_clear(&tr->st);
	free(tr->pcm);
	free(tr);
}

/* Keep the last TRACK_KEEP_S s once the buffer is full (or pcm[m] is
   more than it holds: then only its tail). */
int
sotto_speaker_track_push(struct sotto_speaker_track *tr, const float *pcm,
    size_t m, char *err)
{
	size_t keep = (size_t)TRACK_KEEP_S * SOTTO_SAMPLE_RATE, drop;

	if (m > 0 && pcm == NULL)
		return err_set(err, SOTTO_EINVAL, "speaker track: no samples");
	if (m > keep) {
		tr->base += tr->n + (m - keep);
		tr->n = 0;
		pcm += m - keep;
		m = keep;
	}
	if (tr->n + m > tr->cap) {
		drop = tr->n + m - keep;	/* n + m - drop == keep */
		memmove(tr->pcm, tr->pcm + drop, (tr->n - drop) *
		    sizeof(float));
		tr->n -= drop;
		tr->base += drop;
	}
	memcpy(tr->pcm + tr->n, pcm, m * sizeof(float));
	tr->n += m;
	return 0;
}

/* Sample index (stream) of t seconds, within [lo, hi]. */
static uint64_t
track_sample(double t, uint64_t lo, uint64_t hi)
{
	double s = t * SOTTO_SAMPLE_RATE;

	if (s <= (double)lo)
		return lo;
	if (s >= (double)hi)
		return hi;
	return (uint64_t)s;
}

/*
 * The samples [*a, *b) embedded for the final from start to end, with
 * the speech known to follow it from next_start to next_end (none when
 * next_end <= next_start): a short final is embedded with the finals
 * just before it (no pause between them: most likely the same voice),
 * to TRACK_CONTEXT_S; one that begins a run has none before it, and
 * takes the speech after it instead when that follows without a pause
 * (a turn's first words, the rest of the turn); one still under
 * TRACK_SHORT_S is widened around its middle.
 */
static void
track_span(struct sotto_speaker_track *tr, double start, double end,
    double next_start, double next_end, uint64_t *ret_a, uint64_t *ret_b)
{
	uint64_t lo = tr->base, hi = tr->base + tr->n, a, b, mid, half, ctx;
	uint64_t run;

	a = track_sample(start, lo, hi);
	b = track_sample(end, lo, hi);
	if (start - tr->last_end >= TRACK_PAUSE_S)
		tr->run_start = start;
	tr->last_end = end;
	ctx = (uint64_t)(TRACK_CONTEXT_S * SOTTO_SAMPLE_RATE);
	if (b - a < ctx) {
		run = track_sample(tr->run_start, lo, hi);
		a = b - run > ctx ? b - ctx : run;
	}
	if (tr->run_start == start && b - a < ctx && next_end > next_start &&
	    next_end > end && next_start - end < TRACK_PAUSE_S) {
		run = track_sample(next_end, lo, hi);
		b = run - a > ctx ? a + ctx : run;
	}
	half = (uint64_t)(TRACK_SHORT_S * SOTTO_SAMPLE_RATE / 2);
	if (b - a < 2 * half) {
		mid = a + (b - a) / 2;
		a = mid - lo > half ? mid - half : lo;
		b = hi - mid > half ? mid + half : hi;
	}
	half = (uint64_t)(TRACK_MAX_S * SOTTO_SAMPLE_RATE / 2);
	if (b - a > 2 * half) {
		mid = a + (b - a) / 2;
		a = mid - half;
		b = mid + half;
	}
	*ret_a = a;
	*ret_b = b;
}

int
sotto_speaker_track_label(struct sotto_speaker_track *tr, double start,
    double end, double next_start, double next_end, int *speaker,
    char *err)
{
	uint64_t a, b;
	float emb[SPK_DIM];
	double seconds, heard;
	int rc;

	*speaker = 0;
	if (!(end >= start))
		return err_set(err, SOTTO_EINVAL, "speaker track: a piece "
		    "from %.2f s to %.2f s", start, end);
	seconds = (double)(track_sample(end, tr->base, tr->base + tr->n) -
	    track_sample(start, tr->base, tr->base + tr->n)) /
	    SOTTO_SAMPLE_RATE;
	track_span(tr, start, end, next_start, next_end, &a, &b);
	if (b - a < SPK_FRAME + 2 * SPK_SHIFT)
		return err_set(err, SOTTO_EINVAL, "speaker track: the audio "
		    "from %.2f s to %.2f s is no longer kept", start, end);
	if ((rc = sotto_speaker_embed(tr->spk, tr->pcm + (a - tr->base),
	    b - a, emb, err)) != 0)
		return rc;
	/* how sure the embedding is follows what it heard: a short final
	   with its run is judged as long as they are */
	heard = (double)(b - a) / SOTTO_SAMPLE_RATE;
	if ((rc = track_decide(&tr->st, emb, seconds > heard ? seconds : heard,
	    NULL, err)) < 0)
		return rc;
	*speaker = rc;
	return 0;
}

int
sotto_speaker_track_count(const struct sotto_speaker_track *tr)
{
	return tr->st.n;
}

/*
 * sotto_transcribe_vad(): faster-whisper's vad_filter. The audio is read
 * once for the Silero VAD probabilities (faster-whisper pads it with
 * zeros to the next multiple of 512, a whole chunk when it is one
 * already: so here), the speech regions become one audio (a reader that
 * skips the rest), sotto_transcribe_reader() transcribes it (reading it
 * twice, as ever), and each segment's times are mapped back to the
 * original audio as faster-whisper's SpeechTimestampsMap maps them: a
 * time in the joined audio belongs to the region whose joined end is the
 * first after it (an end exactly at a region's end stays in that region)
 * and moves by the silence removed before that region, rounded to 10 ms.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "transcribe.h"
#include "vad.h"

#define READ_BLOCK	(64 * SOTTO_VAD_CHUNK)

/* The joined audio: only the samples inside spans[]. */
struct vad_join {
	const struct sotto_reader *src;
	const struct sotto_vad_span *spans;
	size_t n_spans;
	size_t *joined_end;		/* [n_spans] end in the joined audio */
	size_t *removed;		/* [n_spans] samples skipped before */
	size_t pos, span;		/* next original sample, its span */
	/* the caller's progress callback, its segments mapped */
	sotto_progress_fn progress;
	void *progress_user;
	size_t total;
	struct sotto_segment *mapped;
	int cap_mapped;
};

int
transcribe_vad_probs(const struct sotto_vad *v, const struct sotto_reader *rd,
    float **ret, size_t *ret_np, size_t *ret_n, char *err)
{
	struct sotto_vad_state *st = sotto_vad_state_new(v);
	float *buf = malloc(READ_BLOCK * sizeof(float)), *probs = NULL, *p;
	size_t fill = 0, np = 0, cap = 0, n = 0;
	long got = 1;
	int rc = 0;

	if (st == NULL || buf == NULL)
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
	while (rc == 0 && got > 0) {
		if ((got = rd->read(rd->user, buf + fill, READ_BLOCK - fill,
		    err)) < 0) {
			rc = (int)got;
			break;
		}
		n += (size_t)got;
		fill += (size_t)got;
		if (got > 0 && fill < READ_BLOCK)
			continue;
		if (got == 0) {		/* the end: pad, a whole chunk if need be */
			memset(buf + fill, 0, (READ_BLOCK - fill) * sizeof(float));
			fill = (fill / SOTTO_VAD_CHUNK + 1) * SOTTO_VAD_CHUNK;
		}
		if (np + fill / SOTTO_VAD_CHUNK > cap) {
			cap = 2 * cap + READ_BLOCK / SOTTO_VAD_CHUNK;
			if ((p = realloc(probs, cap * sizeof(float))) == NULL) {
				rc = err_set(err, SOTTO_ENOMEM, "out of memory");
				break;
			}
			probs = p;
		}
		np += sotto_vad_probs(st, buf, fill, probs + np);
		fill = 0;
	}
	free(buf);
	sotto_vad_state_free(st);
	if (rc != 0) {
		free(probs);
		return rc;
	}
	*ret = probs;
	*ret_np = np;
	*ret_n = n;
	return rd->rewind(rd->user, err);
}

static long
join_read(void *user, float *buf, size_t max, char *err)
{
	struct vad_join *j = user;
	const struct sotto_vad_span *sp;
	size_t want;
	long got;

	while (j->span < j->n_spans) {
		sp = &j->spans[j->span];
		if (j->pos >= sp->end) {
			j->span++;
			continue;
		}
		want = j->pos < sp->start ? sp->start - j->pos : sp->end - j->pos;
		if (want > max)
			want = max;
		if ((got = j->src->read(j->src->user, buf, want, err)) <= 0)
			return got;	/* shorter than the first read: end */
		j->pos += (size_t)got;
		if (j->pos - (size_t)got >= sp->start)
			return got;
	}
	return 0;
}

static int
join_rewind(void *user, char *err)
{
	struct vad_join *j = user;

	j->pos = j->span = 0;
	return j->src->rewind(j->src->user, err);
}

/* The region a joined sample belongs to (faster-whisper's rule). */
static size_t
region_of(const struct vad_join *j, size_t sample, int is_end)
{
	size_t lo = 0, hi = j->n_spans, mid;

	if (is_end)
		for (mid = 0; mid < j->n_spans; mid++)
			if (j->joined_end[mid] == sample)
				return mid;
	while (lo < hi) {		/* first joined_end > sample */
		mid = (lo + hi) / 2;
		if (j->joined_end[mid] <= sample)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < j->n_spans ? lo : j->n_spans - 1;
}

/* Joined time t in region r moved back to the original audio. */
static double
shift(const struct vad_join *j, double t, size_t r)
{
	return round(((double)j->removed[r] / SOTTO_SAMPLE_RATE + t) *
	    100.0) / 100.0;
}

static double
original_time(const struct vad_join *j, double t, int is_end)
{
	if (j->n_spans == 0)
		return t;
	return shift(j, t, region_of(j, (size_t)(t * SOTTO_SAMPLE_RATE),
	    is_end));
}

/*
 * A segment's times; with words, each word goes back with the region of
 * its middle (both ends alike) and the segment spans its words, as
 * faster-whisper's restore_speech_timestamps().
 */
static void
map_segment(const struct vad_join *j, struct sotto_segment *s)
{
	struct sotto_word *w;
	size_t r;
	int i;

	if (s->n_words == 0 || j->n_spans == 0) {
		s->start = original_time(j, s->start, 0);
		s->end = original_time(j, s->end, 1);
		return;
	}
	for (i = 0; i < s->n_words; i++) {
		w = &s->words[i];
		r = region_of(j, (size_t)((w->start + w->end) / 2 *
		    SOTTO_SAMPLE_RATE), 0);
		w->start = shift(j, w->start, r);
		w->end = shift(j, w->end, r);
	}
	s->start = s->words[0].start;
	s->end = s->words[s->n_words - 1].end;
}

static int
join_progress(void *user, size_t done, size_t total,
    const struct sotto_segment *segs, int n)
{
	struct vad_join *j = user;
	struct sotto_segment *p;
	size_t r;
	int i;

	if (n > j->cap_mapped) {
		if ((p = realloc(j->mapped, n * sizeof(*p))) == NULL)
			return 1;
		j->mapped = p;
		j->cap_mapped = n;
	}
	for (i = 0; i < n; i++) {
		j->mapped[i] = segs[i];
		/* the words are the result's own, mapped once at the end */
		j->mapped[i].words = NULL;
		j->mapped[i].n_words = 0;
		map_segment(j, &j->mapped[i]);
		segment_clamp(&j->mapped[i], (double)j->total /
		    SOTTO_SAMPLE_RATE);
	}
	/* the speech's end is not the file's: all of the speech is all of it */
	if (done >= total)
		done = j->total;
	else if (j->n_spans > 0) {
		r = region_of(j, done, 1);
		done = done + j->removed[r] < j->total ? done + j->removed[r] :
		    j->total;
	}
	return j->progress(j->progress_user, done, j->total, j->mapped, n);
}

static int
join_init(struct vad_join *j, const struct sotto_reader *src,
    const struct sotto_vad_span *spans, size_t n_spans, char *err)
{
	size_t i, at = 0, prev = 0, gone = 0;

	memset(j, 0, sizeof(*j));
	j->src = src;
	j->spans = spans;
	j->n_spans = n_spans;
	if (n_spans == 0)
		return 0;
	j->joined_end = malloc(n_spans * sizeof(size_t));
	j->removed = malloc(n_spans * sizeof(size_t));
	if (j->joined_end == NULL || j->removed == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < n_spans; i++) {
		gone += spans[i].start - prev;
		prev = spans[i].end;
		at += spans[i].end - spans[i].start;
		j->joined_end[i] = at;
		j->removed[i] = gone;
	}
	return 0;
}

static void
join_free(struct vad_join *j)
{
	free(j->joined_end);
	free(j->removed);
	free(j->mapped);
}

int
sotto_transcribe_vad(struct sotto_state *st, const struct sotto_vad *v,
    const struct sotto_vad_params *vp, const struct sotto_reader *rd,
    const struct sotto_transcribe_params *tp, struct sotto_result **ret,
    size_t *ret_n, char *err)
{
	struct sotto_transcribe_params p;
	struct sotto_reader joined = { join_read, join_rewind, NULL };
	struct sotto_vad_span *spans = NULL;
	struct vad_join j;
	float *probs = NULL;
	size_t np = 0, n = 0, n_spans = 0;
	int i, rc;

	*ret = NULL;
	memset(&j, 0, sizeof(j));
	if (ret_n != NULL)
		*ret_n = 0;
	if (rd == NULL || rd->read == NULL || rd->rewind == NULL)
		return err_set(err, SOTTO_EINVAL, "a reader needs read() and "
		    "rewind()");
	if ((rc = transcribe_vad_probs(v, rd, &probs, &np, &n, err)) != 0)
		return rc;
	rc = sotto_vad_speech(probs, np, n, vp, &spans, &n_spans, err);
	free(probs);
	if (rc != 0 || (rc = join_init(&j, rd, spans, n_spans, err)) != 0)
		goto out;
	if (tp != NULL)
		p = *tp;
	else
		sotto_transcribe_params_init(&p);
	if (p.progress != NULL) {
		j.progress = p.progress;
		j.progress_user = p.progress_user;
		j.total = n;
		p.progress = join_progress;
		p.progress_user = &j;
	}
	joined.user = &j;
	if ((rc = sotto_transcribe_reader(st, &joined, &p, ret, NULL,
	    err)) == 0) {
		for (i = 0; i < (*ret)->n_segments; i++) {
			map_segment(&j, &(*ret)->segments[i]);
			segment_clamp(&(*ret)->segments[i],
			    (double)n / SOTTO_SAMPLE_RATE);
		}
		if (ret_n != NULL)
			*ret_n = n;
	}
out:
	join_free(&j);
	free(spans);
	return rc;
}

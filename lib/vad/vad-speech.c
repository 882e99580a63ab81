/*
 * Speech regions from Silero VAD probabilities, the way faster-whisper's
 * get_speech_timestamps() finds them (ref: faster_whisper/vad.py, itself
 * from silero-vad's utils_vad.py), so that `sotto transcribe --vad`
 * decodes the audio faster-whisper's vad_filter would:
 *
 * - a region starts at the first chunk at or above threshold;
 * - it ends where the probability fell under neg_threshold, once it has
 *   stayed there min_silence_ms (a chunk back at threshold cancels that);
 * - past max_speech_s it is split at the last silence longer than 98 ms,
 *   or cut where it is;
 * - regions of min_speech_ms or shorter are dropped;
 * - each is padded by speech_pad_ms, or by half the gap to its neighbour
 *   when the gap is shorter than two pads.
 *
 * Sample counts derived from milliseconds are kept as doubles, as the
 * Python computes them, and probabilities compare in float as numpy 2
 * compares a float32 with a Python float.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "vad.h"

#define MAX_SPEECH_SILENCE_MS	98

struct speech_scan {
	double min_speech, pad, max_speech, min_silence, min_silence_max;
	float thr, neg;
	struct sotto_vad_span *out;
	size_t n, cap;
	int triggered, open;		/* open: cur.start is set */
	size_t start;			/* of the open region */
	size_t temp_end, prev_end, next_start;
};

void
sotto_vad_params_init(struct sotto_vad_params *p)
{
	p->threshold = 0.5f;
	p->neg_threshold = -1.0f;
	p->min_speech_ms = 0;
	p->max_speech_s = INFINITY;
	p->min_silence_ms = 2000;
	p->speech_pad_ms = 400;
}

static int
check(const struct sotto_vad_params *p, char *err)
{
	if (!(p->threshold > 0.0f && p->threshold < 1.0f))
		return err_set(err, SOTTO_EINVAL, "VAD threshold %g: use a "
		    "probability between 0 and 1", p->threshold);
	if (!(p->neg_threshold < 1.0f))
		return err_set(err, SOTTO_EINVAL, "VAD silence threshold %g: "
		    "use a probability under 1", p->neg_threshold);
	if (p->min_speech_ms < 0 || p->min_silence_ms < 0 ||
	    p->speech_pad_ms < 0 || !(p->max_speech_s > 0.0f))
		return err_set(err, SOTTO_EINVAL, "VAD durations must not be "
		    "negative, and the longest speech must be over 0 s");
	return 0;
}

static int
push(struct speech_scan *s, size_t start, size_t end)
{
	struct sotto_vad_span *p;
	size_t cap;

	if (s->n == s->cap) {
		cap = s->cap ? 2 * s->cap : 16;
		if ((p = realloc(s->out, cap * sizeof(*p))) == NULL)
			return SOTTO_ENOMEM;
		s->out = p;
		s->cap = cap;
	}
	s->out[s->n].start = start;
	s->out[s->n++].end = end;
	return 0;
}

/* Past max_speech_s: end the region at the last long silence, or here. */
static int
split(struct speech_scan *s, size_t at)
{
	int rc;

	if (s->prev_end) {
		if ((rc = push(s, s->start, s->prev_end)) != 0)
			return rc;
		s->open = 0;
		if (s->next_start < s->prev_end)
			s->triggered = 0;
		else {
			s->start = s->next_start;
			s->open = 1;
		}
		s->prev_end = s->next_start = s->temp_end = 0;
		return 0;
	}
	if ((rc = push(s, s->start, at)) != 0)
		return rc;
	s->open = 0;
	s->prev_end = s->next_start = s->temp_end = 0;
	s->triggered = 0;
	return 1;		/* this chunk is done */
}

/* Under neg_threshold while in speech: maybe the region's end. */
static int
silence(struct speech_scan *s, size_t at)
{
	int rc = 0;

	if (!s->temp_end)
		s->temp_end = at;
	if ((double)(at - s->temp_end) > s->min_silence_max)
		s->prev_end = s->temp_end;
	if ((double)(at - s->temp_end) < s->min_silence)
		return 0;
	if ((double)s->temp_end - (double)s->start > s->min_speech)
		rc = push(s, s->start, s->temp_end);
	s->open = 0;
	s->prev_end = s->next_start = s->temp_end = 0;
	s->triggered = 0;
	return rc;
}

static int
scan_chunk(struct speech_scan *s, float prob, size_t at)
{
	int rc;

	if (prob >= s->thr && s->temp_end) {
		s->temp_end = 0;
		if (s->next_start < s->prev_end)
			s->next_start = at;
	}
	if (prob >= s->thr && !s->triggered) {
		s->triggered = 1;
		s->start = at;
		s->open = 1;
		return 0;
	}
	if (s->triggered && (double)(at - s->start) > s->max_speech) {
		if ((rc = split(s, at)) != 0)
			return rc < 0 ? rc : 0;
	}
	if (prob < s->neg && s->triggered)
		return silence(s, at);
	return 0;
}

/* Python's a // 2 for a possibly negative gap. */
static long long
half_floor(long long a)
{
	return a >= 0 ? a / 2 : -((-a + 1) / 2);
}

static void
pad_regions(struct speech_scan *s, size_t n_samples)
{
	struct sotto_vad_span *r = s->out;
	long long gap, lo;
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (i == 0)
			r[i].start = (double)r[i].start - s->pad > 0.0 ?
			    (size_t)((double)r[i].start - s->pad) : 0;
		if (i + 1 == s->n) {
			r[i].end = (size_t)fmin((double)n_samples,
			    (double)r[i].end + s->pad);
			break;
		}
		gap = (long long)r[i + 1].start - (long long)r[i].end;
		if ((double)gap < 2.0 * s->pad) {
			r[i].end += half_floor(gap);
			lo = (long long)r[i + 1].start - half_floor(gap);
			r[i + 1].start = lo > 0 ? (size_t)lo : 0;
		} else {
			r[i].end = (size_t)fmin((double)n_samples,
			    (double)r[i].end + s->pad);
			r[i + 1].start = (double)r[i + 1].start - s->pad > 0.0 ?
			    (size_t)((double)r[i + 1].start - s->pad) : 0;
		}
	}
}

static void
scan_init(struct speech_scan *s, const struct sotto_vad_params *p)
{
	const double sr = SOTTO_SAMPLE_RATE;

	memset(s, 0, sizeof(*s));
	s->min_speech = sr * p->min_speech_ms / 1000.0;
	s->pad = sr * p->speech_pad_ms / 1000.0;
	s->max_speech = sr * (double)p->max_speech_s - SOTTO_VAD_CHUNK -
	    2.0 * s->pad;
	s->min_silence = sr * p->min_silence_ms / 1000.0;
	s->min_silence_max = sr * MAX_SPEECH_SILENCE_MS / 1000.0;
	s->thr = p->threshold;
	s->neg = p->neg_threshold >= 0.0f ? p->neg_threshold :
	    fmaxf(p->threshold - 0.15f, 0.01f);
}

int
sotto_vad_speech(const float *probs, size_t n_probs, size_t n_samples,
    const struct sotto_vad_params *p, struct sotto_vad_span **ret,
    size_t *ret_n, char *err)
{
	struct sotto_vad_params defaults;
	struct speech_scan s;
	size_t i;
	int rc = 0;

	*ret = NULL;
	*ret_n = 0;
	if (p == NULL) {
		sotto_vad_params_init(&defaults);
		p = &defaults;
	}
	if ((rc = check(p, err)) != 0)
		return rc;
	scan_init(&s, p);
	for (i = 0; rc == 0 && i < n_probs; i++)
		rc = scan_chunk(&s, probs[i], i * SOTTO_VAD_CHUNK);
	if (rc == 0 && s.open && n_samples > s.start &&
	    (double)(n_samples - s.start) > s.min_speech)
		rc = push(&s, s.start, n_samples);
	if (rc != 0) {
		free(s.out);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	pad_regions(&s, n_samples);
	*ret = s.out;
	*ret_n = s.n;
	return 0;
}

/*
 * Voice activity detection for a stream (sotto_stream_params.vad): at
 * each step, Silero VAD runs over the audio received since the last one
 * (whole 512-sample chunks; finish() pads the last), and the chunks at or
 * over the threshold, widened by STREAM_VAD_PAD_MS on each side, are kept
 * as merged spans of stream samples. A window with no such span in it is
 * handled as the energy gate's silent window: no encoder pass, no text,
 * and the window slides over it. So noise, music or tones on a live
 * stream cost the VAD alone (~5 ms per second of audio) and give no
 * partials, while a window with speech anywhere in it is decoded as
 * before.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "stream.h"
#include "vad.h"

#define STREAM_VAD_PAD_MS	200

#define PAD	((uint64_t)STREAM_VAD_PAD_MS * (SOTTO_SAMPLE_RATE / 1000))

int
stream_vad_init(struct sotto_stream *s, char *err)
{
	const struct sotto_stream_params *p = &s->p;

	if (p->vad == NULL)
		return 0;
	if (!(p->vad_threshold > 0.0f && p->vad_threshold < 1.0f))
		return err_set(err, SOTTO_EINVAL, "VAD threshold %g: use a "
		    "probability between 0 and 1", p->vad_threshold);
	if ((s->vad.st = sotto_vad_state_new(p->vad)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	return 0;
}

void
stream_vad_free(struct sotto_stream *s)
{
	sotto_vad_state_free(s->vad.st);
	free(s->vad.speech);
	memset(&s->vad, 0, sizeof(s->vad));
}

/* Note speech in stream samples [start, end), merged with the last span. */
static int
add_speech(struct stream_vad *v, uint64_t start, uint64_t end)
{
	struct stream_vad_span *p;
	size_t cap;

	start = start > PAD ? start - PAD : 0;
	end += PAD;
	if (v->n > 0 && start <= v->speech[v->n - 1].end) {
		v->speech[v->n - 1].end = end;
		return 0;
	}
	if (v->n == v->cap) {
		cap = v->cap ? 2 * v->cap : 16;
		if ((p = realloc(v->speech, cap * sizeof(*p))) == NULL)
			return SOTTO_ENOMEM;
		v->speech = p;
		v->cap = cap;
	}
	v->speech[v->n].start = start;
	v->speech[v->n++].end = end;
	return 0;
}

/* Forget spans that end before the window. */
static void
trim(struct stream_vad *v, uint64_t from)
{
	size_t k = 0;

	while (k < v->n && v->speech[k].end <= from)
		k++;
	if (k == 0)	/* also before any speech: speech is NULL then */
		return;
	memmove(v->speech, v->speech + k, (v->n - k) * sizeof(*v->speech));
	v->n -= k;
}

/* Run the VAD over the audio not seen yet (with final, the last bit). */
static int
update(struct sotto_stream *s, int final, char *err)
{
	struct stream_vad *v = &s->vad;
	uint64_t end = s->window_start + s->n_pcm, at;
	float last[SOTTO_VAD_CHUNK], prob;
	const float *chunk;

	if (v->pos < s->window_start)	/* dropped before it was seen */
		v->pos = s->window_start;
	while (v->pos < end) {
		at = v->pos - s->window_start;
		chunk = s->pcm + at;
		if (end - v->pos < SOTTO_VAD_CHUNK) {
			if (!final)
				break;
			memset(last, 0, sizeof(last));
			memcpy(last, chunk, (end - v->pos) * sizeof(float));
			chunk = last;
		}
		prob = sotto_vad_chunk(v->st, chunk);
		if (prob >= s->p.vad_threshold && add_speech(v, v->pos,
		    v->pos + SOTTO_VAD_CHUNK) != 0)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		v->pos += SOTTO_VAD_CHUNK;
	}
	return 0;
}

int
stream_vad_silent(struct sotto_stream *s, size_t n, int final, int *ret,
    char *err)
{
	struct stream_vad *v = &s->vad;
	uint64_t a = s->window_start, b = a + n;
	size_t i;
	int rc;

	*ret = 0;
	if (v->st == NULL)
		return 0;
	if ((rc = update(s, final, err)) != 0)
		return rc;
	trim(v, a);
	*ret = 1;
	for (i = 0; i < v->n; i++)
		if (v->speech[i].start < b && v->speech[i].end > a)
			*ret = 0;
	return 0;
}

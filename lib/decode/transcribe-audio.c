/*
 * Where the seek loop's samples come from: an array the caller holds
 * whole (sotto_transcribe), or a struct sotto_reader read twice
 * (sotto_transcribe_reader), so that a file of any length needs memory
 * for one window.
 *
 * openai/whisper normalises the log-mel by its maximum over the whole
 * (padded) file before the first window is decoded. From a reader, the
 * first pass computes the log-mel frames as their samples arrive (a
 * frame needs 200 samples after its centre), keeping only the samples
 * the next frame needs, and learns the length; at the end, the last
 * frames and the 30 s of zero padding. The values are those of the
 * frames of the whole signal (mel_log_span), and max is exact, so the
 * maximum, and with it the transcript, is the array's. The second pass
 * holds the window at the seek: [seek - 200, seek + 30 s + 200) samples.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "transcribe.h"

/* One window's samples and the STFT's 200 on each side. */
#define AUDIO_HOLD	(WHISPER_N_SAMPLES + MEL_N_FFT)

void
audio_init_array(struct run_audio *a, const float *pcm, size_t n)
{
	memset(a, 0, sizeof(*a));
	a->pcm = pcm;
	a->len = n;
	a->n = n;
}

int
audio_init_reader(struct run_audio *a, const struct sotto_reader *rd,
    char *err)
{
	memset(a, 0, sizeof(*a));
	if (rd == NULL || rd->read == NULL || rd->rewind == NULL)
		return err_set(err, SOTTO_EINVAL, "a reader needs read() and "
		    "rewind()");
	a->reader = rd;
	a->cap = AUDIO_HOLD;
	if ((a->buf = malloc(a->cap * sizeof(*a->buf))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	a->pcm = a->buf;
	return 0;
}

void
audio_free(struct run_audio *a)
{
	free(a->buf);
	a->buf = NULL;
}

void
audio_span(const struct run_audio *a, struct mel_span *sp)
{
	sp->pcm = a->pcm;
	sp->off = a->off;
	sp->len = a->len;
	sp->n = a->n;
	sp->pad = WHISPER_N_SAMPLES;
}

/* Forget the samples before from, which is at most off + len. */
static void
audio_drop(struct run_audio *a, size_t from)
{
	size_t k = from > a->off ? from - a->off : 0;

	memmove(a->buf, a->buf + k, (a->len - k) * sizeof(*a->buf));
	a->len -= k;
	a->off += k;
}

/*
 * Read into the free end of the buffer until it is full, sample limit is
 * held, or the reader ends (*ret_end).
 */
static int
audio_fill(struct run_audio *a, size_t limit, int *ret_end, char *err)
{
	size_t want;
	long got;

	*ret_end = 0;
	while (a->len < a->cap && a->off + a->len < limit) {
		want = a->cap - a->len;
		if (want > limit - (a->off + a->len))
			want = limit - (a->off + a->len);
		got = a->reader->read(a->reader->user, a->buf + a->len, want,
		    err);
		if (got < 0)
			return (int)got;
		if ((size_t)got > want)
			return err_set(err, SOTTO_EINVAL, "the reader gave "
			    "%ld samples where %zu were asked", got, want);
		if (got == 0) {
			*ret_end = 1;
			break;
		}
		a->len += (size_t)got;
	}
	return 0;
}

/* The largest log-mel value of frames [first, first + k) of the span. */
static int
audio_frames_max(struct sotto_state *st, const struct mel_span *sp,
    size_t first, size_t k, float *max, char *err)
{
	size_t n;
	float m;
	int rc;

	for (; k > 0; first += n, k -= n) {
		n = k < WHISPER_N_FRAMES ? k : WHISPER_N_FRAMES;
		if ((rc = mel_log_span(st->mel, sp, first, n, st->mel_window,
		    WHISPER_N_FRAMES, &m, err)) != 0)
			return rc;
		*max = m > *max ? m : *max;
	}
	return 0;
}

/*
 * First pass over a reader: every frame once its samples are in (frame
 * t reads up to sample 160 t + 199, frame 0 up to sample 200 by
 * reflection), then at the end the rest with the zero padding.
 */
static int
audio_reader_max(struct sotto_state *st, struct run_audio *a, float *max,
    char *err)
{
	struct mel_span sp;
	size_t next = 0, ready, end;
	int rc, done;

	a->off = a->len = 0;
	for (;;) {
		if ((rc = audio_fill(a, SIZE_MAX, &done, err)) != 0)
			return rc;
		end = a->off + a->len;
		a->n = end;
		audio_span(a, &sp);
		if (done)
			ready = mel_total_frames(end, WHISPER_N_SAMPLES);
		else if (end > MEL_N_FFT / 2)
			ready = (end - MEL_N_FFT / 2) / WHISPER_HOP + 1;
		else
			ready = 0;
		if (ready > next && (rc = audio_frames_max(st, &sp, next,
		    ready - next, max, err)) != 0)
			return rc;
		next = ready > next ? ready : next;
		if (done)
			return 0;
		audio_drop(a, next * WHISPER_HOP > MEL_N_FFT / 2 ?
		    next * WHISPER_HOP - MEL_N_FFT / 2 : 0);
	}
}

int
audio_global_max(struct sotto_state *st, struct run_audio *a,
    float *ret_max, char *err)
{
	struct mel_span sp;

	*ret_max = MEL_LOG_FLOOR;
	if (a->reader != NULL)
		return audio_reader_max(st, a, ret_max, err);
	audio_span(a, &sp);
	return audio_frames_max(st, &sp, 0, mel_total_frames(a->n,
	    WHISPER_N_SAMPLES), ret_max, err);
}

int
audio_rewind(struct run_audio *a, char *err)
{
	int rc;

	if (a->reader == NULL)
		return 0;
	if ((rc = a->reader->rewind(a->reader->user, err)) != 0)
		return rc < 0 ? rc : err_set(err, SOTTO_EIO, "rewind failed");
	a->off = a->len = 0;
	return 0;
}

int
audio_hold(struct run_audio *a, size_t from, size_t to, char *err)
{
	int rc, end;

	if (to > a->n)
		to = a->n;
	if (a->reader == NULL || from >= to ||
	    (a->off <= from && to <= a->off + a->len))
		return 0;
	if (from < a->off || to - from > a->cap)
		return err_set(err, SOTTO_EINVAL, "samples %zu..%zu asked "
		    "after %zu..%zu (the seek went back)", from, to, a->off,
		    a->off + a->len);
	/* skip to from: not with windows of at most 30 s, which overlap */
	while (a->off + a->len < from) {
		a->off += a->len;
		a->len = 0;
		if ((rc = audio_fill(a, from, &end, err)) != 0)
			return rc;
		if (end)
			break;
	}
	if (a->off + a->len >= from) {
		audio_drop(a, from);
		if ((rc = audio_fill(a, a->n, &end, err)) != 0)
			return rc;
	}
	if (a->off + a->len < to)
		return err_set(err, SOTTO_EIO, "the audio ended after %zu "
		    "samples when read again, not %zu: it changed while it "
		    "was read", a->off + a->len, a->n);
	return 0;
}

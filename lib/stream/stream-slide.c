/*
 * Moving a stream's window forward. The committed tokens that leave the
 * window become the history (where stream_repeat looks), the audio
 * before the new start is dropped, and the timestamps of what stays (the
 * rest of the committed prefix, the hypothesis) are shifted to the new
 * start.
 *
 * The window moves to the end of a committed Whisper segment (text
 * closed by a timestamp), cut at the quietest 20 ms near that timestamp:
 * end timestamps are often a few hundred ms late, and a cut right at one
 * takes the start of the next word with it. Without a closed segment to
 * go to (one long segment, or none committed) the window moves to a
 * committed word ANCHOR_SECONDS before the end of the committed text,
 * and the words after the cut stay in the forced prefix, so a cut that
 * lands inside a word neither loses nor repeats it. Committed text that
 * no timestamp closes, where the decoder stopped well before the end of
 * the window, is slid past whole (stream_slide_text).
 */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

#define CUT_BEFORE	30	/* timestamp steps searched before a cut */
#define CUT_AFTER	10	/* and after it */
#define ANCHOR_SECONDS	2.0
/*
 * A hypothesis that ends with a segment's closing time and the next
 * one's opening time, with this much audio after them, has stopped
 * short (see stream_stalled).
 */
#define STALL_SECONDS	2.0

static void
history_add(struct sotto_stream *s, const int32_t *t, int n)
{
	int keep;

	if (n >= DECODE_MAX_PROMPT) {
		memcpy(s->history, t + n - DECODE_MAX_PROMPT,
		    DECODE_MAX_PROMPT * sizeof(int32_t));
		s->n_history = DECODE_MAX_PROMPT;
		return;
	}
	keep = s->n_history + n > DECODE_MAX_PROMPT ?
	    DECODE_MAX_PROMPT - n : s->n_history;
	memmove(s->history, s->history + s->n_history - keep,
	    keep * sizeof(int32_t));
	memcpy(s->history + keep, t, n * sizeof(int32_t));
	s->n_history = keep + n;
}

static void
shift_times(struct sotto_stream *s, int32_t *t, int n, int32_t by)
{
	int i;

	for (i = 0; i < n; i++)
		if (stream_is_ts(s, t[i]))
			t[i] = t[i] - by >= s->tb ? t[i] - by : s->tb;
}

/* Drop n samples from the front of the window (clamped). */
static void
drop_samples(struct sotto_stream *s, size_t n)
{
	if (n > s->n_pcm)
		n = s->n_pcm;
	memmove(s->pcm, s->pcm + n, (s->n_pcm - n) * sizeof(float));
	s->n_pcm -= n;
	s->window_start += n;
	s->text_end = -1.0;
	s->n_win = s->n_win > n ? s->n_win - n : 0;
}

/* Energy of the 20 ms of the window centred on timestamp step t >= 1. */
static double
energy_at(const struct sotto_stream *s, int32_t t)
{
	size_t c = (size_t)t * STREAM_TS_SAMPLES, i, end;
	double sum = 0.0;

	end = c + STREAM_TS_SAMPLES / 2;
	if (end > s->n_pcm)
		end = s->n_pcm;
	for (i = c - STREAM_TS_SAMPLES / 2; i < end; i++)
		sum += (double)s->pcm[i] * s->pcm[i];
	return sum;
}

/* The quietest timestamp step near t (the nearest of equals). */
static int32_t
quiet_cut(const struct sotto_stream *s, int32_t t)
{
	int32_t lo = t - CUT_BEFORE, hi = t + CUT_AFTER, best = t, f;
	double e, min;

	if (lo < 1)
		lo = 1;
	while (hi > lo && (size_t)hi * STREAM_TS_SAMPLES > s->n_pcm)
		hi--;
	if (t < lo || t > hi)
		return t;
	min = energy_at(s, t);
	for (f = lo; f <= hi; f++)
		if ((e = energy_at(s, f)) < min ||
		    (e == min && abs(f - t) < abs(best - t))) {
			min = e;
			best = f;
		}
	return best;
}

/* Index just after the last timestamp closing a segment in t[n], or 0. */
static int
last_close(const struct sotto_stream *s, const int32_t *t, int n)
{
	int i;

	for (i = n; i >= 2; i--)
		if (stream_is_ts(s, t[i - 1]) && !stream_is_ts(s, t[i - 2]))
			return i;
	return 0;
}

/*
 * Start the window at timestamp step by: prefix[0, i) becomes history,
 * the rest of the prefix and the hypothesis shift.
 */
static void
slide_at(struct sotto_stream *s, int i, int32_t by)
{
	history_add(s, s->prefix, i);
	s->n_prefix -= i;
	memmove(s->prefix, s->prefix + i, s->n_prefix * sizeof(int32_t));
	shift_times(s, s->prefix, s->n_prefix, by);
	shift_times(s, s->hyp, s->n_hyp, by);
	drop_samples(s, (size_t)by * STREAM_TS_SAMPLES);
}

/* Slide past the committed closed segments. Returns 1 if it moved. */
int
stream_slide(struct sotto_stream *s)
{
	int i = last_close(s, s->prefix, s->n_prefix);
	int32_t by;

	if (i == 0 || (by = quiet_cut(s, s->prefix[i - 1] - s->tb)) <= 0)
		return 0;
	slide_at(s, i, by);
	return 1;
}

/*
 * Slide to the committed word that starts ANCHOR_SECONDS before the end
 * of the committed text. Returns 1 if the window moved.
 */
int
stream_slide_words(struct sotto_stream *s)
{
	int np = s->n_prefix, n = np + s->n_hyp, i;
	double end, t = 0.0;
	int32_t by;

	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memcpy(s->seq + np, s->hyp, s->n_hyp * sizeof(int32_t));
	end = stream_estimate(s, s->seq, n, np);
	for (i = 1; i < np; i++)
		if (!stream_is_ts(s, s->seq[i]) &&
		    stream_word_start(s, s->seq[i]) &&
		    (t = stream_estimate(s, s->seq, n, i)) >=
		    end - ANCHOR_SECONDS)
			break;
	if (i >= np || (by = quiet_cut(s, (int32_t)(t / STREAM_TS_SECONDS)))
	    <= 0)
		return 0;
	slide_at(s, i, by);
	return 1;
}

/*
 * Slide past all of the committed text when the decoder stopped at it
 * without a timestamp STALL_SECONDS or more before the end of the window
 * (nothing of the hypothesis is text, s->text_end says where it ends).
 * With the prefix forced from inside a segment the decoder can stay
 * without timestamps and end at the forced text however much speech
 * follows; the next window starts after it with nothing forced. Returns
 * 1 if the window moved.
 */
int
stream_slide_text(struct sotto_stream *s)
{
	if (s->text_end < 0.0 || s->n_prefix == 0 ||
	    (double)s->n_win / SOTTO_SAMPLE_RATE - s->text_end <
	    STALL_SECONDS || stream_has_text(s, s->hyp, s->n_hyp))
		return 0;
	slide_at(s, s->n_prefix, quiet_cut(s, (int32_t)(s->text_end /
	    STREAM_TS_SECONDS) + CUT_AFTER));
	return 1;
}

/*
 * Whether the decoder has stopped short: all of the text is committed
 * and it ends with a segment's closing time and the next one's opening
 * time, STALL_SECONDS or more before the end of the window. Whisper does
 * this when it will not transcribe a segment that starts in this window
 * (transcribe() seeks to it); a single closing time at the end says the
 * rest is not speech instead.
 */
int
stream_stalled(const struct sotto_stream *s)
{
	const int32_t *t = s->prefix;
	int n = s->n_prefix;

	if (stream_has_text(s, s->hyp, s->n_hyp))
		return 0;
	if (n < 3 || !stream_is_ts(s, t[n - 1]) ||
	    !stream_is_ts(s, t[n - 2]) || stream_is_ts(s, t[n - 3]))
		return 0;
	return (double)s->n_win / SOTTO_SAMPLE_RATE -
	    (t[n - 1] - s->tb) * STREAM_TS_SECONDS >= STALL_SECONDS;
}

/* Drop audio without a segment to slide to: the prefix is history. */
void
stream_drop(struct sotto_stream *s, size_t n_samples)
{
	history_add(s, s->prefix, s->n_prefix);
	s->n_prefix = 0;
	s->n_hyp = 0;
	s->hyp_valid = 0;
	drop_samples(s, n_samples);
}

/*
 * A preview: the window decoded as a step would decode it, for its
 * partial alone. Nothing a step depends on changes (the committed
 * prefix, the last hypothesis, the window, the random state, the step
 * position), so the next step commits what it would have committed had
 * the preview never run: an engine with time to spare between steps
 * shows the words sooner, and the finals, cut where two steps a step
 * apart agree, stay those of steps at step_ms.
 *
 * Why not simply shorter steps: local agreement commits the words two
 * consecutive hypotheses share, and the closer together the two are,
 * the less that agreement says. Streamed at 500 ms steps instead of
 * 1000, tiny.en's word errors on the 15 test files rose from 2.75% to
 * 4.59% (docs/benchmarks.md, "idle steps").
 */
#include <string.h>

#include "err.h"
#include "stream.h"

/*
 * The preview's decode of the window's first n samples into s->partial;
 * *done is 0 when there is nothing to show (silence, no speech), so the
 * last step's partial stands.
 */
static int
preview_window(struct sotto_stream *s, size_t n, int *done, char *err)
{
	struct decode_result res = { 0 };
	int silent, p = 0, rc;

	*done = 0;
	if ((rc = stream_vad_silent(s, n, 0, &silent, err)) != 0 || silent ||
	    stream_silent(s->pcm, n))
		return rc;
	s->n_win = n;
	s->text_end = -1.0;	/* its text runs to the window's end */
	if ((rc = stream_encode(s, n, err)) != 0 ||
	    (rc = stream_decode(s, &res, 1, err)) != 0 ||
	    stream_no_speech(&res)) {
		decode_result_clear(&res);
		return rc;
	}
	if (!stream_has_text(s, s->prefix, s->n_prefix))
		p = stream_repeat(s, res.tokens, res.n_tokens);
	rc = stream_commit_partial_of(s, res.tokens + p, res.n_tokens - p,
	    err);
	*done = rc == 0;
	decode_result_clear(&res);
	return rc;
}

int
sotto_stream_preview(struct sotto_stream *s, struct sotto_stream_update *ret,
    char *err)
{
	size_t n = s->n_pcm < WHISPER_N_SAMPLES ? s->n_pcm : WHISPER_N_SAMPLES;
	size_t n_win = s->n_win;
	double text_end = s->text_end;
	uint64_t rng = s->rng;
	int rc = 0, done = 0;

	stream_commit_reset(s);
	if (s->finished) {
		stream_fill_update(s, ret);
		return err_set(err, SOTTO_EINVAL, "the stream is finished");
	}
	/* a language still to detect waits for the steps */
	if (!s->detect && n > 0)
		rc = preview_window(s, n, &done, err);
	s->n_win = n_win;
	s->text_end = text_end;
	s->rng = rng;
	if (rc == 0 && !done)
		rc = stream_commit_partial(s, err);
	stream_fill_update(s, ret);
	return rc;
}

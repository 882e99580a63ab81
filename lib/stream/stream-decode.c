/*
 * Decoding a stream's encoded window: the options (the vocabulary as the
 * prompt, the committed words in it as the forced prefix),
 * the retry of a repetition loop without the prompt, and the last decode
 * of a window at the end of the stream (see decode_final and
 * stream_decode_last).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "stream.h"
#include "tokenizer.h"

#define STREAM_SHORT_MS		2000		/* a last decode stopped short */
#define STREAM_GAVE_UP_MS	5000		/* far short: the text gave up */

#define MS(x)			((size_t)(x) * (SOTTO_SAMPLE_RATE / 1000))

int
stream_vocab_init(struct sotto_stream *s, const char *text, char *err)
{
	int32_t *ids;
	char *spaced;
	size_t len;
	int n, rc;

	s->n_vocab = 0;
	if (text == NULL)
		return 0;
	while (isspace((unsigned char)*text))
		text++;
	for (len = strlen(text); len > 0 &&
	    isspace((unsigned char)text[len - 1]); len--)
		;
	if (len == 0)
		return 0;
	/* a leading space, as the words of a transcript have */
	if ((spaced = malloc(len + 2)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	spaced[0] = ' ';
	memcpy(spaced + 1, text, len);
	spaced[len + 1] = '\0';
	rc = tok_encode(s->model->tok, spaced, &ids, &n, err);
	free(spaced);
	if (rc != 0)
		return rc;
	s->n_vocab = n < SOTTO_STREAM_PROMPT_MAX ? n : SOTTO_STREAM_PROMPT_MAX;
	memcpy(s->vocab, ids, (size_t)s->n_vocab * sizeof(*ids));
	free(ids);
	return 0;
}

/*
 * The options to decode the encoded window: the vocabulary as the
 * prompt; with forced, the committed tokens in the window forced as the
 * prefix (and the vocabulary shortened to leave them room).
 *
 * The committed text before the window is not in the prompt (where
 * sotto_transcribe() puts its text before a window). Whisper writes in the
 * style of its prompt, and committed text is less punctuated than the
 * model's text of the same audio: a word is committed once a second or
 * two of audio follows it, and tiny.en writes the comma after a word
 * when it hears 3 s or more after it (the long-form file from 85.3 s,
 * decoded alone: "... in the Middle Ages when the craftsmen took care
 * that" on 6 s, "in the Middle Ages, when" on 8 s); a stream's first
 * windows, a few seconds long, have none at all ("Printing in the only
 * sense" on 3 s, "Printing, in the only sense" on 7 s). As the prompt
 * of every later window that text taught the decoder to leave
 * punctuation out, more with each slide: streamed at 2 s steps, 28% of
 * the caption units of the LJ Speech long-form file ended in
 * punctuation, with 12.7% word errors counting punctuation and case
 * (transcribe: 8.7%); without it 67% and 9.4%, the words about as good
 * (normalised: 6 errors in 299 where there were 4, transcribe 3). The
 * window's own committed words, forced, still give the decoder what
 * came just before.
 */
void
stream_decode_setup(struct sotto_stream *s, int forced, struct decode_opts *o)
{
	int room = forced ? DECODE_MAX_PROMPT - s->n_prefix : DECODE_MAX_PROMPT;

	memset(o, 0, sizeof(*o));
	o->prompt = s->vocab;
	o->n_prompt = s->n_vocab < room ? s->n_vocab : room;
	if (o->n_prompt < 0)
		o->n_prompt = 0;
	if (forced) {
		o->prefix = s->prefix;
		o->n_prefix = s->n_prefix;
	}
	o->language = s->language;
	o->task = s->p.task;
	o->beam_size = s->p.beam_size;
	o->best_of = 1;
	o->patience = 1.0f;
	o->rng = &s->rng;
}

/* A repetition loop: decode once more without the prompt. */
int
stream_decode_retry(struct sotto_stream *s, struct decode_opts *o,
    struct decode_result *res, char *err)
{
	if (res->compression_ratio <= STREAM_COMPRESSION || o->n_prompt == 0)
		return 0;
	decode_result_clear(res);
	o->n_prompt = 0;
	return decode_window(s->st, o, res, err);
}

int
stream_decode(struct sotto_stream *s, struct decode_result *res, int forced,
    char *err)
{
	struct decode_opts o;
	int rc;

	stream_decode_setup(s, forced, &o);
	if ((rc = decode_window(s->st, &o, res, err)) != 0)
		return rc;
	return stream_decode_retry(s, &o, res, err);
}

/*
 * Window seconds up to which tokens t[n] (a decode's, after the forced
 * prefix if forced) account for the audio: their last timestamp, with
 * forced the prefix's if they have none, else 0.
 */
static double
decoded_end(const struct sotto_stream *s, const int32_t *t, int n,
    int forced)
{
	int i;

	for (i = n - 1; i >= 0; i--)
		if (stream_is_ts(s, t[i]))
			return (t[i] - s->tb) * STREAM_TS_SECONDS;
	for (i = forced ? s->n_prefix - 1 : -1; i >= 0; i--)
		if (stream_is_ts(s, s->prefix[i]))
			return (s->prefix[i] - s->tb) * STREAM_TS_SECONDS;
	return 0.0;
}

/*
 * Whether t[n] ends ms or more before the end of the window with sound
 * (over the gate) after it.
 */
static int
stopped_before(const struct sotto_stream *s, const int32_t *t, int n,
    int forced, size_t ms)
{
	size_t at = (size_t)(decoded_end(s, t, n, forced) * SOTTO_SAMPLE_RATE);

	return at + MS(ms) <= s->n_win &&
	    !stream_silent(s->pcm + at, s->n_win - at);
}

int
stream_stopped_short(const struct sotto_stream *s, const int32_t *t, int n,
    int forced)
{
	return stopped_before(s, t, n, forced, STREAM_SHORT_MS);
}

/*
 * A window's last decode. With a prompt Whisper at times ends the text
 * in the middle of speech (tiny.en, 4 min into a stream, when the text
 * before the window was the prompt: "Experience proves this." and then
 * the end of text, with 12 s of speech after it; without the prompt it
 * transcribes all of it); a live step decodes the window again as audio
 * comes, the last one does not. So a decode with the vocabulary as its
 * prompt that stopped short is done once more without it, and the one
 * that goes further kept.
 */
static int
decode_final(struct sotto_stream *s, struct decode_result *res, int forced,
    char *err)
{
	struct decode_result alt = { 0 };
	struct decode_opts o;
	int rc;

	stream_decode_setup(s, forced, &o);
	if ((rc = decode_window(s->st, &o, res, err)) != 0 ||
	    (rc = stream_decode_retry(s, &o, res, err)) != 0)
		return rc;
	/* no prompt, or the loop's retry already dropped it */
	if (o.n_prompt == 0 ||
	    !stream_stopped_short(s, res->tokens, res->n_tokens, forced))
		return 0;
	o.n_prompt = 0;
	if ((rc = decode_window(s->st, &o, &alt, err)) != 0)
		return rc;
	if (alt.compression_ratio <= STREAM_COMPRESSION &&
	    decoded_end(s, alt.tokens, alt.n_tokens, forced) >
	    decoded_end(s, res->tokens, res->n_tokens, forced)) {
		decode_result_clear(res);
		*res = alt;
	} else
		decode_result_clear(&alt);
	return 0;
}

/*
 * Whether the forced last decode is kept rather than the unforced one
 * (which does not repeat the committed words): unless it has no words and
 * the other has, or its text closes with a timestamp STREAM_GAVE_UP_MS or
 * more before the end of a window with sound after it, and the other
 * goes on STREAM_SHORT_MS or more further. Closer to the end the forced
 * text is more likely right and the unforced one to repeat committed
 * words (a stream ending "...that thing. This is a long stop.": forced
 * "thing. This is a long stop." closed 2.9 s before the end, unforced
 * went 2 s further but repeated the 12 committed words before "thing");
 * text that ends without a timestamp may run to the end.
 */
static int
forced_better(const struct sotto_stream *s, const struct decode_result *f,
    const struct decode_result *u)
{
	const int32_t *t = f->tokens;
	int n = f->n_tokens;

	if (!stream_has_words(s, u->tokens, u->n_tokens))
		return 1;
	if (!stream_has_words(s, t, n))
		return 0;
	return !stream_is_ts(s, t[n - 1]) ||
	    !stopped_before(s, t, n, 1, STREAM_GAVE_UP_MS) ||
	    decoded_end(s, u->tokens, u->n_tokens, 0) <
	    decoded_end(s, t, n, 1) + STREAM_SHORT_MS / 1000.0;
}

/*
 * The last decode of a window: without the committed prefix forced, as
 * sotto_transcribe() decodes, keeping what follows the committed text
 * (from *p on); forced when that hypothesis does not repeat the committed
 * words. With the prefix forced the decoder must continue the committed
 * text, which near the end of the audio can derail it ("to be
 * old-sposed" where it hears "to be ill-disposed" unforced). Unless the
 * forced decode has no words and the other has: then all of that one is
 * kept. (After a slide by words whose committed words in the window were
 * placed too late, the forced decode gave only "." where the audio went
 * on "himself. This is all very high pitched."; unforced it gave
 * "bore himself. This is all very high pitched.": a fragment of a word
 * too many is better than the last sentence lost.) Or unless the forced
 * one's text closes far short of speech the other transcribes (see
 * forced_better: the same window at other steps, forced "and I'm not a
 * good boy." closed at 5 s of its 15, unforced the three sentences of
 * it). An unforced decode kept so still has the committed words it
 * hears otherwise at its start ("power to do for them. ..." where "his
 * power to do for them. ..." was committed and final): what follows
 * the committed text's last words in it is kept, if it has them
 * (stream_match_tail), else all of it.
 */
int
stream_decode_last(struct sotto_stream *s, struct decode_result *res, int *p,
    char *err)
{
	struct decode_result forced = { 0 };
	int rc;

	if ((rc = decode_final(s, res, 0, err)) != 0)
		return rc;
	if ((*p = stream_match(s, res->tokens, res->n_tokens)) >= 0)
		return 0;
	*p = 0;
	if ((rc = decode_final(s, &forced, 1, err)) != 0) {
		decode_result_clear(&forced);
		return rc;
	}
	if (forced_better(s, &forced, res)) {
		decode_result_clear(res);
		*res = forced;
	} else {
		decode_result_clear(&forced);
		if ((*p = stream_match_tail(s, res->tokens,
		    res->n_tokens)) < 0)
			*p = 0;
	}
	return 0;
}

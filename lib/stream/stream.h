/*
 * Streaming internals shared by stream.c (audio, window decoding, the
 * public API) and stream-commit.c (local agreement, finals, sliding).
 */
#ifndef SOTTO_STREAM_H
#define SOTTO_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "model.h"

#define STREAM_MAX_TOKENS	448	/* decoder context */
#define STREAM_TS_SAMPLES	320	/* samples per timestamp step (20 ms) */
#define STREAM_TS_SECONDS	0.02
#define STREAM_SLIDE_MS		15000	/* window kept for context */
#define STREAM_COMPRESSION	2.4f	/* over it: a repetition loop */

/* Speech the VAD found, in stream samples [start, end). */
struct stream_vad_span {
	uint64_t start, end;
};

/* A stream's VAD (stream-vad.c); st is NULL without one. */
struct stream_vad {
	struct sotto_vad_state *st;	/* owned */
	uint64_t pos;			/* stream sample it has reached */
	struct stream_vad_span *speech;	/* merged, in order; owned */
	size_t n, cap;
};

/*
 * One live stream. Owns the state, the audio from window_start on, the
 * token arrays and the results of the last call.
 */
struct sotto_stream {
	const struct sotto_model *model;	/* borrowed */
	struct sotto_state *st;			/* owned */
	struct sotto_stream_params p;
	int32_t tb;			/* timestamp_begin */
	int language;			/* index, or -1 (.en or undetected) */
	int detect;			/* language still to be settled */
	int detected;			/* language auto: detected so far */
	float language_prob;		/* of the detected language */

	float *pcm;			/* pending audio from window_start */
	size_t n_pcm, cap_pcm;
	uint64_t window_start;		/* stream sample index of pcm[0] */
	uint64_t received;		/* samples pushed so far */
	uint64_t stepped;		/* received at the last step */
	size_t n_win;			/* samples of the last decoded window */
	/*
	 * Window seconds where the last decode's text ends when no timestamp
	 * closes it, by alignment (stream_time_text); < 0: not known, and
	 * such text is taken to run to the window's end.
	 */
	double text_end;
	int finished;

	/* committed tokens that scrolled out of the window (stream_repeat) */
	int32_t history[DECODE_MAX_PROMPT];
	int n_history;
	/* the vocabulary (params.prompt): the prompt */
	int32_t vocab[SOTTO_STREAM_PROMPT_MAX];
	int n_vocab;
	/* committed tokens still inside the window (relative timestamps) */
	int32_t prefix[STREAM_MAX_TOKENS];
	int n_prefix;
	/* the uncommitted rest of the last hypothesis */
	int32_t hyp[STREAM_MAX_TOKENS];
	int n_hyp;
	int hyp_valid;			/* hyp came from a decode */
	int32_t seq[2 * STREAM_MAX_TOKENS];	/* scratch: prefix + new */

	double last_end;		/* stream seconds: end of the last final */
	uint64_t enc_start;		/* window_start of the encoded window */
	size_t enc_n;			/* its samples; 0: none encoded */
	struct stream_words *words;	/* borrowed while finals are cut */
	uint64_t next_id;
	uint64_t rng;

	/* results of the last call, borrowed by the caller until the next */
	struct sotto_segment *finals;
	int n_finals, cap_finals;
	uint64_t first_id;
	char *partial;
	double partial_start, partial_end;

	struct stream_vad vad;
};

static inline int
stream_is_ts(const struct sotto_stream *s, int32_t t)
{
	return t >= s->tb;
}

/* stream-decode.c: tokenize params.prompt into vocab */
int	stream_vocab_init(struct sotto_stream *, const char *text, char *err);

/* stream.c: log-mel and encoder of the window's first n samples */
int	stream_encode(struct sotto_stream *, size_t n, char *err);

/*
 * stream-words.c: the words of seq[n] (the window's committed and new
 * tokens) aligned to the window's audio, in stream seconds, and each
 * word's first text token (counting the text tokens of seq).
 */
struct stream_words {
	struct sotto_word *w;
	int *tok0;
	int n;
};

int	stream_words_align(struct sotto_stream *, const int32_t *seq, int n,
	    struct stream_words *ret, char *err);
/*
 * Copies of the words whose first text token is in [t0, t1), each with
 * token_index its first token's count of text tokens after t0.
 */
int	stream_words_take(const struct stream_words *, int t0, int t1,
	    struct sotto_word **ret, int *ret_n, char *err);
void	stream_words_free(struct stream_words *);
/*
 * s->text_end for the decode h[n] after the committed prefix: aligned
 * when its text ends without a timestamp and the window is long or
 * opens with forced text (where the decoder can stop early without
 * saying where), else -1.
 */
int	stream_time_text(struct sotto_stream *, const int32_t *h, int n,
	    char *err);

/* stream.c */
/* Every 100 ms block of pcm[n] is quieter than the energy gate. */
int	stream_silent(const float *pcm, size_t n);
/* The decoded window holds no speech (Whisper's rule, or a loop). */
int	stream_no_speech(const struct decode_result *);
/* ret: the results of the last call (finals, partial, language). */
void	stream_fill_update(struct sotto_stream *, struct sotto_stream_update *);

/* stream-decode.c */
void	stream_decode_setup(struct sotto_stream *, int forced,
	    struct decode_opts *);
int	stream_decode_retry(struct sotto_stream *, struct decode_opts *,
	    struct decode_result *, char *err);
int	stream_decode(struct sotto_stream *, struct decode_result *,
	    int forced, char *err);
/* The last decode of the window; *p: where the new tokens start. */
int	stream_decode_last(struct sotto_stream *, struct decode_result *,
	    int *p, char *err);
/* t[n] ends 2 s or more before the window's end, with sound after it. */
int	stream_stopped_short(const struct sotto_stream *, const int32_t *t,
	    int n, int forced);

/* stream-commit.c */
void	stream_commit_reset(struct sotto_stream *);
int	stream_commit(struct sotto_stream *, const int32_t *hyp, int n,
	    int all, char *err);
int	stream_commit_force(struct sotto_stream *, char *err);
int	stream_commit_partial(struct sotto_stream *, char *err);
/* The partial of the uncommitted tokens h[n] (a preview's). */
int	stream_commit_partial_of(struct sotto_stream *, const int32_t *h,
	    int n, char *err);
int	stream_word_start(const struct sotto_stream *, int32_t);
double	stream_estimate(const struct sotto_stream *, const int32_t *seq,
	    int n, int i);

/* stream-match.c */
int	stream_match(const struct sotto_stream *, const int32_t *hyp, int n);
int	stream_match_tail(const struct sotto_stream *, const int32_t *hyp,
	    int n);
int	stream_repeat(const struct sotto_stream *, const int32_t *hyp, int n);
/* t[n] has a token that is not a timestamp (punctuation counts). */
int	stream_has_text(const struct sotto_stream *, const int32_t *t, int n);
/* t[n] has a letter or digit (punctuation alone is no words). */
int	stream_has_words(const struct sotto_stream *, const int32_t *t, int n);

/* stream-vad.c */
int	stream_vad_init(struct sotto_stream *, char *err);
void	stream_vad_free(struct sotto_stream *);
/* *ret: the first n samples of the window hold no speech (0 without VAD). */
int	stream_vad_silent(struct sotto_stream *, size_t n, int final,
	    int *ret, char *err);

/* stream-slide.c */
int	stream_slide(struct sotto_stream *);
int	stream_slide_words(struct sotto_stream *);
int	stream_slide_text(struct sotto_stream *);
int	stream_stalled(const struct sotto_stream *);
void	stream_drop(struct sotto_stream *, size_t n_samples);

#endif

/*
 * Decoding one 30 s window whose encoder output is in the state:
 * openai/whisper DecodingTask with greedy, sampling (best_of) and beam
 * search, plus language detection.
 */
#ifndef SOTTO_DECODE_H
#define SOTTO_DECODE_H

#include <stdint.h>

#include "model.h"

#define DECODE_SAMPLE_LEN	224	/* n_text_ctx / 2 sampled tokens */
#define DECODE_MAX_PROMPT	223	/* previous-text tokens kept */

struct decode_opts {
	const int32_t *prompt;		/* previous text, may be NULL */
	int n_prompt;
	const int32_t *prefix;		/* forced after the SOT sequence and
					   ruled as already sampled; may be
					   NULL */
	int n_prefix;
	int language;			/* language index, or -1 (.en) */
	enum sotto_task task;
	float temperature;
	int beam_size;			/* used at temperature 0 */
	int best_of;			/* used at temperature > 0 */
	float patience;
	int without_timestamps;
	uint64_t *rng;			/* sampling state */
};

/* The chosen sequence of one window. Owns text. */
struct decode_result {
	int32_t tokens[DECODE_SAMPLE_LEN + 1];	/* sampled, without prefix
						   and eot */
	int n_tokens;
	float sum_logprob, avg_logprob, no_speech_prob;
	float temperature, compression_ratio;
	char *text;
};

int	decode_window(struct sotto_state *, const struct decode_opts *,
	    struct decode_result *ret, char *err);
/*
 * decode_window() for n windows, each in its own state (of one model):
 * greedy ones (temperature 0, one beam) decode as one batch, a column
 * per state; others, one after the other. Same results as n calls. On
 * error every ret is cleared.
 */
int	decode_windows(struct sotto_state *const *st,
	    const struct decode_opts *o, int n, struct decode_result *ret,
	    char *err);
void	decode_result_clear(struct decode_result *);

/*
 * openai's SOT sequence: <|startoftranscript|>, for a multilingual model
 * the language (index; -1 means 0, "en") and task tokens, then
 * <|notimestamps|> when without_timestamps. Returns its length.
 */
#define DECODE_SOT_MAX	4
int	decode_sot_sequence(const struct sotto_model *, int language,
	    enum sotto_task, int without_timestamps,
	    int32_t out[DECODE_SOT_MAX]);

/*
 * Most likely language of the encoded window (multilingual models), its
 * probability, and if probs is not NULL every language's [n_languages].
 */
int	decode_detect_language(struct sotto_state *, int *ret_index,
	    float *ret_prob, float *probs, char *err);

#endif

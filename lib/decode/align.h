/*
 * Word timestamps (align.c, words.c): the text of a decoded window is
 * aligned to its audio by the cross-attention of the model's alignment
 * heads and dynamic time warping, then cut into words.
 *
 * ref: whisper/timing.py (find_alignment, merge_punctuations,
 * add_word_timestamps); faster_whisper/transcribe.py.
 */
#ifndef SOTTO_ALIGN_H
#define SOTTO_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define ALIGN_TOKENS_PER_SECOND	50	/* encoder positions per second */
#define ALIGN_MEDIAN_WIDTH	7

/*
 * Align text[n_text] (text tokens only) to the window whose encoder
 * output is in the state, of which n_frames mel frames are audio:
 * the decoder reads <SOT sequence> <|notimestamps|> text <|endoftext|>
 * in one prefill. jump[n_text + 1] receives, in seconds from the window
 * start, when the warping path reaches the row that predicts text token
 * i (i = n_text: the end of text), prob[n_text] each token's
 * probability among the text tokens. The decoder caches are
 * overwritten. With no audio frame to align against (n_frames < 2),
 * every jump is 0.
 */
int	align_window(struct sotto_state *, int language, enum sotto_task,
	    const int32_t *text, int n_text, size_t n_frames, float *jump,
	    float *prob, char *err);

/*
 * The warping path through cost[n][m] (row-major) from (0, 0) to
 * (n - 1, m - 1), as openai's dtw_cpu: first the time of each row (the
 * column at which the path first reaches it) into first[n]. Returns 0,
 * or SOTTO_ENOMEM.
 */
int	align_dtw(const float *cost, int n, int m, int *first);

/* out[c] = median of x[c - 3 .. c + 3], reflected at the ends (m > 3). */
void	align_median7(const float *x, int m, float *out);

/*
 * One window's segments with word timing (words.c). A segment is cut
 * from the window's tokens as segments.c does; words[] are filled in.
 */
struct align_seg {
	const int32_t *tokens;		/* borrowed */
	int n_tokens;
	double start, end;		/* seconds */
	struct sotto_word *words;	/* owned until handed over */
	int *word_tokens;		/* owned: [n_words] text tokens of each
					   word (merged punctuation included) */
	int n_words;
};

/*
 * openai's add_word_timestamps() over the segments of one window at
 * offset seconds, of which n_frames mel frames are audio: align their
 * text tokens (together), cut it into words (language: for the
 * languages written without spaces), merge punctuation into words, then
 * give each segment its words and move its start and end to them as
 * openai does. *last_speech is the end of the speech before (updated).
 */
struct words_opts {
	int language;			/* index, or -1 */
	enum sotto_task task;
	const char *prepend, *append;	/* NULL: openai's */
};

int	words_window(struct sotto_state *, const struct words_opts *,
	    struct align_seg *segs, int n_segs, double offset,
	    size_t n_frames, double *last_speech, char *err);
void	words_free(struct sotto_word *, int n);
/* Free what words_window() gave the segment. */
void	align_seg_clear(struct align_seg *);

#endif

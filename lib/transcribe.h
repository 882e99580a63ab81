/*
 * Shared between transcribe.c (the seek loop) and segments.c (cutting a
 * window's tokens into timed segments and keeping the prompt history).
 */
#ifndef SOTTO_TRANSCRIBE_H
#define SOTTO_TRANSCRIBE_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "internal.h"

/* One sotto_transcribe() call. Owns tokens; res until it is returned. */
struct run {
	const struct sotto_model *model;		/* borrowed */
	const struct sotto_transcribe_params *params;	/* borrowed */
	const float *pcm;				/* borrowed */
	size_t n;
	size_t content;		/* mel frames of real audio */
	size_t seek;		/* current window start, in frames */
	float mel_max;
	const float *temperatures;
	int n_temperatures;
	uint64_t rng;
	int language;		/* index, or -1 for English-only models */
	float language_prob;
	int32_t *tokens;	/* all_tokens: every kept segment's tokens */
	int n_tokens, cap_tokens;
	int prompt_from;	/* prompt_reset_since */
	struct sotto_result *res;
};

/* segments.c */
int	segments_add(struct run *, const struct decode_result *,
	    size_t window_frames, char *err);
int	prompt_init(struct run *, const char *text, char *err);
int	result_set_language(struct run *, char *err);

#endif

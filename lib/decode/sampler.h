/*
 * Logit filters and token choice, as openai/whisper decoding.py:
 * SuppressBlank, SuppressTokens, ApplyTimestampRules, greedy, sampling,
 * and the compression-ratio check of the fallback.
 */
#ifndef SOTTO_SAMPLER_H
#define SOTTO_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* What the rules need to know about one window's decoding. */
struct sampler_rules {
	const struct sotto_model *model;	/* borrowed */
	int without_timestamps;
	int max_initial_timestamp_index;	/* 50 = 1.0 s */
};

/*
 * Apply the filters to logits[n_vocab] of one sequence whose sampled
 * tokens (those after the prompt) are sampled[n_sampled].
 */
void	sampler_filter(const struct sampler_rules *, const int32_t *sampled,
	    int n_sampled, float *logits);

/* out = log_softmax(x); out may equal x. */
void	sampler_log_softmax(const float *x, int n, float *out);

/* Index of the first maximum. */
int	sampler_argmax(const float *x, int n);

/* Indices of the k largest values, largest first (ties: lower index). */
void	sampler_topk(const float *x, int n, int k, int *idx);

/* Draw from softmax(logits / temperature); rng is xorshift state. */
int	sampler_draw(const float *logits, int n, float temperature,
	    uint64_t *rng, float *scratch);

/* len(text) / len(zlib.compress(text)), as whisper/utils.py. */
float	sampler_compression_ratio(const char *text);

#endif

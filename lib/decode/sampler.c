/*
 * ref: whisper/decoding.py SuppressBlank, SuppressTokens,
 * ApplyTimestampRules, GreedyDecoder; whisper/utils.py compression_ratio.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "layers.h"
#include "sampler.h"
#include "tokenizer.h"

static void
suppress(float *logits, const int32_t *ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		logits[ids[i]] = -INFINITY;
}

static void
fill(float *x, int from, int to)
{
	int i;

	for (i = from; i < to; i++)
		x[i] = -INFINITY;
}

/* Rules 1-4 of ApplyTimestampRules, in openai's order. */
static void
timestamp_rules(const struct sampler_rules *r, const struct tok_specials *sp,
    int n_vocab, const int32_t *seq, int n, float *logits)
{
	int tb = sp->timestamp_begin, last_ts, penult_ts, i, floor_ts = -1;

	logits[sp->no_timestamps] = -INFINITY;
	last_ts = n >= 1 && seq[n - 1] >= tb;
	penult_ts = n < 2 || seq[n - 2] >= tb;
	if (last_ts) {
		if (penult_ts)
			fill(logits, tb, n_vocab);
		else
			fill(logits, 0, sp->eot);
	}
	for (i = n - 1; i >= 0; i--)
		if (seq[i] >= tb) {
			floor_ts = seq[i];
			break;
		}
	if (floor_ts >= 0) {
		if (!(last_ts && !penult_ts))
			floor_ts++;
		fill(logits, tb, floor_ts);
	}
	if (n == 0) {
		fill(logits, 0, tb);
		if (r->max_initial_timestamp_index >= 0)
			fill(logits, tb + r->max_initial_timestamp_index + 1,
			    n_vocab);
	}
}

/*
 * Rule 5: if the timestamps together are likelier than any text token,
 * sample a timestamp. Compared on logits: log_softmax shifts both sides
 * by the same log-sum-exp.
 */
static void
timestamp_vs_text(const struct tok_specials *sp, int n_vocab, float *logits)
{
	int tb = sp->timestamp_begin;
	float max_text = layer_max(logits, tb), ts;

	ts = layer_logsumexp(logits + tb, n_vocab - tb);
	if (ts != -INFINITY && ts > max_text)
		fill(logits, 0, tb);
}

void
sampler_filter(const struct sampler_rules *r, const int32_t *sampled,
    int n_sampled, float *logits)
{
	const struct sotto_model *m = r->model;
	const struct tok_specials *sp = tok_specials(m->tok);
	int n_vocab = m->hp.n_vocab;

	if (n_sampled == 0)
		suppress(logits, m->suppress_begin, m->n_suppress_begin);
	suppress(logits, m->suppress, m->n_suppress);
	if (r->without_timestamps)
		return;
	timestamp_rules(r, sp, n_vocab, sampled, n_sampled, logits);
	timestamp_vs_text(sp, n_vocab, logits);
}

void
sampler_log_softmax(const float *x, int n, float *out)
{
	layer_sub(x, layer_logsumexp(x, n), out, n);
}

/* The first index of the largest value: a vector max, then a search. */
int
sampler_argmax(const float *x, int n)
{
	float max = layer_max(x, n);
	int i;

	for (i = 0; i < n; i++)
		if (x[i] == max)
			return i;
	return 0;
}

#define SCAN	32	/* values sampler_topk passes over at once */

/* Whether one of x[0..SCAN) is above thr: compares that vectorise. */
static int
any_above(const float *x, float thr)
{
	int i, any = 0;

	for (i = 0; i < SCAN; i++)
		any |= x[i] > thr;
	return any;
}

/*
 * Insertion into the k kept, in index order; once k are kept, blocks of
 * SCAN with nothing above the least of them are passed over whole: the
 * values the one-by-one test passes over, in 6.6 us a vocabulary row
 * against 32 (k 6, as 5 beams take; AVX2 EPYC, least of 200).
 */
void
sampler_topk(const float *x, int n, int k, int *idx)
{
	int i, j, end, filled = 0;

	for (i = 0; i < n; i = end) {
		end = i + SCAN <= n ? i + SCAN : n;
		if (filled == k && end - i == SCAN && !any_above(x + i,
		    x[idx[k - 1]]))
			continue;
		for (; i < end; i++) {
			if (filled == k && !(x[i] > x[idx[k - 1]]))
				continue;
			j = filled < k ? filled++ : k - 1;
			while (j > 0 && x[i] > x[idx[j - 1]]) {
				idx[j] = idx[j - 1];
				j--;
			}
			idx[j] = i;
		}
	}
}

static double
rng_uniform(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return (double)(x >> 11) / (double)(1ULL << 53);
}

int
sampler_draw(const float *logits, int n, float temperature, uint64_t *rng,
    float *scratch)
{
	double sum = 0.0, u, acc = 0.0;
	int i;

	for (i = 0; i < n; i++)
		scratch[i] = logits[i] / temperature;
	sampler_log_softmax(scratch, n, scratch);
	for (i = 0; i < n; i++)
		sum += exp(scratch[i]);
	u = rng_uniform(rng) * sum;
	for (i = 0; i < n; i++) {
		acc += exp(scratch[i]);
		if (u < acc && scratch[i] != -INFINITY)
			return i;
	}
	return sampler_argmax(logits, n);
}

/* len / len(zlib.compress(text)) at zlib's default level. */
static float
ratio_of(const char *text, size_t len)
{
	uLongf out_len;
	Bytef buf[4096], *out = buf;
	float ratio;

	if (len == 0)
		return 0.0f;
	out_len = compressBound(len);
	if (out_len > sizeof(buf) && (out = malloc(out_len)) == NULL)
		return 0.0f;
	if (compress2(out, &out_len, (const Bytef *)text, len,
	    Z_DEFAULT_COMPRESSION) != Z_OK)
		out_len = len;
	ratio = (float)len / (float)out_len;
	if (out != buf)
		free(out);
	return ratio;
}

float
sampler_compression_ratio(const char *text)
{
	size_t len;

	while (*text == ' ' || (*text >= '\t' && *text <= '\r'))
		text++;
	len = strlen(text);
	while (len > 0 && (text[len - 1] == ' ' ||
	    (text[len - 1] >= '\t' && text[len - 1] <= '\r')))
		len--;
	return ratio_of(text, len);
}

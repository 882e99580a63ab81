/*
 * Aligning a window's text to its audio, openai/whisper's way: the
 * decoder reads the text once, teacher-forced, after the SOT sequence
 * and <|notimestamps|>; the cross-attention scores of the alignment
 * heads come out of that prefill (struct dec_tap); each head's weights
 * over the audio are a softmax, normalised per audio position over the
 * tokens, median-filtered along time; their mean is the similarity of
 * every token to every 20 ms of audio, through which dynamic time
 * warping finds the path. A token's time is where the path reaches it.
 *
 * The text is read in a prefill of its own, not taken from the decoding
 * that produced it: openai and faster-whisper align a prompt without the
 * previous text and without timestamp tokens, and the word times follow
 * them only from that prompt.
 *
 * ref: whisper/timing.py find_alignment(), median_filter(), dtw_cpu().
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "decode.h"
#include "err.h"
#include "layers.h"
#include "tokenizer.h"

#define MED	ALIGN_MEDIAN_WIDTH
#define HALF	(ALIGN_MEDIAN_WIDTH / 2)

/* One alignment: the tap the decoder fills, and what its heads add up. */
struct align {
	struct dec_tap tap;		/* first: fold() gets it back */
	const struct sotto_model *m;
	int8_t *slot;			/* [n_text_layer][n_text_head] */
	int n_heads;			/* distinct alignment heads */
	int row0, n_rows;		/* rows kept: <|notimestamps|> .. last
					   text token */
	int nf;				/* audio positions: n_frames / 2 */
	float *acc;			/* [n_rows][nf] sum over heads */
	float *pad;			/* [nf + 2 * HALF] one row, reflected */
	double *mean, *inv_std;		/* [nf] */
};

static void
swap_minmax(float *a, float *b)
{
	float lo = *a < *b ? *a : *b, hi = *a < *b ? *b : *a;

	*a = lo;
	*b = hi;
}

void
align_median7(const float *x, int m, float *out)
{
	int c;

	/* a sorting network of 16 comparators; element 3 is the median */
#pragma omp simd
	for (c = 0; c < m; c++) {
		float v[MED];
		int i;

		for (i = 0; i < MED; i++) {
			int at = c - HALF + i;

			at = at < 0 ? -at : at;
			at = at >= m ? 2 * (m - 1) - at : at;
			v[i] = x[at];
		}
		swap_minmax(&v[0], &v[6]);
		swap_minmax(&v[2], &v[3]);
		swap_minmax(&v[4], &v[5]);
		swap_minmax(&v[0], &v[2]);
		swap_minmax(&v[1], &v[4]);
		swap_minmax(&v[3], &v[6]);
		swap_minmax(&v[0], &v[1]);
		swap_minmax(&v[2], &v[5]);
		swap_minmax(&v[3], &v[4]);
		swap_minmax(&v[1], &v[2]);
		swap_minmax(&v[4], &v[6]);
		swap_minmax(&v[2], &v[3]);
		swap_minmax(&v[4], &v[5]);
		swap_minmax(&v[1], &v[2]);
		swap_minmax(&v[3], &v[4]);
		swap_minmax(&v[5], &v[6]);
		out[c] = v[3];
	}
}

/* Mean and 1 / std (population) of every column of w[n][nf]. */
static void
column_stats(struct align *a, const float *w, int n)
{
	int nf = a->nf, j, c;

	for (c = 0; c < nf; c++)
		a->mean[c] = a->inv_std[c] = 0.0;
	for (j = 0; j < n; j++)
		for (c = 0; c < nf; c++)
			a->mean[c] += w[(size_t)j * nf + c];
	for (c = 0; c < nf; c++)
		a->mean[c] /= n;
	for (j = 0; j < n; j++)
		for (c = 0; c < nf; c++) {
			double e = w[(size_t)j * nf + c] - a->mean[c];

			a->inv_std[c] += e * e;
		}
	for (c = 0; c < nf; c++)
		a->inv_std[c] = a->inv_std[c] > 0.0 ?
		    1.0 / sqrt(a->inv_std[c] / n) : 0.0;
}

/*
 * One head's scores w[n][nf] into the sum: softmax over the audio,
 * normalised over the tokens, median-filtered along the audio.
 */
static void
fold_head(struct align *a, float *w, int n)
{
	int nf = a->nf, j, c;

	for (j = 0; j < n; j++)
		layer_softmax(w + (size_t)j * nf, nf);
	column_stats(a, w, n);
	for (j = 0; j < a->n_rows; j++) {
		const float *row = w + (size_t)(a->row0 + j) * nf;
		float *acc = a->acc + (size_t)j * nf;

		for (c = 0; c < nf; c++)
			a->pad[c] = (float)((row[c] - a->mean[c]) *
			    a->inv_std[c]);
		if (nf > HALF)
			align_median7(a->pad, nf, a->pad + nf);
		else
			memcpy(a->pad + nf, a->pad, nf * sizeof(float));
		for (c = 0; c < nf; c++)
			acc[c] += a->pad[nf + c];
	}
}

static void
fold(struct dec_tap *tap, int layer, int n)
{
	struct align *a = (struct align *)tap;
	int n_head = a->m->hp.n_text_head, h, s;

	for (h = 0; h < n_head; h++)
		if ((s = a->slot[layer * n_head + h]) >= 0)
			fold_head(a, tap->buf + (size_t)s * n * a->nf, n);
}

/* trace codes: where cost[i][j] came from */
#define FROM_DIAG	0
#define FROM_UP		1	/* i - 1 */
#define FROM_LEFT	2	/* j - 1 */

/*
 * cost[i][j] = x[i - 1][j - 1] + the least of its three predecessors,
 * filled column by column (ties go as in openai's loop); cost is kept
 * for two columns, the trace for all.
 */
static void
dtw_fill(const float *x, int n, int m, float *prev, float *cur,
    uint8_t *trace)
{
	float *t;
	int i, j;

	prev[0] = 0.0f;
	for (i = 1; i <= n; i++)
		prev[i] = INFINITY;
	for (j = 1; j <= m; j++) {
		cur[0] = INFINITY;
		for (i = 1; i <= n; i++) {
			float c0 = prev[i - 1], c1 = cur[i - 1], c2 = prev[i];
			float c;
			uint8_t from;

			if (c0 < c1 && c0 < c2) {
				c = c0;
				from = FROM_DIAG;
			} else if (c1 < c0 && c1 < c2) {
				c = c1;
				from = FROM_UP;
			} else {
				c = c2;
				from = FROM_LEFT;
			}
			cur[i] = x[(size_t)(i - 1) * m + j - 1] + c;
			trace[(size_t)j * (n + 1) + i] = from;
		}
		t = prev;
		prev = cur;
		cur = t;
	}
}

int
align_dtw(const float *x, int n, int m, int *first)
{
	float *prev = malloc((n + 1) * sizeof(float));
	float *cur = malloc((n + 1) * sizeof(float));
	uint8_t *trace = malloc((size_t)(n + 1) * (m + 1));
	int i = n, j = m, from;

	if (prev == NULL || cur == NULL || trace == NULL) {
		free(prev);
		free(cur);
		free(trace);
		return SOTTO_ENOMEM;
	}
	dtw_fill(x, n, m, prev, cur, trace);
	for (i = 0; i < n; i++)
		first[i] = 0;
	/* back from the end; the last visit of a row is its first time */
	for (i = n; i > 0 || j > 0;) {
		if (i > 0 && j > 0)
			first[i - 1] = j - 1;
		from = i == 0 ? FROM_LEFT : j == 0 ? FROM_UP :
		    trace[(size_t)j * (n + 1) + i];
		if (from == FROM_DIAG) {
			i--;
			j--;
		} else if (from == FROM_UP)
			i--;
		else
			j--;
	}
	free(prev);
	free(cur);
	free(trace);
	return 0;
}

static void
align_free(struct align *a)
{
	free(a->slot);
	free(a->tap.buf);
	free(a->acc);
	free(a->pad);
	free(a->mean);
	free(a->inv_std);
}

/* Slots of the alignment heads, per layer from 0; buffers for n tokens. */
static int
align_init(struct align *a, const struct sotto_model *m, int n, int nf,
    char *err)
{
	int n_head = m->hp.n_text_head, n_layer = m->hp.n_text_layer;
	int per_layer[256] = { 0 }, most = 1, i;

	memset(a, 0, sizeof(*a));
	a->m = m;
	a->nf = nf;
	if (n_layer > 256 || n_head > 127)
		return err_set(err, SOTTO_EINVAL, "word timing: %d x %d "
		    "decoder heads", n_layer, n_head);
	if ((a->slot = malloc((size_t)n_layer * n_head)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memset(a->slot, -1, (size_t)n_layer * n_head);
	for (i = 0; i < m->n_align_heads; i++) {
		int l = m->align_heads[2 * i], h = m->align_heads[2 * i + 1];

		if (a->slot[l * n_head + h] >= 0)
			continue;
		a->slot[l * n_head + h] = (int8_t)per_layer[l]++;
		most = per_layer[l] > most ? per_layer[l] : most;
		a->n_heads++;
	}
	a->tap.slot = a->slot;
	a->tap.n_keys = nf;
	a->tap.fold = fold;
	a->tap.buf = malloc((size_t)most * n * nf * sizeof(float));
	a->pad = malloc(2 * (size_t)nf * sizeof(float));
	a->mean = malloc(nf * sizeof(double));
	a->inv_std = malloc(nf * sizeof(double));
	if (a->tap.buf == NULL || a->pad == NULL || a->mean == NULL ||
	    a->inv_std == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for word "
		    "timing");
	return 0;
}

/* prob[i]: text[i]'s probability among the text tokens at row row0 + i. */
static int
token_probs(struct sotto_state *st, int n, int row0, const int32_t *text,
    int n_text, float *prob, char *err)
{
	const struct sotto_model *m = st->model;
	int32_t eot = tok_specials(m->tok)->eot;
	int cols[WHISPER_MAX_BEAMS], i, k, nc, rc;

	for (i = 0; i < n_text; i += nc) {
		nc = n_text - i < WHISPER_MAX_BEAMS ? n_text - i :
		    WHISPER_MAX_BEAMS;
		for (k = 0; k < nc; k++)
			cols[k] = row0 + i + k;
		if ((rc = decoder_more_logits(st, n, cols, nc, st->logits,
		    err)) != 0)
			return rc;
		for (k = 0; k < nc; k++) {
			float *row = st->logits + (size_t)k * m->hp.n_vocab;

			decoder_exact_logit(st, n, cols[k], text[i + k], row);
			prob[i + k] = expf(row[text[i + k]] -
			    layer_logsumexp(row, eot));
		}
	}
	return 0;
}

/* jump[i] = seconds at which the path through -acc reaches row i. */
static int
warp(struct align *a, float *jump, char *err)
{
	size_t n = (size_t)a->n_rows * a->nf, i;
	int *first, r;

	for (i = 0; i < n; i++)
		a->acc[i] = -a->acc[i] / a->n_heads;
	if ((first = malloc(a->n_rows * sizeof(int))) == NULL ||
	    align_dtw(a->acc, a->n_rows, a->nf, first) != 0) {
		free(first);
		return err_set(err, SOTTO_ENOMEM, "out of memory for word "
		    "timing");
	}
	for (r = 0; r < a->n_rows; r++)
		jump[r] = (float)first[r] / ALIGN_TOKENS_PER_SECOND;
	free(first);
	return 0;
}

int
align_window(struct sotto_state *st, int language, enum sotto_task task,
    const int32_t *text, int n_text, size_t n_frames, float *jump,
    float *prob, char *err)
{
	const struct sotto_model *m = st->model;
	const struct tok_specials *sp = tok_specials(m->tok);
	int32_t sot[DECODE_SOT_MAX], *seq;
	int nf = (int)(n_frames / 2 < WHISPER_N_AUDIO_CTX ? n_frames / 2 :
	    WHISPER_N_AUDIO_CTX), s, n, row = 0, rc;
	struct align a;

	s = decode_sot_sequence(m, language, task, 0, sot);
	n = s + n_text + 2;
	if (n_text < 1 || n > m->hp.n_text_ctx)
		return err_set(err, SOTTO_EINVAL, "word timing: %d text tokens "
		    "(1 to %d)", n_text, m->hp.n_text_ctx - s - 2);
	if ((seq = malloc(n * sizeof(int32_t))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(seq, sot, s * sizeof(int32_t));
	seq[s] = sp->no_timestamps;
	memcpy(seq + s + 1, text, n_text * sizeof(int32_t));
	seq[n - 1] = sp->eot;
	if (nf < 1) {
		memset(jump, 0, (n_text + 1) * sizeof(float));
		nf = 1;		/* the probabilities are still wanted */
	}
	if ((rc = align_init(&a, m, n, nf, err)) != 0)
		goto out;
	a.row0 = s;
	a.n_rows = n_text + 1;
	if ((a.acc = calloc((size_t)a.n_rows * nf, sizeof(float))) == NULL) {
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
		goto out;
	}
	st->tap = &a.tap;
	rc = decoder_prefill(st, seq, n, &row, 1, st->logits, err);
	st->tap = NULL;
	if (rc == 0)
		rc = token_probs(st, n, s, text, n_text, prob, err);
	if (rc == 0 && n_frames / 2 >= 1)
		rc = warp(&a, jump, err);
out:
	align_free(&a);
	free(seq);
	return rc;
}

/*
 * One window's decoding, as openai/whisper decoding.py DecodingTask:
 * the prompt goes through the first-token path once, then every member of
 * the group (beams, or best_of samples) advances through the cached-token
 * path as one column of a [C][B] activation.
 *
 * ref: whisper/decoding.py _get_initial_tokens, _main_loop,
 * GreedyDecoder, BeamSearchDecoder, MaximumLikelihoodRanker.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "err.h"
#include "layers.h"
#include "sampler.h"
#include "tokenizer.h"

#define MAX_CTX		448
#define MAX_FINISHED	(2 * WHISPER_MAX_BEAMS)

/*
 * A member's tokens after the SOT sequence: the forced prefix, then the
 * sampled ones. n counts both.
 */
struct seq {
	int32_t tok[MAX_CTX];
	int n;
	float sum_logprob;
	int done;			/* ended with eot (greedy) */
};

struct cand {
	int source;
	int32_t token;
	float score;
};

struct task {
	struct sotto_state *st;
	const struct decode_opts *o;
	const struct tok_specials *sp;
	struct sampler_rules rules;
	int n_vocab;
	int32_t initial[MAX_CTX];
	int n_initial, sot_index, n_prefix;
	int n_group, beam, max_candidates;
	struct seq seqs[WHISPER_MAX_BEAMS], next[WHISPER_MAX_BEAMS];
	struct seq fin[MAX_FINISHED];
	int n_fin;
	struct cand cands[WHISPER_MAX_BEAMS * (WHISPER_MAX_BEAMS + 1)];
	float no_speech_prob;
};

static void
build_initial(struct task *t)
{
	const struct decode_opts *o = t->o;
	int n = 0, keep, i;

	if (o->prompt != NULL && o->n_prompt > 0) {
		keep = o->n_prompt < DECODE_MAX_PROMPT ? o->n_prompt :
		    DECODE_MAX_PROMPT;
		if (keep > MAX_CTX - 8 - t->n_prefix)
			keep = MAX_CTX - 8 - t->n_prefix;
		t->initial[n++] = t->sp->sot_prev;
		for (i = o->n_prompt - keep; i < o->n_prompt; i++)
			t->initial[n++] = o->prompt[i];
	}
	t->sot_index = n;
	n += decode_sot_sequence(t->st->model, o->language, o->task,
	    o->without_timestamps, t->initial + n);
	for (i = 0; i < t->n_prefix; i++)
		t->initial[n++] = o->prefix[i];
	t->n_initial = n;
}

int
decode_sot_sequence(const struct sotto_model *m, int language,
    enum sotto_task task, int without_timestamps,
    int32_t out[DECODE_SOT_MAX])
{
	const struct tok_specials *sp = tok_specials(m->tok);
	int n = 0;

	out[n++] = sp->sot;
	if (m->multilingual) {
		/* language i is sot + 1 + i (large-v3 has 100 of them, so
		   every id from <|translate|> on is one higher) */
		out[n++] = sp->sot + 1 + (language < 0 ? 0 : language);
		out[n++] = task == SOTTO_TASK_TRANSLATE ? sp->translate :
		    sp->transcribe;
	}
	if (without_timestamps)
		out[n++] = sp->no_timestamps;
	return n;
}

int
sotto_sot_sequence(const struct sotto_model *m, const char *language,
    enum sotto_task task, int without_timestamps, int32_t *out, char *err)
{
	int lang = 0;

	if (language != NULL && strcmp(language, "en") != 0) {
		if (!m->multilingual)
			return err_set(err, SOTTO_EINVAL, "%s is an "
			    "English-only model", m->name);
		if ((lang = tok_language_index(m->tok, language)) < 0)
			return err_set(err, SOTTO_EINVAL, "%s has no language "
			    "\"%s\"", m->name, language);
	}
	return decode_sot_sequence(m, lang, task, without_timestamps, out);
}

/* Greedy or sampling: each member picks its own next token. */
static void
update_greedy(struct task *t, float *logits)
{
	float *lp = t->st->logprobs;
	int b;

	for (b = 0; b < t->n_group; b++) {
		struct seq *s = &t->seqs[b];
		float *row = logits + (size_t)b * t->n_vocab;
		int32_t tok;

		if (s->done) {
			s->tok[s->n++] = t->sp->eot;
			continue;
		}
		sampler_filter(&t->rules, s->tok, s->n, row);
		if (t->o->temperature == 0.0f)
			tok = sampler_argmax(row, t->n_vocab);
		else
			tok = sampler_draw(row, t->n_vocab, t->o->temperature,
			    t->o->rng, lp);
		/* log_softmax(row)[tok], without writing the other n_vocab */
		s->sum_logprob += row[tok] - layer_logsumexp(row, t->n_vocab);
		s->tok[s->n++] = tok;
		s->done = tok == t->sp->eot;
	}
}

static int
same_history(const struct task *t, int a, int b)
{
	return t->seqs[a].n == t->seqs[b].n && memcmp(t->seqs[a].tok,
	    t->seqs[b].tok, t->seqs[a].n * sizeof(int32_t)) == 0;
}

/*
 * Candidates of every beam in beam order, with openai's dict semantics:
 * an identical sequence keeps its first position but takes the latest
 * source and score.
 */
static int
collect_candidates(struct task *t, float *logits)
{
	float *lp = t->st->logprobs;
	int idx[WHISPER_MAX_BEAMS + 1], n = 0, b, j, c;

	for (b = 0; b < t->n_group; b++) {
		float *row = logits + (size_t)b * t->n_vocab;

		sampler_filter(&t->rules, t->seqs[b].tok, t->seqs[b].n, row);
		sampler_log_softmax(row, t->n_vocab, lp);
		sampler_topk(lp, t->n_vocab, t->n_group + 1, idx);
		for (j = 0; j < t->n_group + 1; j++) {
			struct cand nc = { b, idx[j],
			    t->seqs[b].sum_logprob + lp[idx[j]] };

			for (c = 0; c < n; c++)
				if (t->cands[c].token == nc.token &&
				    same_history(t, t->cands[c].source, b))
					break;
			t->cands[c] = nc;
			if (c == n)
				n++;
		}
	}
	return n;
}

static int
cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->score != y->score)
		return x->score < y->score ? 1 : -1;
	return 0;
}

/* Stable sort by score, best first (qsort is not stable). */
static void
sort_candidates(struct cand *c, int n)
{
	int i, j;

	for (i = 1; i < n; i++) {
		struct cand v = c[i];

		for (j = i; j > 0 && cand_cmp(&c[j - 1], &v) > 0; j--)
			c[j] = c[j - 1];
		c[j] = v;
	}
}

static void
finish(struct task *t, const struct seq *s, float score)
{
	if (t->n_fin >= MAX_FINISHED)
		return;
	t->fin[t->n_fin] = *s;
	t->fin[t->n_fin].sum_logprob = score;
	t->n_fin++;
}

/* Beam search step; returns the source beam of each new beam in src. */
static int
update_beam(struct task *t, float *logits, int *src)
{
	struct seq newly[MAX_FINISHED];
	int n, i, saved = 0, n_new = 0, ret;

	n = collect_candidates(t, logits);
	sort_candidates(t->cands, n);
	for (i = 0; i < n && saved < t->n_group; i++) {
		const struct cand *c = &t->cands[i];
		struct seq *s = c->token == t->sp->eot ? &newly[n_new++] :
		    &t->next[saved];

		*s = t->seqs[c->source];
		s->sum_logprob = c->score;
		if (c->token != t->sp->eot) {
			s->tok[s->n++] = c->token;
			src[saved++] = c->source;
		}
	}
	for (i = 0; i < n_new && t->n_fin < t->max_candidates; i++)
		finish(t, &newly[i], newly[i].sum_logprob);
	memcpy(t->seqs, t->next, saved * sizeof(struct seq));
	ret = decoder_reorder(t->st, src, t->n_group);
	return ret;
}

/* Sum logprob over the sampled length (the prefix does not count). */
static float
rank_score(const struct task *t, const struct seq *s)
{
	int n = s->n - t->n_prefix;

	return n > 0 ? s->sum_logprob / (float)n : s->sum_logprob;
}

/* Cut greedy members at eot; top up beams; pick the best by logprob/len. */
static const struct seq *
finalize(struct task *t)
{
	const struct seq *pool = t->fin, *best;
	int n = t->n_fin, i, j, used[WHISPER_MAX_BEAMS] = { 0 };

	if (!t->beam) {
		for (i = 0; i < t->n_group; i++) {
			struct seq *s = &t->seqs[i];

			for (j = t->n_prefix; j < s->n &&
			    s->tok[j] != t->sp->eot; j++)
				;
			s->n = j;
		}
		pool = t->seqs;
		n = t->n_group;
	}
	while (t->beam && t->n_fin < t->n_group) {
		for (i = 0, j = -1; i < t->n_group; i++)
			if (!used[i] && (j < 0 || t->seqs[i].sum_logprob >
			    t->seqs[j].sum_logprob))
				j = i;
		used[j] = 1;
		finish(t, &t->seqs[j], t->seqs[j].sum_logprob);
		n = t->n_fin;
	}
	best = &pool[0];
	for (i = 1; i < n; i++)
		if (rank_score(t, &pool[i]) > rank_score(t, best))
			best = &pool[i];
	return best;
}

static int
prefill(struct task *t, char *err)
{
	struct sotto_state *st = t->st;
	int rows[2] = { t->sot_index, t->n_initial - 1 }, b, rc;
	float *lp = st->logprobs;

	if ((rc = decoder_reserve(st, t->n_group, err)) != 0 ||
	    (rc = decoder_prefill(st, t->initial, t->n_initial, rows, 2,
	    st->logits, err)) != 0)
		return rc;
	sampler_log_softmax(st->logits, t->n_vocab, lp);
	t->no_speech_prob = expf(lp[t->sp->no_speech]);
	for (b = 0; b < t->n_group; b++)
		memcpy(st->logits + (size_t)b * t->n_vocab,
		    st->logits + (size_t)t->n_vocab,
		    t->n_vocab * sizeof(float));
	return decoder_fork(st, t->n_group);
}

/* Whether the context has no room for a step after step i. */
static int
context_full(const struct task *t, int i)
{
	return t->n_initial + i + 1 > t->st->model->hp.n_text_ctx;
}

static int
main_loop(struct task *t, char *err)
{
	int32_t last[WHISPER_MAX_BEAMS];
	int src[WHISPER_MAX_BEAMS], i, b, rc, all_done;

	for (i = 0; i < DECODE_SAMPLE_LEN; i++) {
		if (i > 0) {
			for (b = 0; b < t->n_group; b++)
				last[b] = t->seqs[b].tok[t->seqs[b].n - 1];
			if ((rc = decoder_step(t->st, last, t->n_group,
			    t->st->logits, err)) != 0)
				return rc;
		}
		if (t->beam) {
			if ((rc = update_beam(t, t->st->logits, src)) != 0)
				return rc;
			all_done = t->n_fin >= t->max_candidates;
		} else {
			update_greedy(t, t->st->logits);
			for (b = 0, all_done = 1; b < t->n_group; b++)
				all_done &= t->seqs[b].done;
		}
		if (all_done || context_full(t, i))
			break;
	}
	return 0;
}

static int
task_init(struct task *t, struct sotto_state *st, const struct decode_opts *o)
{
	int b;

	memset(t, 0, sizeof(*t));
	t->st = st;
	t->o = o;
	t->sp = tok_specials(st->model->tok);
	t->n_vocab = st->model->hp.n_vocab;
	t->rules.model = st->model;
	t->rules.without_timestamps = o->without_timestamps;
	t->rules.max_initial_timestamp_index = 50;
	t->beam = o->temperature == 0.0f && o->beam_size > 1;
	t->n_group = t->beam ? o->beam_size :
	    (o->temperature > 0.0f && o->best_of > 1 ? o->best_of : 1);
	if (t->n_group > WHISPER_MAX_BEAMS)
		return -1;
	t->n_prefix = o->prefix != NULL ? o->n_prefix : 0;
	if (t->n_prefix < 0 || t->n_prefix > DECODE_SAMPLE_LEN)
		return -1;
	for (b = 0; b < t->n_group; b++) {
		if (t->n_prefix > 0)
			memcpy(t->seqs[b].tok, o->prefix, t->n_prefix *
			    sizeof(int32_t));
		t->seqs[b].n = t->n_prefix;
	}
	t->max_candidates = (int)lroundf(t->n_group * o->patience);
	if (t->max_candidates < 1)
		t->max_candidates = 1;
	if (t->max_candidates > MAX_FINISHED)
		t->max_candidates = MAX_FINISHED;
	build_initial(t);
	return 0;
}

/* The chosen sequence of a decoded task into ret, with its text. */
static int
task_result(struct task *t, struct decode_result *ret, char *err)
{
	const struct seq *best = finalize(t);
	int rc;

	ret->n_tokens = best->n - t->n_prefix;
	if (ret->n_tokens > DECODE_SAMPLE_LEN)
		ret->n_tokens = DECODE_SAMPLE_LEN;
	memcpy(ret->tokens, best->tok + t->n_prefix, ret->n_tokens *
	    sizeof(int32_t));
	ret->sum_logprob = best->sum_logprob;
	ret->avg_logprob = best->sum_logprob / (float)(best->n -
	    t->n_prefix + 1);
	ret->no_speech_prob = t->no_speech_prob;
	ret->temperature = t->o->temperature;
	if ((rc = tok_decode(t->st->model->tok, ret->tokens, ret->n_tokens,
	    &ret->text, err)) != 0)
		return rc;
	ret->compression_ratio = sampler_compression_ratio(ret->text);
	return 0;
}

static int
task_new(struct sotto_state *st, const struct decode_opts *o,
    struct task **ret, char *err)
{
	struct task *t;

	if ((t = malloc(sizeof(*t))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if (task_init(t, st, o) != 0) {
		free(t);
		return err_set(err, SOTTO_EINVAL, "at most %d beams or "
		    "samples and %d prefix tokens", WHISPER_MAX_BEAMS,
		    DECODE_SAMPLE_LEN);
	}
	*ret = t;
	return 0;
}

int
decode_window(struct sotto_state *st, const struct decode_opts *o,
    struct decode_result *ret, char *err)
{
	struct task *t;
	int rc;

	memset(ret, 0, sizeof(*ret));
	if ((rc = task_new(st, o, &t, err)) != 0)
		return rc;
	if ((rc = prefill(t, err)) == 0 && (rc = main_loop(t, err)) == 0)
		rc = task_result(t, ret, err);
	free(t);
	return rc;
}

/* Whether a greedy task is over after its token of step i. */
static int
greedy_over(const struct task *t, int i)
{
	return t->seqs[0].done || context_full(t, i);
}

/*
 * main_loop() of n greedy tasks in lockstep: every step, the tasks that
 * are not over advance as one batch (decoder_step_many), so the weights
 * are read once per token for all of them.
 */
static int
main_loop_many(struct task **t, int n, char *err)
{
	struct sotto_state *st[WHISPER_MAX_BEAMS];
	int32_t last[WHISPER_MAX_BEAMS];
	int live[WHISPER_MAX_BEAMS], n_live = 0, i, j, k, rc;
	float *logits = t[0]->st->logits;

	for (j = 0; j < n; j++) {
		update_greedy(t[j], t[j]->st->logits);
		if (!greedy_over(t[j], 0))
			live[n_live++] = j;
	}
	for (i = 1; i < DECODE_SAMPLE_LEN && n_live > 0; i++) {
		for (k = 0; k < n_live; k++) {
			const struct seq *s = &t[live[k]]->seqs[0];

			st[k] = t[live[k]]->st;
			last[k] = s->tok[s->n - 1];
		}
		if ((rc = decoder_step_many(st, last, n_live, logits,
		    err)) != 0)
			return rc;
		for (k = 0, j = 0; k < n_live; k++) {
			struct task *tk = t[live[k]];

			update_greedy(tk, logits + (size_t)k * tk->n_vocab);
			if (!greedy_over(tk, i))
				live[j++] = live[k];
		}
		n_live = j;
	}
	return 0;
}

int
decode_windows(struct sotto_state *const *st, const struct decode_opts *o,
    int n, struct decode_result *ret, char *err)
{
	struct task *t[WHISPER_MAX_BEAMS] = { 0 };
	int i, rc = 0, batch = n > 1 && n <= WHISPER_MAX_BEAMS;

	for (i = 0; i < n; i++) {
		memset(&ret[i], 0, sizeof(ret[i]));
		batch &= o[i].temperature == 0.0f && o[i].beam_size <= 1 &&
		    st[i]->model == st[0]->model;
	}
	if (!batch) {
		for (i = 0; i < n && rc == 0; i++)
			rc = decode_window(st[i], &o[i], &ret[i], err);
		return rc;
	}
	for (i = 0; i < n && rc == 0; i++)
		if ((rc = task_new(st[i], &o[i], &t[i], err)) == 0)
			rc = prefill(t[i], err);
	if (rc == 0)
		rc = main_loop_many(t, n, err);
	for (i = 0; i < n && rc == 0; i++)
		rc = task_result(t[i], &ret[i], err);
	for (i = 0; i < n; i++)
		free(t[i]);
	if (rc != 0)
		for (i = 0; i < n; i++)
			decode_result_clear(&ret[i]);
	return rc;
}

void
decode_result_clear(struct decode_result *r)
{
	free(r->text);
	r->text = NULL;
}

int
decode_detect_language(struct sotto_state *st, int *ret_index,
    float *ret_prob, float *probs, char *err)
{
	const struct sotto_model *m = st->model;
	const struct tok_specials *sp = tok_specials(m->tok);
	int n_lang = tok_n_languages(m->tok), row = 0, best, rc, i;
	float *lang_logits = st->logits + sp->sot + 1;

	if (n_lang == 0)
		return err_set(err, SOTTO_EINVAL, "an English-only model "
		    "cannot detect the language");
	if ((rc = decoder_prefill(st, &sp->sot, 1, &row, 1, st->logits,
	    err)) != 0)
		return rc;
	/* every language's logit, not only those in the head's exact top */
	decoder_logits_exact(st, sp->sot + 1, sp->sot + 1 + n_lang,
	    st->logits);
	best = sampler_argmax(lang_logits, n_lang);
	sampler_log_softmax(lang_logits, n_lang, st->logprobs);
	*ret_index = best;
	*ret_prob = expf(st->logprobs[best]);
	for (i = 0; probs != NULL && i < n_lang; i++)
		probs[i] = expf(st->logprobs[i]);
	return 0;
}

int
sotto_detect_language(struct sotto_state *st, float *probs, char *err)
{
	float prob;
	int best, rc;

	if ((rc = decode_detect_language(st, &best, &prob, probs, err)) != 0)
		return rc;
	return best;
}

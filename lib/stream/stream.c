/*
 * Streaming transcription: audio arrives in pieces, and every step (by
 * default each 1 s of new audio) the current window is decoded again.
 *
 * The window is the pending audio from window_start, at most 30 s of it
 * per step (push never drops audio: a backlog beyond 30 s waits for the
 * window to slide). A step computes the log-mel of the window as
 * sotto_transcribe() computes one window's (frames of real audio
 * normalised by their own maximum, the rest of the 3000 frames zero),
 * runs the encoder on the full 30 s, and decodes greedily (or with beams)
 * at temperature 0 with
 *   prompt: the stream's vocabulary, if it has one, as <|startofprev|>
 *           context (not the committed text before the window: see
 *           stream_decode_setup);
 *   prefix: committed tokens still inside the window, forced after the
 *           SOT sequence.
 * stream-commit.c then commits the words two consecutive hypotheses
 * agree on, and stream-slide.c moves the window: once it is past
 * STREAM_SLIDE_MS, or Whisper stopped short of its end, to the end of
 * the last committed segment.
 *
 * Silence costs little: a window where no 100 ms block reaches
 * STREAM_GATE_DBFS (RMS, -50 dBFS: well under speech at -40..-10 and
 * over a quiet microphone's floor), or with a VAD where no chunk is
 * speech (stream-vad.c), skips the encoder; a window Whisper
 * calls no-speech (see stream_no_speech()) yields no text. Either way, with
 * nothing committed in the window it slides forward keeping the last
 * STREAM_KEEP_MS of audio.
 *
 * Progress is forced: past STREAM_FORCE_MS the settled words of the
 * hypothesis are committed whether two hypotheses agree or not, and the
 * window slides to them; a full 30 s window with nowhere to cut commits
 * all of it. finish() commits everything: the last hypothesis if no
 * audio came after it, or only silence that began STREAM_TAIL_MS or
 * more before the last step's end (the speech ended inside the window
 * that hypothesis read: a voice command whose client stops after its
 * own VAD heard a pause); else what is left decoded once more, unforced
 * (see stream_decode_last), and the last hypothesis after all when that
 * decode has no words (keep_hyp).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "err.h"
#include "mel.h"
#include "stream.h"
#include "tokenizer.h"

#define STREAM_STEP_MS		1000
#define STREAM_MIN_STEP_MS	100
#define STREAM_GATE_DBFS	(-50.0)
#define STREAM_GATE_BLOCK	1600		/* 100 ms */
#define STREAM_KEEP_MS		1000
#define STREAM_TAIL_MS		300		/* silence the last step saw */
#define STREAM_FORCE_MS		25000
#define STREAM_DETECT_MS	3000		/* language settles after */
#define STREAM_MAX_PREFIX	160		/* tokens, else force */
#define STREAM_NO_SPEECH	0.6f
#define STREAM_LOGPROB		(-1.0f)

#define MS(x)			((size_t)(x) * (SOTTO_SAMPLE_RATE / 1000))

void
sotto_stream_params_init(struct sotto_stream_params *p)
{
	memset(p, 0, sizeof(*p));
	p->task = SOTTO_TASK_TRANSCRIBE;
	p->step_ms = STREAM_STEP_MS;
	p->beam_size = 1;
	p->vad_threshold = 0.5f;
}

static int
resolve_language(struct sotto_stream *s, char *err)
{
	const struct sotto_model *m = s->model;
	const char *lang = s->p.language;
	int auto_lang = lang == NULL || strcmp(lang, "auto") == 0;

	s->language = -1;
	s->p.language = NULL;
	if (!m->multilingual) {
		if (!auto_lang && strcmp(lang, "en") != 0)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot transcribe \"%s\"",
			    m->name, lang);
		if (s->p.task == SOTTO_TASK_TRANSLATE)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot translate", m->name);
		return 0;
	}
	if (auto_lang) {
		s->detect = 1;
		return 0;
	}
	if ((s->language = tok_language_index(m->tok, lang)) < 0)
		return err_set(err, SOTTO_EINVAL, "unknown language \"%s\"",
		    lang);
	return 0;
}

static int
check_params(const struct sotto_stream_params *p, char *err)
{
	if (p->step_ms < STREAM_MIN_STEP_MS || p->step_ms > 30000)
		return err_set(err, SOTTO_EINVAL, "step of %d ms: use %d to "
		    "30000", p->step_ms, STREAM_MIN_STEP_MS);
	if (p->beam_size < 1 || p->beam_size > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "beam size %d: use 1 to %d",
		    p->beam_size, WHISPER_MAX_BEAMS);
	if (p->task != SOTTO_TASK_TRANSCRIBE &&
	    p->task != SOTTO_TASK_TRANSLATE)
		return err_set(err, SOTTO_EINVAL, "unknown task");
	return 0;
}

int
sotto_stream_new(const struct sotto_model *m,
    const struct sotto_stream_params *params, struct sotto_stream **ret,
    char *err)
{
	struct sotto_stream_params defaults;
	struct sotto_stream *s;
	int rc;

	*ret = NULL;
	if (params == NULL) {
		sotto_stream_params_init(&defaults);
		params = &defaults;
	}
	if ((rc = check_params(params, err)) != 0)
		return rc;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	s->model = m;
	s->p = *params;
	s->p.prompt = NULL;	/* borrowed only here */
	s->tb = tok_specials(m->tok)->timestamp_begin;
	s->rng = 0x5eed5eed5eedULL;
	s->text_end = -1.0;
	if ((rc = resolve_language(s, err)) != 0 ||
	    (rc = stream_vocab_init(s, params->prompt, err)) != 0) {
		free(s);
		return rc;
	}
	s->cap_pcm = 2 * WHISPER_N_SAMPLES;
	if ((s->pcm = bigmem_alloc(s->cap_pcm * sizeof(float))) == NULL ||
	    (s->st = sotto_state_new(m)) == NULL) {
		sotto_stream_free(s);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	if ((rc = stream_vad_init(s, err)) != 0) {
		sotto_stream_free(s);
		return rc;
	}
	*ret = s;
	return 0;
}

void
sotto_stream_free(struct sotto_stream *s)
{
	if (s == NULL)
		return;
	stream_commit_reset(s);
	stream_vad_free(s);
	free(s->finals);
	bigmem_free(s->pcm);
	sotto_state_free(s->st);
	free(s);
}

int
sotto_stream_push(struct sotto_stream *s, const float *pcm, size_t n,
    char *err)
{
	size_t cap;
	float *p;

	if (s->finished)
		return err_set(err, SOTTO_EINVAL, "the stream is finished");
	if (n > 0 && pcm == NULL)
		return err_set(err, SOTTO_EINVAL, "no samples");
	if (s->n_pcm + n > s->cap_pcm) {
		for (cap = s->cap_pcm; cap < s->n_pcm + n; cap *= 2)
			;
		if ((p = bigmem_realloc(s->pcm, cap * sizeof(float))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		s->pcm = p;
		s->cap_pcm = cap;
	}
	memcpy(s->pcm + s->n_pcm, pcm, n * sizeof(float));
	s->n_pcm += n;
	s->received += n;
	return 0;
}

int
sotto_stream_due(const struct sotto_stream *s)
{
	return !s->finished && s->received - s->stepped >= MS(s->p.step_ms);
}

/* Every 100 ms block of pcm[n] is quieter than the gate. */
int
stream_silent(const float *pcm, size_t n)
{
	double thr = pow(10.0, STREAM_GATE_DBFS / 10.0), sum;
	size_t i, j, len;

	for (i = 0; i < n; i += STREAM_GATE_BLOCK) {
		len = n - i < STREAM_GATE_BLOCK ? n - i : STREAM_GATE_BLOCK;
		for (j = 0, sum = 0.0; j < len; j++)
			sum += (double)pcm[i + j] * pcm[i + j];
		if (sum / len >= thr)
			return 0;
	}
	return 1;
}

/* Log-mel of the window into st->mel_window, then the encoder. */
int
stream_encode(struct sotto_stream *s, size_t n, char *err)
{
	struct sotto_state *st = s->st;
	int n_mels = s->model->hp.n_mels, i, rc;
	size_t cols = n / WHISPER_HOP;
	float max;

	s->enc_n = 0;

	if ((rc = mel_log(st->mel, s->pcm, n, WHISPER_N_SAMPLES, 0, cols,
	    st->mel_window, WHISPER_N_FRAMES, &max, err)) != 0)
		return rc;
	mel_normalize(st->mel_window, n_mels, cols, WHISPER_N_FRAMES, max);
	for (i = 0; i < n_mels; i++)
		memset(st->mel_window + (size_t)i * WHISPER_N_FRAMES + cols, 0,
		    (WHISPER_N_FRAMES - cols) * sizeof(float));
	if ((rc = encoder_forward(st, st->mel_window, err)) != 0)
		return rc;
	s->enc_start = s->window_start;
	s->enc_n = n;
	return 0;
}

/* Detect the language until the window is long enough to trust it. */
static int
detect(struct sotto_stream *s, size_t n, int final, char *err)
{
	float prob;
	int rc;

	if (!s->detect)
		return 0;
	if ((rc = decode_detect_language(s->st, &s->language, &prob, NULL,
	    err)) != 0)
		return rc;
	s->detected = 1;
	s->language_prob = prob;
	if (final || n >= MS(STREAM_DETECT_MS))
		s->detect = 0;
	return 0;
}

/* Whether committed words are in the window. */
static int
has_context(const struct sotto_stream *s)
{
	return stream_has_text(s, s->prefix, s->n_prefix);
}

/*
 * Whether the decoded window holds no speech: Whisper's rule (no-speech
 * probability over 0.6 with an average log-probability under -1), or a
 * repetition loop the retry without the prompt did not cure (on a
 * window of clicks and room noise: "Bop, bop, bop, ..."). The no-speech
 * probability alone is no guide: a few seconds of speech in a window of
 * silence score 0.7-0.9.
 */
int
stream_no_speech(const struct decode_result *res)
{
	if (res->compression_ratio > STREAM_COMPRESSION)
		return 1;
	return res->no_speech_prob > STREAM_NO_SPEECH &&
	    res->avg_logprob < STREAM_LOGPROB;
}

/* Nothing was said: slide over the silence, keeping a little. */
static void
skip_silence(struct sotto_stream *s, size_t n)
{
	s->n_hyp = 0;
	s->hyp_valid = 0;
	if (!has_context(s) && n > MS(STREAM_KEEP_MS))
		stream_drop(s, n - MS(STREAM_KEEP_MS));
}

/*
 * Slide past committed segments once the window is long or the decoder
 * stopped short; past STREAM_FORCE_MS commit the settled words whether
 * two hypotheses agree or not, and slide to them.
 */
static int
advance(struct sotto_stream *s, size_t n, int final, char *err)
{
	int full = n >= WHISPER_N_SAMPLES, rc;

	if (final && !full) {
		stream_drop(s, n);
		return 0;
	}
	if ((n >= MS(STREAM_SLIDE_MS) || stream_stalled(s)) &&
	    stream_slide(s))
		return 0;
	if (stream_slide_text(s))
		return 0;
	if (!full && n < MS(STREAM_FORCE_MS) &&
	    s->n_prefix < STREAM_MAX_PREFIX)
		return 0;
	if ((rc = stream_commit_force(s, err)) != 0)
		return rc;
	if (stream_slide(s) || stream_slide_words(s) || !full)
		return 0;
	/* No room left and nowhere to cut: all of it is final. */
	if ((rc = stream_commit(s, s->hyp, s->n_hyp, 1, err)) != 0)
		return rc;
	stream_drop(s, n);
	return 0;
}

/*
 * A window up to its decode: the first (at most 30 s) of the pending
 * audio, skipped when silent, else encoded; *need says whether it is to
 * be decoded (then window_end commits).
 */
static int
window_begin(struct sotto_stream *s, int final, int *need, char *err)
{
	size_t n = s->n_pcm < WHISPER_N_SAMPLES ? s->n_pcm : WHISPER_N_SAMPLES;
	int rc, no_speech;

	*need = 0;
	s->n_win = n;
	if (n == 0)
		return 0;
	if ((rc = stream_vad_silent(s, n, final, &no_speech, err)) != 0)
		return rc;
	if (no_speech || stream_silent(s->pcm, n)) {
		skip_silence(s, n);
		if (final)
			stream_drop(s, n);
		return 0;
	}
	if ((rc = stream_encode(s, n, err)) != 0 ||
	    (rc = detect(s, n, final, err)) != 0)
		return rc;
	*need = 1;
	return 0;
}

/*
 * A decoded window (res, its new tokens from p on): the agreed part
 * committed, or with final all of it; then the window moves.
 */
static int
window_end(struct sotto_stream *s, int final, struct decode_result *res,
    int p, char *err)
{
	size_t n = s->n_win;
	int rc;

	if (!has_context(s))
		p += stream_repeat(s, res->tokens + p, res->n_tokens - p);
	if (stream_no_speech(res)) {
		skip_silence(s, n);
		res->n_tokens = p = 0;
		if (!has_context(s) && !final)
			return 0;
	}
	if ((rc = stream_time_text(s, res->tokens + p, res->n_tokens - p,
	    err)) != 0 ||
	    (rc = stream_commit(s, res->tokens + p, res->n_tokens - p, final,
	    err)) != 0)
		return rc;
	return advance(s, n, final, err);
}

/*
 * The last decode of the window (res, new tokens from p on) has no words
 * where the last step's hypothesis of it has: the hypothesis is kept. A
 * decode is one draw of a decoder that at times ends the text at once
 * (at the end of a 4 min stream, the forced prefix, a long prompt and
 * 1 s more audio gave nothing where the step before had "I have a
 * thousand thoughts about that thing. This is a long stop."); a live
 * step gets another chance as audio comes, the last one does not.
 */
static int
keep_hyp(const struct sotto_stream *s, const struct decode_result *res,
    int p)
{
	return s->hyp_valid && stream_has_words(s, s->hyp, s->n_hyp) &&
	    (stream_no_speech(res) || !stream_has_words(s, res->tokens + p,
	    res->n_tokens - p));
}

static int
run_window(struct sotto_stream *s, int final, char *err)
{
	struct decode_result res = { 0 };
	int need, p = 0, rc;

	if ((rc = window_begin(s, final, &need, err)) != 0 || !need)
		return rc;
	rc = final ? stream_decode_last(s, &res, &p, err) :
	    stream_decode(s, &res, 1, err);
	if (rc == 0 && final && keep_hyp(s, &res, p)) {
		if ((rc = stream_time_text(s, s->hyp, s->n_hyp, err)) == 0 &&
		    (rc = stream_commit(s, s->hyp, s->n_hyp, 1, err)) == 0)
			rc = advance(s, s->n_win, 1, err);
	} else if (rc == 0)
		rc = window_end(s, final, &res, p, err);
	decode_result_clear(&res);
	return rc;
}

void
stream_fill_update(struct sotto_stream *s, struct sotto_stream_update *u)
{
	memset(u, 0, sizeof(*u));
	u->finals = s->finals;
	u->n_finals = s->n_finals;
	u->first_id = s->n_finals > 0 ? s->first_id : s->next_id;
	u->partial = s->partial != NULL ? s->partial : "";
	u->partial_start = s->partial_start;
	u->partial_end = s->partial_end;
	u->audio_time = (double)s->received / SOTTO_SAMPLE_RATE;
	if (s->detected) {
		u->language = tok_language_code(s->model->tok, s->language);
		u->language_prob = s->language_prob;
		u->language_settled = !s->detect;
	}
}

/*
 * sotto_stream_step() of up to WHISPER_MAX_BEAMS streams: each up to its
 * decode, the decodes as one batch (one stream: decode_window), then
 * each to its update.
 */
static int
step_group(struct sotto_stream *const *s, int n,
    struct sotto_stream_update *ret, int *rc, char (*err)[SOTTO_ERR_MAX])
{
	struct sotto_state *st[WHISPER_MAX_BEAMS];
	struct decode_opts o[WHISPER_MAX_BEAMS];
	struct decode_result res[WHISPER_MAX_BEAMS];
	int at[WHISPER_MAX_BEAMS], k = 0, i, j, need, brc, failed = 0;
	char berr[SOTTO_ERR_MAX];

	for (i = 0; i < n; i++) {
		err[i][0] = '\0';
		stream_commit_reset(s[i]);
		if (s[i]->finished) {
			rc[i] = err_set(err[i], SOTTO_EINVAL, "the stream is "
			    "finished");
			continue;
		}
		rc[i] = 0;
		if (s[i]->received == s[i]->stepped && s[i]->hyp_valid)
			continue;
		s[i]->stepped = s[i]->received;
		if ((rc[i] = window_begin(s[i], 0, &need, err[i])) == 0 &&
		    need) {
			stream_decode_setup(s[i], 1, &o[k]);
			st[k] = s[i]->st;
			at[k++] = i;
		}
	}
	brc = k > 0 ? decode_windows(st, o, k, res, berr) : 0;
	for (j = 0; j < k; j++) {
		i = at[j];
		if (brc != 0) {
			rc[i] = err_set(err[i], brc, "%s", berr);
			continue;
		}
		if ((rc[i] = stream_decode_retry(s[i], &o[j], &res[j], err[i])) == 0)
			rc[i] = window_end(s[i], 0, &res[j], 0, err[i]);
		decode_result_clear(&res[j]);
	}
	for (i = 0; i < n; i++) {
		if (rc[i] == 0)
			rc[i] = stream_commit_partial(s[i], err[i]);
		stream_fill_update(s[i], &ret[i]);
		failed += rc[i] != 0;
	}
	return failed;
}

int
sotto_stream_step(struct sotto_stream *s, struct sotto_stream_update *ret,
    char *err)
{
	char e[1][SOTTO_ERR_MAX];
	int rc;

	step_group(&s, 1, ret, &rc, e);
	if (rc != 0 && err != NULL)
		memcpy(err, e[0], SOTTO_ERR_MAX);
	return rc;
}

int
sotto_stream_step_many(struct sotto_stream *const *s, int n,
    struct sotto_stream_update *ret, int *rc, char (*err)[SOTTO_ERR_MAX])
{
	int i, m, failed = 0;

	/* a batch shares one model's weights (a server may hold two) */
	for (i = 0; i < n; i += m) {
		for (m = 1; i + m < n && m < WHISPER_MAX_BEAMS &&
		    s[i + m]->model == s[i]->model; m++)
			;
		failed += step_group(s + i, m, ret + i, rc + i, err + i);
	}
	return failed;
}

/*
 * Whether what the last step read stands for all the audio: none came
 * after it, or all of it, and the last STREAM_TAIL_MS the step read, is
 * under the gate.
 */
static int
nothing_after_step(const struct sotto_stream *s)
{
	uint64_t from;

	if (s->received == s->stepped)
		return 1;
	if (s->stepped < s->window_start + MS(STREAM_TAIL_MS))
		return 0;
	from = s->stepped - MS(STREAM_TAIL_MS) - s->window_start;
	return from < s->n_pcm && stream_silent(s->pcm + from, s->n_pcm - from);
}

/*
 * End of stream. The last step's hypothesis is committed as it is when
 * nothing but silence came since (nothing_after_step), unless it stopped
 * short (see stream-decode.c); otherwise each remaining window is decoded
 * once more.
 */
int
sotto_stream_finish(struct sotto_stream *s, struct sotto_stream_update *ret,
    char *err)
{
	size_t before;
	int rc = 0;

	stream_commit_reset(s);
	if (s->finished)
		rc = err_set(err, SOTTO_EINVAL, "the stream is finished");
	else if (nothing_after_step(s) && s->hyp_valid &&
	    s->n_pcm <= WHISPER_N_SAMPLES &&
	    !stream_stopped_short(s, s->hyp, s->n_hyp, 1)) {
		rc = stream_commit(s, s->hyp, s->n_hyp, 1, err);
		if (rc == 0)
			stream_drop(s, s->n_pcm);
	} else
		while (rc == 0 && s->n_pcm > 0) {
			before = s->n_pcm;
			rc = run_window(s, 1, err);
			if (rc == 0 && s->n_pcm == before)
				stream_drop(s, s->n_pcm);
		}
	s->finished = 1;
	s->stepped = s->received;
	if (rc == 0)
		rc = stream_commit_partial(s, err);
	stream_fill_update(s, ret);
	return rc;
}

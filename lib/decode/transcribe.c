/*
 * Long-form transcription, as openai/whisper transcribe(): seek through
 * the audio in 30 s windows, decode each with temperature fallback, cut
 * segments at timestamp pairs, skip silence, and condition each window on
 * the text before it.
 *
 * Memory stays bounded for any length: the log-mel of each window is
 * computed from the samples when it is needed (after one pass for the
 * global maximum) instead of holding the whole file's spectrogram, and
 * from a reader only the current window's samples are held
 * (transcribe-audio.c).
 *
 * ref: whisper/transcribe.py transcribe(), decode_with_fallback().
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "err.h"
#include "mel.h"
#include "model.h"
#include "tokenizer.h"
#include "transcribe.h"

static const float default_temperatures[] = {
	0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f
};

void
sotto_transcribe_params_init(struct sotto_transcribe_params *p)
{
	memset(p, 0, sizeof(*p));
	p->beam_size = 1;
	p->best_of = 5;
	p->patience = 1.0f;
	p->compression_ratio_threshold = 2.4f;
	p->logprob_threshold = -1.0f;
	p->no_speech_threshold = 0.6f;
	p->condition_on_previous_text = 1;
	p->silence_threshold_db = -60.0f;
	p->seed = 0x5eed5eed5eedULL;
}

/*
 * mel_window = mel[:, seek : seek + size] normalised; with zero_pad the
 * rest of the 3000 frames is 0 (pad_or_trim of the slice), otherwise the
 * padded signal's own frames (language detection on mel[:, :3000]).
 */
static int
window_mel(struct sotto_state *st, struct run *r, size_t seek, size_t size,
    int zero_pad, char *err)
{
	int n_mels = st->model->hp.n_mels, rc, i;
	size_t cols = zero_pad ? size : WHISPER_N_FRAMES;
	struct mel_span sp;

	audio_span(&r->audio, &sp);
	if ((rc = mel_log_span(st->mel, &sp, seek, cols, st->mel_window,
	    WHISPER_N_FRAMES, NULL, err)) != 0)
		return rc;
	mel_normalize(st->mel_window, n_mels, cols, WHISPER_N_FRAMES,
	    r->mel_max);
	for (i = 0; i < n_mels; i++)
		memset(st->mel_window + (size_t)i * WHISPER_N_FRAMES + cols, 0,
		    (WHISPER_N_FRAMES - cols) * sizeof(float));
	return 0;
}

/* Have the samples of the window at frame seek (and the STFT's 200). */
static int
hold_window(struct run *r, size_t seek, char *err)
{
	size_t from = seek * WHISPER_HOP;

	from = from > MEL_N_FFT / 2 ? from - MEL_N_FFT / 2 : 0;
	return audio_hold(&r->audio, from, seek * WHISPER_HOP +
	    WHISPER_N_SAMPLES + MEL_N_FFT / 2, err);
}

static int
needs_fallback(const struct sotto_transcribe_params *p,
    const struct decode_result *d)
{
	int fallback = 0;

	if (p->compression_ratio_threshold > 0.0f &&
	    d->compression_ratio > p->compression_ratio_threshold)
		fallback = 1;
	if (d->avg_logprob < p->logprob_threshold)
		fallback = 1;
	if (d->no_speech_prob > p->no_speech_threshold &&
	    d->avg_logprob < p->logprob_threshold)
		fallback = 0;
	return fallback;
}

/* Decode the encoded window, raising the temperature until it passes. */
static int
decode_with_fallback(struct sotto_state *st, struct run *r,
    struct decode_result *res, char *err)
{
	const struct sotto_transcribe_params *p = r->params;
	struct decode_opts o = { 0 };
	int i, rc;

	o.prompt = r->tokens + r->prompt_from;
	o.n_prompt = r->n_tokens - r->prompt_from;
	o.language = r->language;
	o.task = p->task;
	o.beam_size = p->beam_size;
	o.best_of = p->best_of;
	o.patience = p->patience;
	o.without_timestamps = p->without_timestamps;
	o.rng = &r->rng;
	for (i = 0; i < r->n_temperatures; i++) {
		decode_result_clear(res);
		o.temperature = r->temperatures[i];
		if ((rc = decode_window(st, &o, res, err)) != 0)
			return rc;
		if (!needs_fallback(p, res))
			break;
	}
	return 0;
}

static int
detect_language(struct sotto_state *st, struct run *r, char *err)
{
	int rc;

	if ((rc = hold_window(r, 0, err)) != 0 ||
	    (rc = window_mel(st, r, 0, WHISPER_N_FRAMES, 0, err)) != 0 ||
	    (rc = encoder_forward(st, st->mel_window, err)) != 0)
		return rc;
	return decode_detect_language(st, &r->language, &r->language_prob,
	    NULL, err);
}

/*
 * Tell the caller how far we are and which segments are new. The last
 * window ends at the last whole mel frame, up to a hop before the last
 * sample: done is then all of it, so that progress ends at 100%.
 */
static int
report_progress(const struct run *r, int first, char *err)
{
	const struct sotto_transcribe_params *p = r->params;
	size_t done = r->seek >= r->content ? r->n :
	    r->seek * WHISPER_HOP < r->n ? r->seek * WHISPER_HOP : r->n;

	if (p->progress != NULL && p->progress(p->progress_user, done, r->n,
	    r->res->segments + first, r->res->n_segments - first) != 0)
		return err_set(err, SOTTO_ECANCELED, "canceled");
	return 0;
}

/*
 * Whether samples [from, from + n) are all quieter than the threshold
 * (RMS in dBFS). Whisper hallucinates on digital silence ("You You You"),
 * and a window with no audible signal has no speech to lose.
 */
static int
window_silent(const struct run *r, size_t from, size_t n)
{
	const float *x;
	double sum = 0.0, rms;
	size_t i;

	if (r->params->silence_threshold_db <= -200.0f)
		return 0;
	if (from >= r->n)
		return 1;
	if (n > r->n - from)
		n = r->n - from;
	x = r->audio.pcm + (from - r->audio.off);	/* hold_window() */
	for (i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	rms = n > 0 ? sqrt(sum / n) : 0.0;
	return rms <= 0.0 || 20.0 * log10(rms) < r->params->silence_threshold_db;
}

/* One window at r->seek: encode, decode, cut segments, advance. */
static int
transcribe_window(struct sotto_state *st, struct run *r, char *err)
{
	const struct sotto_transcribe_params *p = r->params;
	struct decode_result res = { 0 };
	size_t size = r->content - r->seek < WHISPER_N_FRAMES ?
	    r->content - r->seek : WHISPER_N_FRAMES;
	int rc, skip, first = r->res->n_segments;

	if ((rc = hold_window(r, r->seek, err)) != 0)
		return rc;
	if (window_silent(r, r->seek * WHISPER_HOP, size * WHISPER_HOP)) {
		r->seek += size;
		return report_progress(r, first, err);
	}
	if ((rc = window_mel(st, r, r->seek, size, 1, err)) != 0 ||
	    (rc = encoder_forward(st, st->mel_window, err)) != 0 ||
	    (rc = decode_with_fallback(st, r, &res, err)) != 0)
		goto out;
	skip = res.no_speech_prob > p->no_speech_threshold &&
	    !(res.avg_logprob > p->logprob_threshold);
	if (skip)
		r->seek += size;
	else if ((rc = segments_add(st, r, &res, size, err)) != 0)
		goto out;
	else if (!p->condition_on_previous_text || res.temperature > 0.5f)
		r->prompt_from = r->n_tokens;
	rc = report_progress(r, first, err);
out:
	decode_result_clear(&res);
	return rc;
}

static int
resolve_language(struct sotto_state *st, struct run *r, char *err)
{
	const struct sotto_model *m = st->model;
	const char *lang = r->params->language;
	int auto_lang = lang == NULL || strcmp(lang, "auto") == 0;

	r->language = -1;
	if (!m->multilingual) {
		if (!auto_lang && strcmp(lang, "en") != 0)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot transcribe \"%s\"",
			    m->name, lang);
		if (r->params->task == SOTTO_TASK_TRANSLATE)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot translate", m->name);
		return 0;
	}
	if (!auto_lang) {
		if ((r->language = tok_language_index(m->tok, lang)) < 0)
			return err_set(err, SOTTO_EINVAL, "unknown language "
			    "\"%s\"", lang);
		return 0;
	}
	return detect_language(st, r, err);
}

static int
run_init(struct run *r, struct sotto_state *st,
    const struct sotto_transcribe_params *p, char *err)
{
	memset(r, 0, sizeof(*r));
	r->model = st->model;
	r->params = p;
	r->temperatures = p->temperatures != NULL ? p->temperatures :
	    default_temperatures;
	r->n_temperatures = p->temperatures != NULL ? p->n_temperatures :
	    (int)(sizeof(default_temperatures) / sizeof(float));
	r->rng = p->seed != 0 ? p->seed : 1;
	r->language_prob = 1.0f;
	if (r->n_temperatures < 1 || p->beam_size < 1 || p->best_of < 1 ||
	    p->beam_size > WHISPER_MAX_BEAMS || p->best_of > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "beam size and best-of must "
		    "be 1..%d, with at least one temperature",
		    WHISPER_MAX_BEAMS);
	if ((r->res = calloc(1, sizeof(*r->res))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if (p->initial_prompt != NULL && *p->initial_prompt != '\0')
		return prompt_init(r, p->initial_prompt, err);
	return 0;
}

/* The global maximum (the first pass of a reader), then the seek loop. */
static int
run_all(struct sotto_state *st, struct run *r, char *err)
{
	int rc;

	if ((rc = audio_global_max(st, &r->audio, &r->mel_max, err)) != 0 ||
	    (rc = audio_rewind(&r->audio, err)) != 0)
		return rc;
	r->n = r->audio.n;
	r->content = mel_total_frames(r->n, WHISPER_N_SAMPLES) -
	    WHISPER_N_FRAMES;
	if ((rc = resolve_language(st, r, err)) != 0 ||
	    (rc = result_set_language(r, err)) != 0)
		return rc;
	while (r->seek < r->content)
		if ((rc = transcribe_window(st, r, err)) != 0)
			return rc;
	return 0;
}

/* Hand over the result, or free it; the run's own memory goes. */
static int
run_end(struct run *r, int rc, struct sotto_result **ret)
{
	free(r->tokens);
	audio_free(&r->audio);
	if (rc == 0)
		*ret = r->res;
	else
		sotto_result_free(r->res);
	return rc;
}

int
sotto_transcribe(struct sotto_state *st, const float *pcm, size_t n,
    const struct sotto_transcribe_params *params, struct sotto_result **ret,
    char *err)
{
	struct sotto_transcribe_params defaults;
	struct run r;
	int rc;

	*ret = NULL;
	if (params == NULL) {
		sotto_transcribe_params_init(&defaults);
		params = &defaults;
	}
	if (n > 0 && pcm == NULL)
		return err_set(err, SOTTO_EINVAL, "no samples");
	if ((rc = run_init(&r, st, params, err)) == 0) {
		audio_init_array(&r.audio, pcm, n);
		rc = run_all(st, &r, err);
	}
	return run_end(&r, rc, ret);
}

int
sotto_transcribe_reader(struct sotto_state *st, const struct sotto_reader *rd,
    const struct sotto_transcribe_params *params, struct sotto_result **ret,
    size_t *ret_n, char *err)
{
	struct sotto_transcribe_params defaults;
	struct run r;
	int rc;

	*ret = NULL;
	if (ret_n != NULL)
		*ret_n = 0;
	if (params == NULL) {
		sotto_transcribe_params_init(&defaults);
		params = &defaults;
	}
	if ((rc = run_init(&r, st, params, err)) == 0 &&
	    (rc = audio_init_reader(&r.audio, rd, err)) == 0)
		rc = run_all(st, &r, err);
	if (rc == 0 && ret_n != NULL)
		*ret_n = r.n;
	return run_end(&r, rc, ret);
}

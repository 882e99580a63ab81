/*
 * sotto transcribe --diarize: the options (how many speakers, the
 * speaker model) and the models they load: CAM++ for the speakers and
 * Silero VAD for where the speech is, found by name as every model is.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

#define SPEAKERS_MAX	32	/* a count beyond is a mistake */

static const char diarize_opts_usage[] =
"      --diarize             label speakers: every segment and word gets\n"
"                            \"speaker\" (S1, S2 ... in order of first\n"
"                            appearance; json on segments and words, txt\n"
"                            a line \"S1: ...\" at each change, vtt <v S1>,\n"
"                            srt [S1]); a segment two speakers share is\n"
"                            split. Implies --word-timestamps; needs the\n"
"                            speaker and VAD models (%s\n"
"                            campplus, %s silero-vad)\n"
"      --speakers N          exactly N speakers [estimated]\n"
"      --min-speakers N      estimating: at least N [1]\n"
"      --max-speakers N      estimating: at most N [no limit]\n"
"      --speaker-model NAME|PATH  the speaker model [campplus]\n";

void
diarize_opts_help(FILE *f)
{
	fprintf(f, diarize_opts_usage, model_fetch_command(),
	    model_fetch_command());
}

void
diarize_opts_init(struct diarize_opts *d)
{
	memset(d, 0, sizeof(*d));
	d->model = "campplus";
	sotto_diarize_params_init(&d->p);
}

int
diarize_opts_parse(struct diarize_opts *d, int c, const char *arg)
{
	switch (c) {
	case OPT_DIARIZE:
		d->on = 1;
		return 0;
	case OPT_SPEAKER_MODEL:
		d->model = arg;
		return 0;
	case OPT_SPEAKERS:
		return args_int(arg, 1, SPEAKERS_MAX, &d->p.n_speakers);
	case OPT_MIN_SPEAKERS:
		return args_int(arg, 1, SPEAKERS_MAX, &d->p.min_speakers);
	case OPT_MAX_SPEAKERS:
		return args_int(arg, 1, SPEAKERS_MAX, &d->p.max_speakers);
	}
	return -1;
}

int
diarize_opts_check(const struct diarize_opts *d, char *err, size_t len)
{
	const struct sotto_diarize_params *p = &d->p;
	struct diarize_opts defaults;

	diarize_opts_init(&defaults);
	if (!d->on && (p->n_speakers || p->min_speakers || p->max_speakers ||
	    strcmp(d->model, defaults.model) != 0)) {
		snprintf(err, len, "--speakers, --min-speakers, --max-speakers "
		    "and --speaker-model are for speaker labels: add "
		    "--diarize");
		return -1;
	}
	if (p->n_speakers && (p->min_speakers || p->max_speakers)) {
		snprintf(err, len, "--speakers N gives the number; "
		    "--min-speakers and --max-speakers bound an estimate: "
		    "give one or the others");
		return -1;
	}
	if (p->max_speakers && p->min_speakers > p->max_speakers) {
		snprintf(err, len, "--min-speakers %d is more than "
		    "--max-speakers %d", p->min_speakers, p->max_speakers);
		return -1;
	}
	return 0;
}

/* name -> a loaded speaker model, or -1 with what to run in err. */
static int
load_speaker(struct diarize_opts *d, char *err, size_t len)
{
	char path[PATH_MAX], e[768];

	if (model_path_resolve(d->model, path, sizeof(path), e,
	    sizeof(e)) != 0) {
		snprintf(err, len, "--diarize needs the speaker model: %s", e);
		return -1;
	}
	if (sotto_speaker_load(path, &d->spk, e) != 0) {
		snprintf(err, len, "--diarize: %s", e);
		return -1;
	}
	return 0;
}

int
diarize_opts_load(struct diarize_opts *d, const struct vad_opts *v,
    char *err, size_t len)
{
	char path[PATH_MAX], e[768];

	if (!d->on)
		return 0;
	if (load_speaker(d, err, len) != 0)
		return -1;
	if (v->vad != NULL)
		return 0;
	if (model_path_resolve(v->model, path, sizeof(path), e,
	    sizeof(e)) != 0) {
		snprintf(err, len, "--diarize finds speech with the VAD "
		    "model: %s", e);
		return -1;
	}
	if (sotto_vad_load(path, &d->vad, e) != 0) {
		snprintf(err, len, "--diarize: %s", e);
		return -1;
	}
	return 0;
}

const struct sotto_vad *
diarize_opts_vad(const struct diarize_opts *d, const struct vad_opts *v)
{
	return d->vad != NULL ? d->vad : v->vad;
}

void
diarize_opts_free(struct diarize_opts *d)
{
	sotto_speaker_free(d->spk);
	sotto_vad_free(d->vad);
	d->spk = NULL;
	d->vad = NULL;
}

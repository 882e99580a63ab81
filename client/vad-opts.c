/*
 * sotto transcribe --vad: the options (faster-whisper's VadOptions, the
 * same defaults) and the Silero VAD model they load.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

static const char vad_opts_usage[] =
"      --vad                 transcribe only the speech Silero VAD finds\n"
"                            (faster-whisper's vad_filter); times are\n"
"                            those of the whole file\n"
"      --vad-model NAME|PATH the VAD model [silero-vad: %s\n"
"                            silero-vad]\n"
"      --vad-threshold P     speech probability [0.5]\n"
"      --vad-neg-threshold P silence below it [threshold - 0.15]\n"
"      --vad-min-speech-ms MS  drop speech this short or shorter [0]\n"
"      --vad-max-speech-s S  split longer speech [inf]\n"
"      --vad-min-silence-ms MS  silence that ends speech [2000]\n"
"      --vad-speech-pad-ms MS  audio kept around speech [400]\n";

void
vad_opts_help(FILE *f)
{
	fprintf(f, vad_opts_usage, model_fetch_command());
}

void
vad_opts_init(struct vad_opts *v)
{
	memset(v, 0, sizeof(*v));
	v->model = "silero-vad";
	sotto_vad_params_init(&v->p);
}

int
vad_opts_parse(struct vad_opts *v, int c, const char *arg)
{
	struct sotto_vad_params *p = &v->p;

	switch (c) {
	case OPT_VAD:
		v->on = 1;
		return 0;
	case OPT_VAD_MODEL:
		v->model = arg;
		v->on = 1;
		return 0;
	case OPT_VAD_THRESHOLD:
		return args_float(arg, 0.001f, 0.999f, &p->threshold);
	case OPT_VAD_NEG:
		return args_float(arg, 0.0f, 0.999f, &p->neg_threshold);
	case OPT_VAD_MIN_SPEECH:
		return args_int(arg, 0, 3600000, &p->min_speech_ms);
	case OPT_VAD_MAX_SPEECH:
		return args_float(arg, 0.1f, INFINITY, &p->max_speech_s);
	case OPT_VAD_MIN_SILENCE:
		return args_int(arg, 0, 3600000, &p->min_silence_ms);
	case OPT_VAD_PAD:
		return args_int(arg, 0, 60000, &p->speech_pad_ms);
	}
	return -1;
}

int
vad_opts_load(struct vad_opts *v, char *err, size_t len)
{
	char path[PATH_MAX], e[SOTTO_ERR_MAX];

	if (!v->on)
		return 0;
	if (model_path_resolve(v->model, path, sizeof(path), err, len) != 0)
		return -1;
	if (sotto_vad_load(path, &v->vad, e) != 0) {
		snprintf(err, len, "%s", e);
		return -1;
	}
	return 0;
}

void
vad_opts_free(struct vad_opts *v)
{
	sotto_vad_free(v->vad);
	v->vad = NULL;
}

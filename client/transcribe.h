/*
 * sotto transcribe: its options (transcribe-opts.c) and the run
 * (cmd-transcribe.c).
 */
#ifndef SOTTO_CLIENT_TRANSCRIBE_H
#define SOTTO_CLIENT_TRANSCRIBE_H

#include "audio.h"
#include "client.h"

#define MAX_TEMPERATURES	16

struct transcribe_opts {
	const char *model;
	const char *output;
	const char *output_dir;
	enum output_format format;
	struct output_opts out;
	int quiet;
	float temperature, increment;
	struct sotto_model_params mp;
	struct sotto_transcribe_params tp;
	float temperatures[MAX_TEMPERATURES];
	struct vad_opts vad;
	struct diarize_opts diar;
	struct audio_raw raw;	/* standard input's layout, if raw_set */
	int raw_set;
};

/*
 * The command line into o (argv[optind...] are then the inputs): 0, or
 * -1 after a usage message. --help prints the options and exits.
 */
int	transcribe_parse(struct transcribe_opts *o, int argc, char **argv);

#endif

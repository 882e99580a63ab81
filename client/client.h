/*
 * The sotto CLI: one file per command, each an entry in main.c's table.
 */
#ifndef SOTTO_CLIENT_H
#define SOTTO_CLIENT_H

#include <limits.h>
#include <stdio.h>

#include "model-path.h"
#include "output.h"
#include "sotto.h"

/* Exit codes a script can rely on (documented in --help). */
#define EXIT_INPUT	1	/* an input file could not be transcribed */
#define EXIT_USAGE	2	/* bad command line */
#define EXIT_MODEL	3	/* the model could not be found or loaded */

/* args.c: 0 if s is a number in [lo, hi], else -1 */
int	args_int(const char *s, int lo, int hi, int *ret);
int	args_float(const char *s, float lo, float hi, float *ret);

/* vad-opts.c: sotto transcribe --vad and its options */
enum {
	OPT_VAD = 512, OPT_VAD_MODEL, OPT_VAD_THRESHOLD, OPT_VAD_NEG,
	OPT_VAD_MIN_SPEECH, OPT_VAD_MAX_SPEECH, OPT_VAD_MIN_SILENCE,
	OPT_VAD_PAD,
};

#define VAD_LONG_OPTIONS \
	{ "vad", no_argument, NULL, OPT_VAD }, \
	{ "vad-model", required_argument, NULL, OPT_VAD_MODEL }, \
	{ "vad-threshold", required_argument, NULL, OPT_VAD_THRESHOLD }, \
	{ "vad-neg-threshold", required_argument, NULL, OPT_VAD_NEG }, \
	{ "vad-min-speech-ms", required_argument, NULL, OPT_VAD_MIN_SPEECH }, \
	{ "vad-max-speech-s", required_argument, NULL, OPT_VAD_MAX_SPEECH }, \
	{ "vad-min-silence-ms", required_argument, NULL, OPT_VAD_MIN_SILENCE }, \
	{ "vad-speech-pad-ms", required_argument, NULL, OPT_VAD_PAD }

/* The options and, once loaded, the model (owned). */
struct vad_opts {
	int on;
	const char *model;		/* name or path */
	struct sotto_vad_params p;
	struct sotto_vad *vad;
};

void	vad_opts_help(FILE *);
void	vad_opts_init(struct vad_opts *);
/* An OPT_VAD_* option: 0, or -1 for a bad value. */
int	vad_opts_parse(struct vad_opts *, int c, const char *arg);
/* Load the model if --vad was given: 0, or -1 with a message in err. */
int	vad_opts_load(struct vad_opts *, char *err, size_t len);
void	vad_opts_free(struct vad_opts *);

/* diarize-opts.c: sotto transcribe --diarize and its options */
enum {
	OPT_DIARIZE = 544, OPT_SPEAKERS, OPT_MIN_SPEAKERS, OPT_MAX_SPEAKERS,
	OPT_SPEAKER_MODEL,
};

#define DIARIZE_LONG_OPTIONS \
	{ "diarize", no_argument, NULL, OPT_DIARIZE }, \
	{ "speakers", required_argument, NULL, OPT_SPEAKERS }, \
	{ "min-speakers", required_argument, NULL, OPT_MIN_SPEAKERS }, \
	{ "max-speakers", required_argument, NULL, OPT_MAX_SPEAKERS }, \
	{ "speaker-model", required_argument, NULL, OPT_SPEAKER_MODEL }

/*
 * The options and, once loaded, the models (owned): the speaker model,
 * and the VAD that finds the speech to label (--vad's when it has one).
 */
struct diarize_opts {
	int on;
	const char *model;		/* name or path */
	struct sotto_diarize_params p;
	struct sotto_speaker *spk;
	struct sotto_vad *vad;		/* NULL: vad_opts' is used */
};

void	diarize_opts_help(FILE *);
void	diarize_opts_init(struct diarize_opts *);
/* An OPT_DIARIZE... option: 0, or -1 for a bad value. */
int	diarize_opts_parse(struct diarize_opts *, int c, const char *arg);
/* Whether the options go together: 0, or -1 with a message in err. */
int	diarize_opts_check(const struct diarize_opts *, char *err, size_t len);
/*
 * With --diarize, load the speaker model and (unless v has loaded it)
 * the VAD model v names: 0, or -1 with a message in err.
 */
int	diarize_opts_load(struct diarize_opts *, const struct vad_opts *v,
	    char *err, size_t len);
/* The VAD to label with: d's own, or v's. */
const struct sotto_vad *diarize_opts_vad(const struct diarize_opts *,
	    const struct vad_opts *v);
void	diarize_opts_free(struct diarize_opts *);

/*
 * out-check.c: whether what was written to f reached it (name: its path,
 * or "standard output"). out_flush() flushes f and, when that or an
 * earlier write failed, prints "PROG: NAME: REASON" and returns -1; the
 * reason is the errno of the failed write, so set errno to 0 before the
 * writes it checks. out_report() prints it for err (an errno value); a
 * failure of standard output is told once, and out_stdout_reported()
 * says whether it was.
 */
int	out_flush(FILE *, const char *prog, const char *name);
int	out_report(FILE *, const char *prog, const char *name, int err);
int	out_stdout_reported(void);

/* cmd-transcribe.c */
int	cmd_transcribe(int argc, char **argv);

/*
 * output-dir.c: DIR/NAME.EXT for the input NAME.wav (buf of len; -1 if it
 * does not fit or the input has no name); the check that DIR is a
 * writable directory and that no two inputs share a name (-1 with a
 * message in err).
 */
int	output_dir_path(const char *dir, const char *file,
	    enum output_format, char *buf, size_t len);
int	output_dir_check(const char *dir, char *const *files, int n_files,
	    enum output_format, char *err, size_t errlen);

/*
 * A transcript file of --output-dir, written under a temporary name
 * beside it (DIR/.NAME.EXT.XXXXXX) and renamed into place once all of it
 * is written: a failed write (a full disk) leaves neither an empty nor a
 * partial file, and an older transcript of that name stays as it was.
 * open: 0, or -1 with "PATH: reason" in err. commit: flush, close and
 * rename (the reason of a failed write is the errno it left: set errno
 * to 0 before writing); 0, or -1 with the temporary file removed and
 * "PATH: reason" in err. abort: close and remove it.
 */
struct output_tmp {
	FILE	*f;
	char	 path[PATH_MAX], tmp[PATH_MAX];
};

int	output_tmp_open(struct output_tmp *, const char *path, char *err,
	    size_t errlen);
int	output_tmp_commit(struct output_tmp *, char *err, size_t errlen);
void	output_tmp_abort(struct output_tmp *);

#endif

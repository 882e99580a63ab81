/*
 * The sotto CLI: one file per command, each an entry in main.c's table.
 */
#ifndef SOTTO_CLIENT_H
#define SOTTO_CLIENT_H

#include <stdio.h>

#include "sotto.h"

/* Exit codes a script can rely on (documented in --help). */
#define EXIT_INPUT	1	/* an input file could not be transcribed */
#define EXIT_USAGE	2	/* bad command line */
#define EXIT_MODEL	3	/* the model could not be found or loaded */

/* args.c: 0 if s is a number in [lo, hi], else -1 */
int	args_int(const char *s, int lo, int hi, int *ret);
int	args_float(const char *s, float lo, float hi, float *ret);

/* cmd-transcribe.c */
int	cmd_transcribe(int argc, char **argv);

/* model-path.c: NAME or PATH -> a readable .gguf path in buf. */
int	model_path_resolve(const char *arg, char *buf, size_t len,
	    char *err, size_t errlen);

/* output.c */
enum output_format {
	OUTPUT_TXT,
	OUTPUT_JSON,
	OUTPUT_SRT,
	OUTPUT_VTT,
};

int	output_format_parse(const char *s, enum output_format *ret);
/* Write one file's transcript; returns 0 or -1 (errno set). */
int	output_write(FILE *, enum output_format, const char *file,
	    double duration, const struct sotto_result *, int n_files);

#endif

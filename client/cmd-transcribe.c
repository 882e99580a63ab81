/*
 * sotto transcribe: files in, transcripts out, with the engine in-process.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audio.h"
#include "transcribe.h"

struct progress {
	const char *file;
	int shown;
};

static int
progress_cb(void *user, size_t done, size_t total,
    const struct sotto_segment *segs, int n)
{
	struct progress *p = user;

	(void)segs;
	(void)n;
	if (total == 0)
		return 0;
	fprintf(stderr, "\r\033[K%s: %3d%% (%.0f / %.0f s)", p->file,
	    (int)(100.0 * done / total), done / 16000.0, total / 16000.0);
	p->shown = 1;
	return 0;
}

/* A sotto_reader over an audio file; err keeps the file's own message. */
struct file_reader {
	struct audio_file *f;
	char err[SOTTO_ERR_MAX];
};

static long
file_read(void *user, float *buf, size_t max, char *err)
{
	struct file_reader *r = user;
	long got;

	if ((got = audio_file_read(r->f, buf, max, r->err,
	    sizeof(r->err))) < 0)
		snprintf(err, SOTTO_ERR_MAX, "%s", r->err);
	return got < 0 ? SOTTO_EIO : got;
}

static int
file_rewind(void *user, char *err)
{
	struct file_reader *r = user;

	if (audio_file_rewind(r->f, r->err, sizeof(r->err)) == 0)
		return 0;
	snprintf(err, SOTTO_ERR_MAX, "%s", r->err);
	return SOTTO_EIO;
}

/* What to tell after the transcript: bad samples, a file cut short. */
static int
report_input(const char *path, const struct audio_file *f, size_t n)
{
	if (audio_file_nonfinite(f) > 0)
		fprintf(stderr, "sotto transcribe: %s: %zu samples were not "
		    "numbers (NaN or infinite) and were read as 0\n", path,
		    audio_file_nonfinite(f));
	if (audio_file_problem(f) == NULL)
		return 0;
	fprintf(stderr, "sotto transcribe: %s: %s; the transcript is of the "
	    "%.2f s before\n", path, audio_file_problem(f),
	    (double)n / AUDIO_RATE);
	return -1;
}

/* One format of the transcript in its file of --output-dir: 0 or -1. */
static int
write_to_dir(const struct transcribe_opts *o, enum output_format fmt,
    const char *path, double duration, const struct sotto_result *res)
{
	struct output_tmp t;
	char name[PATH_MAX], err[PATH_MAX + 128];

	if (output_dir_path(o->output_dir, path, fmt, name,
	    sizeof(name)) != 0) {
		fprintf(stderr, "sotto transcribe: no --output-dir name for "
		    "%s\n", path);
		return -1;
	}
	if (output_tmp_open(&t, name, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto transcribe: %s (the transcript of "
		    "%s)\n", err, path);
		return -1;
	}
	errno = 0;
	if (output_write(t.f, fmt, &o->out, path, duration, res, 1) != 0 &&
	    !ferror(t.f)) {
		output_tmp_abort(&t);
		fprintf(stderr, "sotto transcribe: %s: out of memory writing "
		    "the transcript of %s\n", name, path);
		return -1;
	}
	if (output_tmp_commit(&t, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto transcribe: %s (the transcript of "
		    "%s was not written)\n", err, path);
		return -1;
	}
	if (!o->quiet)
		fprintf(stderr, "sotto transcribe: wrote %s\n", name);
	return 0;
}

/* The transcript in --output-dir: a file, or with -f all one per format. */
static int
write_dir(const struct transcribe_opts *o, const char *path, double duration,
    const struct sotto_result *res)
{
	int fmt, rc = 0;

	if (o->format != OUTPUT_ALL)
		return write_to_dir(o, o->format, path, duration, res);
	for (fmt = 0; fmt < OUTPUT_FORMATS; fmt++)
		if (write_to_dir(o, (enum output_format)fmt, path, duration,
		    res) != 0)
			rc = -1;
	return rc;
}

/*
 * The transcript to out (standard output or -o), or to its own file in
 * --output-dir: 0, -1, or OUT_BROKEN when out cannot be written (the
 * message says why), which ends the run: no later transcript can reach it.
 */
#define OUT_BROKEN	(-2)

static int
write_result(const struct transcribe_opts *o, FILE *out, const char *path,
    double duration, const struct sotto_result *res, int n_files)
{
	const char *name = o->output != NULL ? o->output : "standard output";
	int rc;

	if (o->output_dir != NULL)
		return write_dir(o, path, duration, res);
	errno = 0;
	rc = output_write(out, o->format, &o->out, path, duration, res,
	    n_files);
	if (out_flush(out, "sotto transcribe", name) != 0)
		return OUT_BROKEN;
	if (rc != 0)
		fprintf(stderr, "sotto transcribe: %s: out of memory writing "
		    "the transcript of %s\n", name, path);
	return rc != 0 ? -1 : 0;
}

/*
 * --diarize: speaker labels on res, the file read twice more. A failure
 * is told and leaves res without labels (-1): the transcript is still
 * worth writing.
 */
static int
label_speakers(const struct transcribe_opts *o, const struct sotto_reader *rd,
    const struct file_reader *fr, const char *name, struct sotto_result *res)
{
	char err[SOTTO_ERR_MAX];

	if (sotto_diarize(o->diar.spk, diarize_opts_vad(&o->diar, &o->vad),
	    &o->diar.p, rd, res, err) == 0)
		return 0;
	fprintf(stderr, "sotto transcribe: %s: no speaker labels: %s; the "
	    "transcript is written without them\n", name, fr->err[0] ?
	    fr->err : err);
	return -1;
}

/*
 * Decode the file as it is transcribed (read twice: see audio.c), print
 * the transcript, then fail if the file ended early. path "-" is
 * standard input, and so called in messages; the transcript keeps "-".
 */
static int
transcribe_file(struct sotto_state *st, struct transcribe_opts *o, FILE *out,
    const char *path, int n_files)
{
	int is_stdin = strcmp(path, "-") == 0;
	const char *name = is_stdin ? "standard input" : path;
	struct file_reader fr = { NULL, "" };
	struct sotto_reader rd = { file_read, file_rewind, &fr };
	struct sotto_result *res = NULL;
	struct progress prog = { name, 0 };
	char err[SOTTO_ERR_MAX];
	/* the path, the library's reason and the formats that work */
	char open_err[PATH_MAX + 256];
	size_t n = 0;
	int rc, unlabelled = 0;

	rc = is_stdin ? audio_stdin_open(o->raw_set ? &o->raw : NULL, &fr.f,
	    open_err, sizeof(open_err)) : audio_file_open(path, &fr.f,
	    open_err, sizeof(open_err));
	if (rc != 0) {
		fprintf(stderr, "sotto transcribe: %s\n", open_err);
		return -1;
	}
	if (!o->quiet && isatty(STDERR_FILENO)) {
		o->tp.progress = progress_cb;
		o->tp.progress_user = &prog;
	}
	if (o->vad.vad != NULL)
		rc = sotto_transcribe_vad(st, o->vad.vad, &o->vad.p, &rd,
		    &o->tp, &res, &n, err);
	else
		rc = sotto_transcribe_reader(st, &rd, &o->tp, &res, &n, err);
	if (prog.shown)
		fprintf(stderr, "\r\033[K");
	if (rc == 0 && n > 0 && o->diar.on)
		unlabelled = label_speakers(o, &rd, &fr, name, res) != 0;
	if (rc != 0)
		fprintf(stderr, "sotto transcribe: %s%s%s\n", fr.err[0] ?
		    "" : name, fr.err[0] ? "" : ": ", fr.err[0] ? fr.err : err);
	else if (n == 0) {
		fprintf(stderr, "sotto transcribe: %s: no audio in the file "
		    "(0 samples)%s%s\n", name, audio_file_problem(fr.f) ?
		    ": " : "", audio_file_problem(fr.f) ?
		    audio_file_problem(fr.f) : "");
		rc = -1;
	} else {
		rc = write_result(o, out, path, (double)n / AUDIO_RATE, res,
		    n_files);
		if ((report_input(name, fr.f, n) != 0 || unlabelled) &&
		    rc == 0)
			rc = -1;
	}
	sotto_result_free(res);
	audio_file_close(fr.f);
	return rc == OUT_BROKEN ? OUT_BROKEN : rc != 0 ? -1 : 0;
}

static int
load_model(struct transcribe_opts *o, struct sotto_model **ret)
{
	char path[PATH_MAX], err[1024];

	if (model_path_resolve(o->model, path, sizeof(path), err,
	    sizeof(err)) != 0 || sotto_model_load(path, &o->mp, ret,
	    err) != 0) {
		fprintf(stderr, "sotto transcribe: %s\n", err);
		return -1;
	}
	if (vad_opts_load(&o->vad, err, sizeof(err)) != 0 ||
	    diarize_opts_load(&o->diar, &o->vad, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto transcribe: %s\n", err);
		vad_opts_free(&o->vad);
		diarize_opts_free(&o->diar);
		sotto_model_free(*ret);
		*ret = NULL;
		return -1;
	}
	return 0;
}

int
cmd_transcribe(int argc, char **argv)
{
	struct sotto_model *model;
	struct sotto_state *st;
	struct transcribe_opts o;
	FILE *out = stdout;
	char err[512];
	int i, rc = 0, failed = 0;

	if (transcribe_parse(&o, argc, argv) != 0)
		return EXIT_USAGE;
	if (o.output_dir != NULL && output_dir_check(o.output_dir,
	    argv + optind, argc - optind, o.format, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto transcribe: %s\n", err);
		return EXIT_USAGE;
	}
	if (load_model(&o, &model) != 0)
		return EXIT_MODEL;
	if ((st = sotto_state_new(model)) == NULL) {
		fprintf(stderr, "sotto transcribe: out of memory\n");
		sotto_model_free(model);
		vad_opts_free(&o.vad);
		diarize_opts_free(&o.diar);
		return EXIT_MODEL;
	}
	if (o.output != NULL && (out = fopen(o.output, "w")) == NULL) {
		out_report(NULL, "sotto transcribe", o.output, errno);
		failed = 1;
	}
	for (i = optind; out != NULL && i < argc; i++)
		if ((rc = transcribe_file(st, &o, out, argv[i],
		    argc - optind)) != 0) {
			failed = 1;
			if (rc == OUT_BROKEN)
				break;
		}
	if (out != NULL && out != stdout && fclose(out) != 0 &&
	    rc != OUT_BROKEN) {
		out_report(NULL, "sotto transcribe", o.output, errno);
		failed = 1;
	}
	sotto_state_free(st);
	sotto_model_free(model);
	vad_opts_free(&o.vad);
	diarize_opts_free(&o.diar);
	return failed ? EXIT_INPUT : 0;
}

/*
 * Whole audio files on the compute thread (see worker.c's design note):
 * the loop hands over an encoded file (the HTTP API's upload) with
 * worker_file_new(); the compute thread decodes it from memory with
 * libsndfile, or FFmpeg when libsndfile cannot read it (common/audio.c,
 * as `sotto transcribe` reads a file: the same samples) and runs sotto_transcribe_reader() on a state of its own with
 * `sotto transcribe`'s options; the loop gets the job back with its
 * result in the done() callback.
 *
 * A file takes many windows. Between two of them (the progress callback)
 * the compute thread runs the other jobs queued by then (worker_yield):
 * live streams wait for one window, never for a whole file. Files run
 * one after another in the order they came. A job sees sottod stopping
 * (worker_stop), or its owner's worker_file_cancel (the HTTP client went
 * away), at its next window and ends as canceled.
 *
 * Ownership: the loop owns a job until worker_file_new() queues it and
 * again from done() on; in between only the compute thread touches it.
 */
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "log.h"
#include "worker-private.h"

#define WORKER_FILE_TEMPERATURES	16

static int	worker_file_n;		/* loop: jobs not yet done */
static TAILQ_HEAD(, worker_file) worker_files =
    TAILQ_HEAD_INITIALIZER(worker_files);

int
worker_file_count(void)
{
	return worker_file_n;
}

int
worker_file_list(struct worker_file **out, int n)
{
	struct worker_file *f;
	int i = 0;

	TAILQ_FOREACH(f, &worker_files, entry) {
		if (i == n)
			break;
		out[i++] = f;
	}
	return i;
}

void
worker_file_free(struct worker_file *f)
{
	if (f == NULL)
		return;
	models_drop(f->model);
	sotto_result_free(f->res);
	free(f->data);
	free(f->prompt);
	free(f);
}

struct worker_file *
worker_file_new(uint64_t id, void *data, size_t len,
    const struct worker_file_params *p, worker_file_done_fn *done,
    void *arg, char *msg)
{
	struct worker_file *f;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		free(data);
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return NULL;
	}
	f->id = id;
	f->data = data;
	f->len = len;
	f->params = *p;
	f->done = done;
	f->arg = arg;
	if ((p->prompt != NULL && (f->prompt = strdup(p->prompt)) == NULL) ||
	    (f->model = models_take()) == NULL ||
	    worker_queue_file(f) != 0) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		worker_file_free(f);
		return NULL;
	}
	worker_file_n++;
	TAILQ_INSERT_TAIL(&worker_files, f, entry);
	return f;
}

void
worker_file_cancel(struct worker_file *f)
{
	atomic_store(&f->cancel, 1);
}

/* Loop thread: the job came back; hand it to its owner. */
void
worker_file_done(struct worker_file *f)
{
	worker_file_n--;
	TAILQ_REMOVE(&worker_files, f, entry);
	f->done(f, f->arg);
	server_drain_check();
}

/* A sotto_reader over the decoded file; err keeps audio.c's message. */
struct worker_file_reader {
	struct audio_file	*af;
	char			 err[SOTTO_ERR_MAX];
};

static long
worker_file_read(void *user, float *buf, size_t max, char *err)
{
	struct worker_file_reader *r = user;
	long got;

	if ((got = audio_file_read(r->af, buf, max, r->err,
	    sizeof(r->err))) < 0)
		snprintf(err, SOTTO_ERR_MAX, "%s", r->err);
	return got < 0 ? SOTTO_EIO : got;
}

static int
worker_file_rewind(void *user, char *err)
{
	struct worker_file_reader *r = user;

	if (audio_file_rewind(r->af, r->err, sizeof(r->err)) == 0)
		return 0;
	snprintf(err, SOTTO_ERR_MAX, "%s", r->err);
	return SOTTO_EIO;
}

void
worker_file_segments(const struct worker_result *r)
{
	struct worker_file *f = r->file;

	f->params.segments(f, r->finals, r->n_finals, f->arg);
}

/*
 * Compute thread: a window's segments, copied for the loop (its
 * streamed reply); a copy that fails only leaves them out of the stream,
 * the whole transcript at the end has them.
 */
static void
worker_file_post(struct worker_file *f, const struct sotto_segment *segs,
    int n)
{
	struct worker_result *r;
	int i;

	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->finals = calloc((size_t)n, sizeof(*r->finals))) == NULL) {
		free(r);
		return;
	}
	r->kind = WORKER_FILE_SEGMENTS;
	r->file = f;
	r->id = f->id;
	for (i = 0; i < n; i++) {
		if ((r->finals[i].text = strdup(segs[i].text)) == NULL)
			break;
		r->finals[i].start = segs[i].start;
		r->finals[i].end = segs[i].end;
	}
	r->n_finals = i;
	worker_post(r);
}

/* Between two windows: let the streams have the thread, or stop. */
static int
worker_file_progress(void *user, size_t done, size_t total,
    const struct sotto_segment *segs, int n)
{
	struct worker_file *f = user;

	if (f->params.segments != NULL && n > 0)
		worker_file_post(f, segs, n);
	if (worker_stopping() || atomic_load(&f->cancel))
		return 1;
	if (done < total)	/* after the last window: the reply first */
		worker_yield();
	return 0;
}

/* `sotto transcribe`'s options, with the job's. */
static void
worker_file_options(struct worker_file *f, struct sotto_transcribe_params *tp,
    float *temps)
{
	const struct worker_file_params *p = &f->params;
	float t;
	int n = 0;

	sotto_transcribe_params_init(tp);
	tp->language = p->language[0] != '\0' ? p->language : NULL;
	tp->task = p->task;
	tp->beam_size = p->beam_size;
	tp->initial_prompt = f->prompt;
	/* from the temperature up by 0.2 to 1.0, as the CLI's default */
	for (t = p->temperature; n < WORKER_FILE_TEMPERATURES; t += 0.2f) {
		temps[n++] = t;
		if (t + 0.2f > 1.0f + 1e-6f)
			break;
	}
	tp->temperatures = temps;
	tp->n_temperatures = n;
	tp->word_timestamps = p->word_timestamps;
	tp->progress = worker_file_progress;
	tp->progress_user = f;
}

/* Why a job ends canceled. */
static void
worker_file_canceled(struct worker_file *f)
{
	f->error = WORKER_FILE_CANCELED;
	snprintf(f->err, sizeof(f->err), "%s", atomic_load(&f->cancel) ?
	    "canceled: the client went away" : "sottod is stopping");
}

/* Between two pieces embedded: as between two windows. */
static int
worker_file_label_progress(void *user)
{
	struct worker_file *f = user;

	if (worker_stopping() || atomic_load(&f->cancel))
		return 1;
	worker_yield();
	return 0;
}

/*
 * Compute thread: speaker labels on f's transcript, the file read twice
 * more (sotto_diarize() rewinds it). The time counts as the job's. Live
 * streams run between two pieces embedded (about 3 s of speech, ~40 ms
 * of compute); the VAD pass before them (~5 ms a second of audio) is not
 * cut.
 */
static void
worker_file_label(struct worker_file *f, const struct sotto_reader *rd,
    const struct worker_file_reader *fr)
{
	char e[SOTTO_ERR_MAX];
	int rc;

	if (worker_stopping() || atomic_load(&f->cancel)) {
		worker_file_canceled(f);
		return;
	}
	f->params.diarize.progress = worker_file_label_progress;
	f->params.diarize.progress_user = f;
	if ((rc = sotto_diarize(f->params.speakers, f->params.speakers_vad,
	    &f->params.diarize, rd, f->res, e)) == 0)
		return;
	if (rc == SOTTO_ECANCELED) {
		worker_file_canceled(f);
		return;
	}
	f->error = WORKER_FILE_FAILED;
	snprintf(f->err, sizeof(f->err), "speaker labels failed: %.*s",
	    (int)sizeof(f->err) - 32, fr->err[0] != '\0' ? fr->err : e);
}

/* Compute thread: decode and transcribe f; sets its result or error. */
void
worker_file_run(struct worker_file *f)
{
	struct worker_file_reader fr = { NULL, "" };
	struct sotto_reader rd = { worker_file_read, worker_file_rewind, &fr };
	struct sotto_transcribe_params tp;
	float temps[WORKER_FILE_TEMPERATURES];
	struct sotto_state *st = NULL;
	double t0 = worker_now();
	size_t n = 0;
	int rc;

	if (worker_stopping() || atomic_load(&f->cancel)) {
		worker_file_canceled(f);
		goto out;
	}
	if (audio_mem_open(f->data, f->len, "the file", &fr.af, f->err,
	    sizeof(f->err)) != 0) {
		f->error = WORKER_FILE_BAD_INPUT;
		goto out;
	}
	if ((st = sotto_state_new(models_model(f->model))) == NULL) {
		f->error = WORKER_FILE_FAILED;
		snprintf(f->err, sizeof(f->err), "out of memory");
		goto out;
	}
	worker_file_options(f, &tp, temps);
	rc = sotto_transcribe_reader(st, &rd, &tp, &f->res, &n, f->err);
	f->duration = (double)n / SOTTO_SAMPLE_RATE;
	if (rc == SOTTO_ECANCELED)
		worker_file_canceled(f);
	else if (rc != 0 && fr.err[0] != '\0') {
		f->error = WORKER_FILE_BAD_INPUT;
		snprintf(f->err, sizeof(f->err), "%s", fr.err);
	} else if (rc != 0)
		f->error = rc == SOTTO_EINVAL ? WORKER_FILE_BAD_INPUT :
		    WORKER_FILE_FAILED;
	else if (n == 0) {
		f->error = WORKER_FILE_BAD_INPUT;
		snprintf(f->err, sizeof(f->err), "no audio in the file (0 "
		    "samples)");
	} else if (audio_file_problem(fr.af) != NULL) {
		f->error = WORKER_FILE_BAD_INPUT;
		snprintf(f->err, sizeof(f->err), "the file is damaged: %s",
		    audio_file_problem(fr.af));
	} else if (f->params.speakers != NULL)
		worker_file_label(f, &rd, &fr);
out:
	f->compute_s = worker_now() - t0;
	log_debug("file %llu: %.1f s of audio in %.2f s%s%s",
	    (unsigned long long)f->id, f->duration, f->compute_s,
	    f->error ? ": " : "", f->error ? f->err : "");
	free(f->data);		/* the upload is not needed any more */
	f->data = NULL;
	sotto_state_free(st);
	audio_file_close(fr.af);
}

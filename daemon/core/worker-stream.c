/*
 * A stream on the compute thread (see worker.c's design note): its pending
 * audio, how much of it a step takes, the results it leaves, and which
 * model it runs on, and the result each of its jobs leaves. The loop
 * calls the public worker_stream_* functions; the rest runs on the
 * compute thread.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "worker-private.h"

#define WORKER_CATCHUP_S 8	/* audio fed at once when behind, at most */
#define WORKER_MOVE_WAIT_S 30	/* a following stream waits for a pause */
#define WORKER_PAUSE	(SOTTO_SAMPLE_RATE / 2)	/* a pause: 0.5 s */
#define WORKER_PAUSE_BLOCK (SOTTO_SAMPLE_RATE / 10) /* in 100 ms blocks */
#define WORKER_PAUSE_POWER 1e-5	/* each under -50 dBFS (the gate) */
#define WORKER_END_PAUSE (SOTTO_SAMPLE_RATE * 3 / 10) /* end of speech: 0.3 s */

void
worker_stream_follow(struct worker_stream *ws)
{
	ws->follow = 1;
}

int
worker_stream_speakers(struct worker_stream *ws,
    const struct sotto_speaker *spk, char *err)
{
	return sotto_speaker_track_new(spk, 0, &ws->track, err) == 0 ? 0 : -1;
}

void
worker_stream_track_give(struct worker_stream *ws,
    struct sotto_speaker_track *track, double t0)
{
	ws->track = track;
	ws->track_t0 = t0;
}

struct sotto_speaker_track *
worker_stream_track_take(struct worker_stream *ws, double *t0)
{
	struct sotto_speaker_track *t = ws->track;

	*t0 = ws->track_t0 + (double)ws->track_fed / SOTTO_SAMPLE_RATE;
	ws->track = NULL;
	return t;
}

int
worker_stream_push(struct worker_stream *ws, const float *pcm, size_t n)
{
	size_t cap;
	float *p;
	int rc = 0;

	pthread_mutex_lock(&ws->lock);
	if (ws->n_pending + n > ws->cap_pending) {
		cap = (ws->n_pending + n) * 3 / 2 + 4096;
		if ((p = realloc(ws->pending, cap * sizeof(*p))) == NULL)
			rc = -1;
		else {
			ws->pending = p;
			ws->cap_pending = cap;
		}
	}
	if (rc == 0) {
		memcpy(ws->pending + ws->n_pending, pcm, n * sizeof(*pcm));
		ws->n_pending += n;
	}
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

size_t
worker_stream_pending(struct worker_stream *ws)
{
	size_t n;

	pthread_mutex_lock(&ws->lock);
	n = ws->n_pending + ws->held;
	pthread_mutex_unlock(&ws->lock);
	return n;
}

/* Copies of a final's words (if it has any), times moved by t0. */
static int
copy_words(struct worker_segment *f, const struct sotto_segment *s,
    double t0)
{
	int i;

	if (s->words == NULL)
		return 0;
	if ((f->words = calloc(s->n_words + 1, sizeof(*f->words))) == NULL)
		return -1;
	for (i = 0; i < s->n_words; i++) {
		f->words[i] = s->words[i];
		f->words[i].start += t0;
		f->words[i].end += t0;
		if ((f->words[i].word = strdup(s->words[i].word)) == NULL)
			return -1;
		f->n_words++;
	}
	return 0;
}

/*
 * The speaker of final f (session times: the track has every sample the
 * session's engine streams had), decided now, on the compute thread:
 * one embedding of the final's audio (~13 ms per second of it), so the
 * label goes out with the final and no later event is needed. A label
 * that cannot be had leaves the final without one, and says so in the
 * log: the transcript matters more.
 */
static void
label(struct worker_stream *ws, struct worker_segment *f, double next_start,
    double next_end)
{
	char err[SOTTO_ERR_MAX];
	double t0 = ws->track_t0;
	int i;

	if (ws->track == NULL)
		return;
	/* the track's times run on from the streams it had before */
	if (sotto_speaker_track_label(ws->track, t0 + f->start, t0 + f->end,
	    t0 + next_start, t0 + next_end, &f->speaker, err) != 0) {
		log_warnx("stream %llu: no speaker for %.2f-%.2f s: %s",
		    (unsigned long long)ws->id, f->start, f->end, err);
		return;
	}
	for (i = 0; i < f->n_words; i++)
		f->words[i].speaker = f->speaker;
}

/* The speech that follows final i of u: the next final or the partial
   (*end <= *start: none). */
static void
next_speech(const struct sotto_stream_update *u, int i, double *start,
    double *end)
{
	*start = *end = 0;
	if (i + 1 < u->n_finals) {
		*start = u->finals[i + 1].start;
		*end = u->finals[i + 1].end;
	} else if (u->partial != NULL && u->partial[0] != '\0') {
		*start = u->partial_start;
		*end = u->partial_end;
	}
}

/*
 * Append copies of an update's finals and take its partial; times move
 * by the stream's offset (a following stream's earlier engine streams).
 */
int
worker_copy(struct worker_stream *ws, struct worker_result *r,
    const struct sotto_stream_update *u)
{
	struct worker_segment *f;
	double t0 = ws->t_offset, next0, next1;
	int i;

	if (u->n_finals > 0) {
		f = realloc(r->finals, (r->n_finals + u->n_finals) *
		    sizeof(*f));
		if (f == NULL)
			return -1;
		r->finals = f;
		for (i = 0; i < u->n_finals; i++) {
			f = &r->finals[r->n_finals];
			f->start = u->finals[i].start + t0;
			f->end = u->finals[i].end + t0;
			f->words = NULL;
			f->n_words = 0;
			f->speaker = 0;
			if ((f->text = strdup(u->finals[i].text ?
			    u->finals[i].text : "")) == NULL)
				return -1;
			r->n_finals++;
			if (copy_words(f, &u->finals[i], t0) != 0)
				return -1;
			next_speech(u, i, &next0, &next1);
			label(ws, f, next0 + t0, next1 + t0);
		}
	}
	free(r->partial);
	r->partial = strdup(u->partial ? u->partial : "");
	r->partial_start = u->partial_start + t0;
	r->partial_end = u->partial_end + t0;
	r->audio_time = u->audio_time + t0;
	if (u->language != NULL) {
		snprintf(r->language, sizeof(r->language), "%s", u->language);
		r->language_prob = u->language_prob;
		r->language_settled = u->language_settled;
	}
	return r->partial == NULL ? -1 : 0;
}

/* Whether every 100 ms block of p[from, n) is under the gate. */
static int
worker_quiet(const float *p, size_t from, size_t n)
{
	size_t at, i, len;
	double sum;

	for (at = from; at < n; at += len) {
		len = n - at < WORKER_PAUSE_BLOCK ? n - at : WORKER_PAUSE_BLOCK;
		for (i = 0, sum = 0; i < len; i++)
			sum += (double)p[at + i] * p[at + i];
		if (sum / len > WORKER_PAUSE_POWER)
			return 0;
	}
	return 1;
}

/*
 * Samples at the end of p[n] under the gate, in 100 ms blocks counted
 * back from the end.
 */
static size_t
worker_quiet_tail(const float *p, size_t n)
{
	size_t tail = 0, len;

	while (tail < n) {
		len = n - tail < WORKER_PAUSE_BLOCK ? n - tail :
		    WORKER_PAUSE_BLOCK;
		if (!worker_quiet(p, n - tail - len, n - tail))
			break;
		tail += len;
	}
	return tail;
}

/*
 * Whether a live stream's pending audio, less than a step, is worth a
 * job now (the caller knows the compute thread has time):
 *  - a step: the speaker stopped (sound, then WORKER_END_PAUSE under
 *    the gate that no step has read whole: the last one may have read
 *    its start). The step reads the end of the speech at once instead
 *    of up to a step later, and once it has, sotto_stream_finish() needs
 *    no decode for a silent tail: a voice command's transcript is ready
 *    as its client sends audio-stop;
 *  - a preview, with soon > 0 (nothing else to compute:
 *    worker_idle_alone()): soon samples or more pending whose last
 *    100 ms is above the gate. An idle engine shows the words sooner
 *    than step_ms, but not at the start of a pause (PAUSING: sound,
 *    then less than WORKER_END_PAUSE under the gate): a preview begun
 *    there would only delay the end step above.
 */
enum worker_early
worker_stream_early(struct worker_stream *ws, size_t soon)
{
	enum worker_early early = WORKER_EARLY_NO;
	size_t n, q, quiet;

	pthread_mutex_lock(&ws->lock);
	n = ws->n_pending;
	if (ws->live && n > 0) {
		q = worker_quiet_tail(ws->pending, n);
		if (q < n)		/* sound in what is pending */
			quiet = q;
		else if (ws->fed_quiet >= WORKER_END_PAUSE)
			quiet = 0;	/* a step read the pause (or no sound) */
		else
			quiet = n + ws->fed_quiet;
		if (quiet >= WORKER_END_PAUSE)
			early = WORKER_EARLY_END;
		else if (quiet > 0)
			early = WORKER_EARLY_PAUSING;
		else if (soon > 0 && n >= soon && q == 0)
			early = WORKER_EARLY_PREVIEW;
	}
	pthread_mutex_unlock(&ws->lock);
	return early;
}

int
worker_queue_early_step(struct worker_stream *ws, enum worker_early early)
{
	pthread_mutex_lock(&ws->lock);
	ws->early = early;
	pthread_mutex_unlock(&ws->lock);
	return worker_queue(ws, WORKER_STEP);
}

enum worker_early
worker_take_early_step(struct worker_stream *ws)
{
	enum worker_early early;

	pthread_mutex_lock(&ws->lock);
	early = ws->n_pending > 0 ? ws->early : WORKER_EARLY_NO;
	ws->early = WORKER_EARLY_NO;
	pthread_mutex_unlock(&ws->lock);
	return early;
}

void
worker_stepped(struct worker_stream *ws)
{
	pthread_mutex_lock(&ws->lock);
	ws->held = 0;
	pthread_mutex_unlock(&ws->lock);
}

/*
 * The window decoded for its partial alone, with all of ws's pending
 * audio (less than a step beyond what previews fed before, so the next
 * step comes where it would have without them): the finals stay those
 * of whole steps (sotto_stream_preview).
 */
int
worker_preview(struct worker_stream *ws, struct worker_result *r)
{
	size_t step = (size_t)ws->params.step_ms * SOTTO_SAMPLE_RATE / 1000;
	struct sotto_stream_update u;
	size_t n;

	pthread_mutex_lock(&ws->lock);
	n = ws->n_pending + ws->held < step ? ws->n_pending : 0;
	pthread_mutex_unlock(&ws->lock);
	if (n == 0)
		return 0;
	if (worker_feed(ws, n, r->err) != 0 ||
	    sotto_stream_preview(ws->stream, &u, r->err) != 0)
		return -1;
	if (worker_copy(ws, r, &u) != 0) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return -1;
	}
	r->stepped = 1;
	return 1;
}

int
worker_feed(struct worker_stream *ws, size_t max, char *err)
{
	size_t n, q;
	int rc;

	pthread_mutex_lock(&ws->lock);
	n = ws->n_pending < max ? ws->n_pending : max;
	rc = n ? sotto_stream_push(ws->stream, ws->pending, n, err) : 0;
	if (rc == 0 && n > 0 && ws->track != NULL &&
	    (rc = sotto_speaker_track_push(ws->track, ws->pending, n,
	    err)) == 0)
		ws->track_fed += n;
	if (rc == 0 && n > 0) {
		q = worker_quiet_tail(ws->pending, n);
		ws->fed_quiet = q < n ? q : ws->fed_quiet == SIZE_MAX ?
		    SIZE_MAX : ws->fed_quiet + n;
	}
	if (rc == 0 && n > 0) {	/* pending is NULL until audio came */
		memmove(ws->pending, ws->pending + n,
		    (ws->n_pending - n) * sizeof(float));
		ws->n_pending -= n;
		ws->held += n;
	}
	pthread_mutex_unlock(&ws->lock);
	return rc;
}

/*
 * The audio to feed ws for its next step: one step; or, for a live
 * stream that has fallen behind (two steps or more pending: the compute
 * thread has more streams than it can step in time), every whole step
 * pending, up to WORKER_CATCHUP_S seconds. A step costs about the same
 * whatever audio it adds (the window is encoded whole), so one step at
 * a time would fall further behind, and a live source cannot wait; in
 * larger steps the stream keeps up, with fewer partials. Whole steps,
 * so a stream that keeps up is stepped as before. Other streams are
 * stepped one step at a time whatever the load, so their transcript
 * does not depend on it.
 */
size_t
worker_feed_size(struct worker_stream *ws)
{
	size_t step = (size_t)ws->params.step_ms * SOTTO_SAMPLE_RATE / 1000;
	size_t most = (size_t)WORKER_CATCHUP_S * SOTTO_SAMPLE_RATE / step;
	size_t k = 1, held;

	if (ws->live) {
		k = worker_stream_pending(ws) / step;
		k = k > most ? most : k;
		k = k < 1 ? 1 : k;
	}
	pthread_mutex_lock(&ws->lock);
	held = ws->held;
	pthread_mutex_unlock(&ws->lock);
	/* previews fed the engine some: the step comes where it would have */
	return k * step > held ? k * step - held : 0;
}

/*
 * Whether a FINISH job ends ws at once: a live stream whose pending
 * audio is no more than a catch-up (WORKER_CATCHUP_S) is fed all of it
 * and finished without a step first. sotto_stream_finish decodes what
 * is not yet final in one window (two past 30 s), where a step and then
 * the finish would encode the window twice; the end of a live stream is
 * what its client waits for (a Wyoming utterance's transcript). Other
 * streams end one step per job, so that a long backlog does not hold
 * the compute thread.
 */
int
worker_finish_at_once(struct worker_stream *ws)
{
	return ws->live && worker_stream_pending(ws) <=
	    (size_t)WORKER_CATCHUP_S * SOTTO_SAMPLE_RATE;
}

/*
 * The end of the stream (a FINISH job once nothing is due and nothing
 * pending): the rest of its audio decoded and all of it made final.
 */
int
worker_finish(struct worker_stream *ws, struct worker_result *r, char *err)
{
	struct sotto_stream_update u;
	int rc;

	if ((rc = sotto_stream_finish(ws->stream, &u, err)) != 0)
		return rc;
	r->stepped = 1;
	r->ended = 1;
	return worker_copy(ws, r, &u) != 0 ? SOTTO_ENOMEM : 0;
}

/*
 * A following stream whose model was replaced moves at a pause (the
 * audio fed so far ends in half a second under the engine's gate), so
 * that no word is cut in two between the models; after
 * WORKER_MOVE_WAIT_S without one, it moves anyway.
 */
int
worker_may_move(struct worker_stream *ws)
{
	double now = worker_now();
	int pause;

	if (ws->stale_since == 0)
		ws->stale_since = now;
	pthread_mutex_lock(&ws->lock);
	pause = ws->fed_quiet >= WORKER_PAUSE;
	pthread_mutex_unlock(&ws->lock);
	return pause || now - ws->stale_since >= WORKER_MOVE_WAIT_S;
}

/*
 * A following stream after a reload: finish its engine stream into r
 * (its last finals), then put it on the current model; the next engine
 * stream starts where this one ended.
 */
int
worker_switch(struct worker_stream *ws, struct worker_result *r)
{
	struct sotto_stream_update u;
	struct sotto_model_info info;
	struct model_ref *cur;
	int rc;

	if ((rc = sotto_stream_finish(ws->stream, &u, r->err)) != 0)
		return rc;
	if (worker_copy(ws, r, &u) != 0)
		return SOTTO_ENOMEM;
	ws->t_offset += u.audio_time;
	ws->stale_since = 0;
	sotto_stream_free(ws->stream);
	ws->stream = NULL;
	if ((cur = models_take()) != NULL) {
		models_drop(ws->model);
		ws->model = cur;
	}
	sotto_model_info(models_model(ws->model), &info);
	log_info("stream %llu: moved to model %s at %.1f s", (unsigned long
	    long)ws->id, info.name != NULL ? info.name : "?", ws->t_offset);
	return 0;
}

/*
 * A result for a job of ws, with the stream created if it is not yet;
 * NULL when out of memory. A failed stream's result has error set.
 */
struct worker_result *
worker_prepare(struct worker_stream *ws, enum worker_kind kind)
{
	struct worker_result *r;
	int rc = 0;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->id = ws->id;
	r->kind = kind;
	if (ws->follow && ws->stream != NULL && !ws->failed &&
	    !models_is_current(ws->model) && worker_may_move(ws))
		rc = worker_switch(ws, r);
	if (ws->stream == NULL && !ws->failed && rc == 0)
		rc = sotto_stream_new(models_model(ws->model), &ws->params,
		    &ws->stream, r->err);
	if (ws->failed || rc != 0) {
		ws->failed = 1;
		r->error = 1;
		if (r->err[0] == '\0')
			snprintf(r->err, sizeof(r->err), "stream failed");
	}
	return r;
}

void
worker_fail(struct worker_stream *ws, struct worker_result *r)
{
	ws->failed = 1;
	r->error = 1;
}

/* Shutdown: a job's result without running it. */
struct worker_result *
worker_skip(struct worker_stream *ws, enum worker_kind kind)
{
	struct worker_result *r;

	if ((r = calloc(1, sizeof(*r))) != NULL) {
		r->id = ws->id;
		r->kind = kind;
		r->aborted = 1;
	}
	return r;
}

/*
 * The compute threads ([engine] workers of them): the only threads that
 * call the engine.
 *
 * DESIGN
 * A session owns a struct worker_stream, shared with these threads: the
 * loop appends 16 kHz mono audio to its pending buffer (under the
 * stream's lock) and queues jobs; the compute threads alone create, step,
 * finish and free the sotto_stream inside it. Each thread takes the next
 * job in the order worker-sched.c chooses (memory first, then live
 * streams first come first served, then the rest by least compute time
 * had so far), never one of a stream another thread is stepping
 * (ws->running); a stream has at most one STEP or FINISH queued, so its
 * jobs never overlap, and a FREE queued after a STEP runs after it. The
 * engine's threads are shared among the jobs that run at once
 * (worker_share). Each job leaves a result
 * (copies, keyed by the session's numeric id, never a pointer) on the
 * done list and wakes the loop with event_active(); the loop looks the
 * session up by id and drops results of sessions that are gone. Peers
 * are never touched here.
 *
 * A STEP job feeds the engine one step of pending audio beyond what it
 * already holds (a live stream that has fallen behind: more, see
 * worker_feed_size), then steps once if a step is due; the rest stays
 * pending, so "pending + undecoded" is the session's lag and one busy
 * session cannot starve the others (the loop queues its next job when
 * this one returns).
 *
 * A FINISH job (the stream ended: END, or a shutdown) is a STEP that,
 * once nothing is due and nothing pending, ends the engine stream
 * instead; the loop queues FINISH jobs until one ends it, so a finishing
 * stream takes one step per turn like the others, and its finals go out
 * as they come. A live stream with at most a catch-up pending ends in
 * its first FINISH, without that step (worker_finish_at_once).
 *
 * STEP and FINISH jobs of different streams run as one batch
 * (worker-batch.c): with one the thread takes the queue's other STEP and
 * FINISH jobs, best first (as many as step in about WORKER_BATCH_S, from
 * 2 to WORKER_BATCH, and no more than this thread's share of those
 * queued: worker_take_steps), feeds each, and steps the due ones
 * together (sotto_stream_step_many), so their decoders read the weights
 * once per token for all of them. Each stream of a batch is charged an
 * equal share of its time (attained_s).
 *
 * Shutdown: after worker_abort() no engine work is done for streams;
 * each STEP or FINISH job comes back at once with aborted set (FREE
 * jobs still run), and a step already running completes; a FILE job
 * comes back canceled (at once, or at its next window when running).
 *
 * A FILE job (worker-file.c) transcribes a whole uploaded file as `sotto
 * transcribe` does. Between two of its 30 s windows it runs the jobs of
 * other kinds queued meanwhile (worker_yield), so streams wait for one
 * window of a file, not for all of it; files run one after another.
 *
 * Models: a stream runs on the model that was current when its session
 * opened (models.c holds a reference for it), so a reload never changes
 * a session's model halfway. A following stream (the microphone, which
 * never ends) moves to the current model at its first pause after a
 * reload (worker_may_move): its engine stream is finished (the finals of
 * everything it holds are sent) and a new one takes the audio that
 * follows, its times continuing from the old one's (t_offset).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "worker-private.h"

#define WORKER_BATCH_S	1.0	/* seconds a batch takes, about */
#define WORKER_ACTIVE_S	2.0	/* a stream stepped this recently steps
				   again soon (worker_share) */

static struct {
	pthread_t		 threads[WORKER_THREADS_MAX];
	int			 n_threads;	/* compute threads started */
	int			 cores;		/* the engine's threads, shared */
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;
	struct worker_job_list	 jobs;
	TAILQ_HEAD(, worker_result) done;
	int			 stop, running;
	int			 n_busy;	/* compute threads in a job */
	int			 abort;		/* shutdown: no engine work */
	struct event		*wake;
	double			 compute_s;	/* seconds per step, averaged */
	TAILQ_HEAD(, worker_stream) streams;	/* alive */
} worker = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.streams = TAILQ_HEAD_INITIALIZER(worker.streams),
};

double
worker_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct worker_stream *
worker_stream_new(uint64_t id, const struct sotto_stream_params *p,
    int live)
{
	struct worker_stream *ws;

	if ((ws = calloc(1, sizeof(*ws))) == NULL)
		return NULL;
	ws->id = id;
	ws->live = live;
	ws->fed_quiet = SIZE_MAX;
	if ((ws->model = models_take()) == NULL) {
		free(ws);
		return NULL;
	}
	ws->params = *p;
	/* the stream is made on the compute thread, and again after a reload */
	if (p->prompt != NULL && p->prompt[0] != '\0' &&
	    (ws->prompt = strdup(p->prompt)) == NULL) {
		models_drop(ws->model);
		free(ws);
		return NULL;
	}
	ws->params.prompt = ws->prompt;
	pthread_mutex_init(&ws->lock, NULL);
	if (p->language != NULL) {
		snprintf(ws->language, sizeof(ws->language), "%s",
		    p->language);
		ws->params.language = ws->language;
	}
	pthread_mutex_lock(&worker.lock);
	ws->last_job = worker_now();
	TAILQ_INSERT_TAIL(&worker.streams, ws, all);
	pthread_mutex_unlock(&worker.lock);
	return ws;
}

/* Queue j (loop thread); a compute thread takes it from there. */
static void
worker_enqueue(struct worker_job *j)
{
	j->queued_at = worker_now();
	pthread_mutex_lock(&worker.lock);
	TAILQ_INSERT_TAIL(&worker.jobs, j, entry);
	pthread_cond_signal(&worker.cond);
	pthread_mutex_unlock(&worker.lock);
}

/* Queue a job; after WORKER_FREE the caller must forget ws. */
int
worker_queue(struct worker_stream *ws, enum worker_kind kind)
{
	struct worker_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	j->ws = ws;
	j->kind = kind;
	worker_enqueue(j);
	return 0;
}

int
worker_queue_file(struct worker_file *f)
{
	struct worker_job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	j->file = f;
	j->kind = WORKER_FILE;
	worker_enqueue(j);
	return 0;
}

void
worker_result_free(struct worker_result *r)
{
	int i, j;

	if (r == NULL)
		return;
	for (i = 0; i < r->n_finals; i++) {
		free(r->finals[i].text);
		for (j = 0; j < r->finals[i].n_words; j++)
			free(r->finals[i].words[j].word);
		free(r->finals[i].words);
	}
	free(r->finals);
	free(r->partial);
	free(r);
}

/*
 * Free ws; when it was the last stream and nothing is queued, give the
 * free memory back (mem.c): a burst of sessions has just ended.
 */
static void
worker_stream_free(struct worker_stream *ws)
{
	int idle;

	pthread_mutex_lock(&worker.lock);
	TAILQ_REMOVE(&worker.streams, ws, all);
	idle = TAILQ_EMPTY(&worker.streams) && TAILQ_EMPTY(&worker.jobs);
	pthread_mutex_unlock(&worker.lock);
	sotto_stream_free(ws->stream);
	sotto_speaker_track_free(ws->track);
	models_drop(ws->model);
	pthread_mutex_destroy(&ws->lock);
	free(ws->pending);
	free(ws->prompt);
	free(ws);
	if (idle)
		mem_idle();
}

/*
 * With the lock held: how many streams a batch takes, at most: as many
 * as step in about WORKER_BATCH_S by the recent time per stream, from 2
 * to WORKER_BATCH, so that a stream that comes (a live one's next step)
 * waits for one short batch, not for 16 streams.
 */
static int
worker_batch_most(void)
{
	double s = worker.compute_s, most;

	if (s <= 0)
		return WORKER_BATCH;
	most = WORKER_BATCH_S / s;
	return most < 2 ? 2 : most > WORKER_BATCH ? WORKER_BATCH : (int)most;
}

/*
 * With the lock held: the STEP and FINISH jobs to run with j (taken out
 * of the queue already), best first (worker-sched.c), taken out of the
 * queue into batch after j's; returns how many in all.
 */
static int
worker_take_steps(struct worker_job *j, struct worker_task *batch)
{
	struct worker_job *q;
	int n = 1, most = worker_batch_most(), queued = 1, share, i;

	/*
	 * leave the other compute threads their share of the steps queued,
	 * busy ones too: one is soon done, and would wait for this batch
	 */
	TAILQ_FOREACH(q, &worker.jobs, entry)
		queued += q->kind == WORKER_STEP || q->kind == WORKER_FINISH;
	share = (queued + worker.n_threads - 1) / worker.n_threads;
	if (share < most)
		most = share;
	batch[0].ws = j->ws;
	batch[0].kind = j->kind;
	while (n < most &&
	    (q = worker_sched_step(&worker.jobs)) != NULL) {
		TAILQ_REMOVE(&worker.jobs, q, entry);
		batch[n].ws = q->ws;
		batch[n++].kind = q->kind;
		free(q);
	}
	for (i = 0; i < n; i++)
		batch[i].ws->running = 1;
	return n;
}

/*
 * With the lock held: the engine threads for a job starting now: the
 * cores shared among the jobs that can run at once, up to the compute
 * threads: those running (this one included), a file queued, and a job
 * for each other stream that is stepping (its last job ended, or it
 * opened, in the last WORKER_ACTIVE_S). A lone stream has them all, also
 * beside sessions that wait for a resume; with two streams on two
 * compute threads each job has half, even when the other stream is
 * between two steps: a job keeps its share to its end, and a team of two
 * on a core the other stream's next step takes waits on itself at every
 * region. (A stream silent for longer is not counted until it steps.)
 */
static int
worker_share(void)
{
	const struct worker_stream *ws;
	const struct worker_job *q;
	double now = worker_now();
	int jobs = worker.n_busy, n;

	TAILQ_FOREACH(q, &worker.jobs, entry)
		jobs += q->kind == WORKER_FILE;
	TAILQ_FOREACH(ws, &worker.streams, all)
		jobs += !ws->running && now - ws->last_job < WORKER_ACTIVE_S;
	if (jobs > worker.n_threads)
		jobs = worker.n_threads;
	n = worker.cores / (jobs > 0 ? jobs : 1);
	return n > 0 ? n : 1;
}

/* With the lock held: queue a result and wake the loop. */
static void
worker_done(struct worker_result *r)
{
	if (r == NULL)
		return;
	if (r->stepped)
		worker.compute_s = worker.compute_s == 0 ? r->compute_s :
		    worker.compute_s * 0.9 + r->compute_s * 0.1;
	TAILQ_INSERT_TAIL(&worker.done, r, entry);
	event_active(worker.wake, EV_READ, 0);
}

/* A FILE job's result: the job itself, back to the loop. */
static struct worker_result *
worker_run_file(struct worker_file *f)
{
	struct worker_result *r;

	worker_file_run(f);
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		/* the loop must get the job back: keep trying */
		while ((r = calloc(1, sizeof(*r))) == NULL)
			sleep(1);
	}
	r->id = f->id;
	r->kind = WORKER_FILE;
	r->file = f;
	return r;
}

/*
 * Run job j (taken out of the queue, the lock held; held again on
 * return) and queue its results.
 */
static void
worker_run_job(struct worker_job *j)
{
	struct worker_task batch[WORKER_BATCH];
	struct worker_result *r[WORKER_BATCH];
	int n = 0, i, skip, step;
	double t0;

	step = j->kind == WORKER_STEP || j->kind == WORKER_FINISH;
	skip = worker.abort && step;
	if (step && !skip)
		n = worker_take_steps(j, batch);
	sotto_thread_share(worker_share());
	pthread_mutex_unlock(&worker.lock);
	if (skip)
		r[n++] = worker_skip(j->ws, j->kind);
	else if (n > 0) {
		t0 = worker_now();
		worker_run_steps(batch, n, r);
		worker_trace(batch, n, t0, worker_now() - t0);
	}
	else if (j->kind == WORKER_FILE)
		r[n++] = worker_run_file(j->file);
	else
		worker_stream_free(j->ws);
	free(j);
	pthread_mutex_lock(&worker.lock);
	for (i = 0; step && !skip && i < n; i++) {
		batch[i].ws->running = 0;
		batch[i].ws->last_job = worker_now();
	}
	for (i = 0; i < n; i++)
		worker_done(r[i]);
	/* a FREE may have waited for these streams */
	pthread_cond_broadcast(&worker.cond);
}

void
worker_post(struct worker_result *r)
{
	pthread_mutex_lock(&worker.lock);
	worker_done(r);
	pthread_mutex_unlock(&worker.lock);
}

/*
 * Between two windows of a FILE job: run the other jobs queued by now
 * (not other files, which wait their turn), at most as many as there
 * are, so that the file goes on.
 */
void
worker_yield(void)
{
	struct worker_job *j;
	int budget = 0;

	pthread_mutex_lock(&worker.lock);
	sotto_thread_share(worker_share());	/* as the file's next window's */
	TAILQ_FOREACH(j, &worker.jobs, entry)
		budget++;
	while (budget-- > 0) {
		if ((j = worker_sched_next(&worker.jobs, 0,
		    worker_now())) == NULL)
			break;
		TAILQ_REMOVE(&worker.jobs, j, entry);
		worker_run_job(j);
	}
	pthread_mutex_unlock(&worker.lock);
}

/*
 * Whether worker_stop() or worker_abort() has been called: files give
 * up at their next window, so that their clients hear of it before
 * sottod exits.
 */
int
worker_stopping(void)
{
	int stop;

	pthread_mutex_lock(&worker.lock);
	stop = worker.stop || worker.abort;
	pthread_mutex_unlock(&worker.lock);
	return stop;
}

/*
 * A compute thread: the next job that can run (none of a stream another
 * thread is stepping), until worker_stop() and the queue is empty.
 */
static void *
worker_main(void *arg)
{
	struct worker_job *j;
	char name[16];

	/* named for top -H and the tests: "compute 1", "compute 2", ... */
	snprintf(name, sizeof(name), "compute %d", (int)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&worker.lock);
	for (;;) {
		j = worker_sched_next(&worker.jobs, 1, worker_now());
		if (j == NULL && worker.stop && TAILQ_EMPTY(&worker.jobs))
			break;
		if (j == NULL) {
			pthread_cond_wait(&worker.cond, &worker.lock);
			continue;
		}
		TAILQ_REMOVE(&worker.jobs, j, entry);
		worker.n_busy++;
		worker_run_job(j);
		worker.n_busy--;
	}
	pthread_mutex_unlock(&worker.lock);
	return NULL;
}

/*
 * Take every finished result, oldest first; the caller frees each with
 * worker_result_free. Loop thread only.
 */
struct worker_result *
worker_next_result(void)
{
	struct worker_result *r;

	pthread_mutex_lock(&worker.lock);
	if ((r = TAILQ_FIRST(&worker.done)) != NULL)
		TAILQ_REMOVE(&worker.done, r, entry);
	pthread_mutex_unlock(&worker.lock);
	return r;
}

void
worker_abort(void)
{
	pthread_mutex_lock(&worker.lock);
	worker.abort = 1;
	pthread_mutex_unlock(&worker.lock);
}

/* Recent compute seconds per step (moving average). */
double
worker_step_seconds(void)
{
	double s;

	pthread_mutex_lock(&worker.lock);
	s = worker.compute_s;
	pthread_mutex_unlock(&worker.lock);
	return s;
}

/*
 * Start n compute threads (1 to WORKER_THREADS_MAX) that share cores
 * engine threads; wake (an event on the loop's base) is made active
 * whenever results are ready. Returns 0 or -1 with err.
 */
int
worker_start(struct event *wake, int n, int cores, char *err,
    size_t errlen)
{
	int rc;

	TAILQ_INIT(&worker.jobs);
	TAILQ_INIT(&worker.done);
	worker.wake = wake;
	worker.cores = cores > 0 ? cores : 1;
	n = n < 1 ? 1 : n > WORKER_THREADS_MAX ? WORKER_THREADS_MAX : n;
	for (worker.n_threads = 0; worker.n_threads < n; worker.n_threads++)
		if ((rc = pthread_create(&worker.threads[worker.n_threads],
		    NULL, worker_main, (void *)(intptr_t)(worker.n_threads +
		    1))) != 0) {
			snprintf(err, errlen, "cannot start compute thread "
			    "%d: %s", worker.n_threads + 1, strerror(rc));
			if (worker.n_threads == 0)
				return -1;
			log_warnx("%s; going on with %d", err,
			    worker.n_threads);
			break;
		}
	worker.running = 1;
	return 0;
}

/* Jobs waiting for a compute thread (GET /metrics). */
int
worker_queue_depth(void)
{
	struct worker_job *j;
	int n = 0;

	pthread_mutex_lock(&worker.lock);
	TAILQ_FOREACH(j, &worker.jobs, entry)
		n++;
	pthread_mutex_unlock(&worker.lock);
	return n;
}

int
worker_idle_alone(void)
{
	int idle;

	pthread_mutex_lock(&worker.lock);
	idle = worker.n_busy == 0 && TAILQ_EMPTY(&worker.jobs) &&
	    !TAILQ_EMPTY(&worker.streams) &&
	    TAILQ_NEXT(TAILQ_FIRST(&worker.streams), all) == NULL;
	pthread_mutex_unlock(&worker.lock);
	return idle;
}

/* Whether the compute threads run (GET /health). */
int
worker_alive(void)
{
	int alive;

	pthread_mutex_lock(&worker.lock);
	alive = worker.running && !worker.stop;
	pthread_mutex_unlock(&worker.lock);
	return alive;
}

/* Finish the queued jobs and join the thread; drops unread results. */
void
worker_stop(void)
{
	struct worker_result *r;
	int i;

	if (!worker.running)
		return;
	pthread_mutex_lock(&worker.lock);
	worker.stop = 1;
	pthread_cond_broadcast(&worker.cond);
	pthread_mutex_unlock(&worker.lock);
	for (i = 0; i < worker.n_threads; i++)
		pthread_join(worker.threads[i], NULL);
	worker.running = 0;
	while ((r = worker_next_result()) != NULL) {
		if (r->kind == WORKER_FILE)
			worker_file_done(r->file);	/* its owner frees it */
		worker_result_free(r);
	}
}

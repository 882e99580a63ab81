/*
 * Which job a compute thread runs next, and which run with it in a
 * batch. worker.c holds the queue and its lock; everything here runs on
 * a compute thread with that lock held. No job of a stream another
 * compute thread is stepping (running) is taken.
 *
 * 1. FREE jobs first: they give memory back and cost no compute. A FREE
 *    waits only for a STEP or FINISH of its own stream, queued or
 *    running, so a stream's jobs keep their order (a stream has at most
 *    one STEP or FINISH queued: the loop queues the next when the last
 *    returns).
 * 2. Files (HTTP uploads, Wyoming utterances) that have waited
 *    WORKER_FILE_WAIT_S, oldest first: live streams that take the whole
 *    thread (more of them than the CPU can step) would otherwise keep a
 *    file waiting until they end. A file runs one 30 s window at a time
 *    and lets every job queued meanwhile run between two windows
 *    (worker_yield), so it takes a bounded share: its live streams lag
 *    by about a window, and catch up in larger steps.
 * 3. Live streams (audio as it is spoken: a microphone, `sotto stream`
 *    paced as live), first come first served: a step is due every
 *    step_ms and they cannot wait; they take no more than real time
 *    gives them. (worker.c also keeps batches short while one is open.)
 * 4. The rest (streams sent as fast as sottod takes them, and files) by
 *    least attained service: the stream that has had the least compute
 *    time so far (attained_s, FINISH steps included) first, the one
 *    queued earlier on a tie; a file counts as none. First come first
 *    served, each stream requeued at the back after a step, makes a
 *    stream that comes late share equally with streams that have been
 *    served for a while; ranked by what they had, the newcomer goes
 *    first until it has had as much, so a short one ends long before
 *    the long ones. A batch is filled in the same order.
 *
 * docs/benchmarks.md "Fairness" measures it (bench/fairness).
 */
#include "worker-private.h"

/* 0 FREE, 1 a file waiting long, 2 a live stream, 3 the rest. */
static int
worker_sched_class(const struct worker_job *j, double now)
{
	if (j->kind == WORKER_FREE)
		return 0;
	if (j->kind == WORKER_FILE)
		return now - j->queued_at >= WORKER_FILE_WAIT_S ? 1 : 3;
	return j->ws != NULL && j->ws->live ? 2 : 3;
}

static double
worker_sched_attained(const struct worker_job *j)
{
	return j->ws != NULL ? j->ws->attained_s : 0;
}

/* Whether a should run before b (b NULL: it should); a was queued after b. */
static int
worker_sched_before(const struct worker_job *a, const struct worker_job *b,
    double now)
{
	int ca, cb;

	if (b == NULL)
		return 1;
	ca = worker_sched_class(a, now);
	cb = worker_sched_class(b, now);
	if (ca != cb)
		return ca < cb;
	return ca == 3 && worker_sched_attained(a) < worker_sched_attained(b);
}

/* Whether a STEP or FINISH job of ws is queued. */
static int
worker_sched_stepping(const struct worker_job_list *jobs,
    const struct worker_stream *ws)
{
	const struct worker_job *q;

	TAILQ_FOREACH(q, jobs, entry)
		if (q->ws == ws && (q->kind == WORKER_STEP ||
		    q->kind == WORKER_FINISH))
			return 1;
	return 0;
}

struct worker_job *
worker_sched_next(struct worker_job_list *jobs, int files, double now)
{
	struct worker_job *q, *best = NULL;

	TAILQ_FOREACH(q, jobs, entry) {
		if (q->kind == WORKER_FILE && !files)
			continue;
		if (q->ws != NULL && q->ws->running)
			continue;	/* another compute thread steps it */
		if (q->kind == WORKER_FREE) {
			if (!worker_sched_stepping(jobs, q->ws))
				return q;
			continue;
		}
		if (worker_sched_before(q, best, now))
			best = q;
	}
	return best;
}

struct worker_job *
worker_sched_step(struct worker_job_list *jobs)
{
	struct worker_job *q, *best = NULL;

	TAILQ_FOREACH(q, jobs, entry)
		if ((q->kind == WORKER_STEP || q->kind == WORKER_FINISH) &&
		    !q->ws->running &&
		    worker_sched_before(q, best, 0))	/* steps do not age */
			best = q;
	return best;
}

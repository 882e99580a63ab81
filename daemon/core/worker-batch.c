/*
 * A batch of STEP and FINISH jobs, run on a compute thread (worker.c took
 * them out of the queue): each stream fed its share of pending audio,
 * the due ones stepped together, so that their decoders read the weights
 * once per token for all of them.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "worker-private.h"

/*
 * STEP and FINISH jobs of n different streams: each fed
 * worker_feed_size() of its pending audio beyond what the engine holds,
 * then the due ones stepped as one batch; a FINISH with nothing left to
 * step ends its stream instead. out[i] is task i's result (NULL when out
 * of memory); compute_s is the batch's time per stream stepped.
 */
void
worker_run_steps(const struct worker_task *t, int n,
    struct worker_result **out)
{
	struct sotto_stream *due[WORKER_BATCH];
	struct sotto_stream_update u[WORKER_BATCH];
	char err[WORKER_BATCH][SOTTO_ERR_MAX];
	int at[WORKER_BATCH], rc[WORKER_BATCH], k = 0, i, j;
	double t0 = worker_now(), dt;
	struct worker_stream *ws;

	for (i = 0; i < n; i++) {
		enum worker_early early = WORKER_EARLY_NO;
		int pv;

		ws = t[i].ws;
		if ((out[i] = worker_prepare(ws, t[i].kind)) == NULL ||
		    out[i]->error)
			continue;
		if (t[i].kind == WORKER_STEP)
			early = worker_take_early_step(ws);
		if (early == WORKER_EARLY_PREVIEW &&
		    !sotto_stream_due(ws->stream) &&
		    (pv = worker_preview(ws, out[i])) != 0) {
			if (pv < 0)
				worker_fail(ws, out[i]);
			continue;	/* else a step came due meanwhile */
		}
		if (t[i].kind == WORKER_FINISH && worker_finish_at_once(ws)) {
			if (worker_feed(ws, SIZE_MAX, out[i]->err) != 0 ||
			    worker_finish(ws, out[i], out[i]->err) != 0)
				worker_fail(ws, out[i]);
			continue;
		}
		/* an end step reads all of the pause (finish needs no decode) */
		if (!sotto_stream_due(ws->stream) && worker_feed(ws,
		    early == WORKER_EARLY_END ? SIZE_MAX : worker_feed_size(ws),
		    out[i]->err) != 0) {
			worker_fail(ws, out[i]);
			continue;
		}
		if (sotto_stream_due(ws->stream) ||
		    early == WORKER_EARLY_END) {
			at[k] = i;
			due[k++] = ws->stream;
		} else if (t[i].kind == WORKER_FINISH &&
		    worker_finish(ws, out[i], out[i]->err) != 0)
			worker_fail(ws, out[i]);
	}
	if (k > 0)
		sotto_stream_step_many(due, k, u, rc, err);
	for (j = 0; j < k; j++) {
		struct worker_result *r = out[at[j]];

		ws = t[at[j]].ws;
		if (rc[j] != 0) {
			snprintf(r->err, sizeof(r->err), "%s", err[j]);
			worker_fail(ws, r);
		} else if (worker_copy(ws, r, &u[j]) != 0) {
			snprintf(r->err, sizeof(r->err), "out of memory");
			worker_fail(ws, r);
		} else {
			r->stepped = 1;
			worker_stepped(ws);
		}
	}
	dt = worker_now() - t0;
	for (i = 0; i < n; i++)
		t[i].ws->attained_s += dt / n;
	dt /= k > 0 ? k : 1;
	for (i = 0; i < n; i++)
		if (out[i] != NULL) {
			out[i]->due = !t[i].ws->failed &&
			    sotto_stream_due(t[i].ws->stream);
			out[i]->compute_s = dt;
		}
}

/*
 * Debug log: a batch, its compute thread, when it began (worker_now()),
 * its time and each stream's service so far.
 */
void
worker_trace(const struct worker_task *t, int n, double t0, double dt)
{
	char line[WORKER_BATCH * 40], name[16] = "";
	size_t len = 0;
	int i;

	if (!log_getdebug())
		return;
	line[0] = '\0';
	for (i = 0; i < n && len < sizeof(line); i++)
		len += snprintf(line + len, sizeof(line) - len, " %llu%s/%.2f",
		    (unsigned long long)t[i].ws->id,
		    t[i].kind == WORKER_FINISH ? "F" : "", t[i].ws->attained_s);
	pthread_getname_np(pthread_self(), name, sizeof(name));
	log_debug("%s: batch of %d at %.3f in %.3f s (stream/its service, "
	    "F: ended):%s", name, n, t0, dt, line);
}

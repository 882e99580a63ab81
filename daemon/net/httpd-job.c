/*
 * A request's worker-file job, from the request to its reply written
 * (httpd-job.h): the lifecycle the doors that transcribe an uploaded file
 * share.
 *
 * While the job runs, evhttp does not read the connection, so it would
 * not notice a client that went away: an EV_CLOSED event on the socket
 * (httpd_watch_close) does, and the job is canceled at its next window
 * (worker_file_cancel) and the connection freed. A connection evhttp
 * frees itself (a streamed reply's client gone) cancels it too. Either
 * way the request is gone and the job forgotten when it comes back.
 *
 * The reply is watched until it is written (or its connection closes), so
 * that a drain waits for it and not only for the transcription.
 */
#include <stdlib.h>

#include <event2/event.h>
#include <event2/http.h>

#include "core.h"
#include "httpd.h"
#include "httpd-job.h"
#include "log.h"
#include "worker.h"

/* Stop watching for the client going away. */
static void
httpd_job_unwatch(struct httpd_job *j)
{
	if (j->closed != NULL)
		event_free(j->closed);
	j->closed = NULL;
}

static void
httpd_job_free(struct httpd_job *j)
{
	httpd_job_unwatch(j);
	TAILQ_REMOVE(j->list, j, entry);
	free(j);		/* the door's struct, j its first member */
	core_drain_check();
}

/* The reply is written: the job is over. */
static void
httpd_job_sent(struct evhttp_request *req, void *arg)
{
	struct httpd_job *j = arg;

	(void)req;
	if (j->evcon != NULL)
		evhttp_connection_set_closecb(j->evcon, NULL, NULL);
	httpd_job_free(j);
}

/* The reply's connection closed before it was written. */
static void
httpd_job_reply_closed(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	httpd_job_free(arg);
}

/* The connection is freed before the reply: cancel the job. */
static void
httpd_job_gone(struct evhttp_connection *evcon, void *arg)
{
	struct httpd_job *j = arg;

	(void)evcon;
	httpd_job_unwatch(j);
	j->req = NULL;
	j->evcon = NULL;
	if (j->file != NULL)
		worker_file_cancel(j->file);
}

/* The client closed its connection before the reply: free it. */
static void
httpd_job_closed(evutil_socket_t fd, short what, void *arg)
{
	struct httpd_job *j = arg;
	struct evhttp_connection *evcon;

	(void)fd;
	(void)what;
	httpd_job_unwatch(j);
	if (j->req == NULL || j->replied)
		return;
	log_info("%s: the client went away: its %s is canceled", j->door,
	    j->what);
	evcon = evhttp_request_get_connection(j->req);
	httpd_job_gone(evcon, j);
	if (evcon != NULL) {
		evhttp_connection_set_closecb(evcon, NULL, NULL);
		evhttp_connection_free(evcon);	/* and its request */
	}
}

void
httpd_job_add(struct httpd_job_list *list, struct httpd_job *j,
    struct evhttp_request *req, const char *door, const char *what)
{
	j->req = req;
	j->list = list;
	j->door = door;
	j->what = what;
	j->t0 = core_now();
	TAILQ_INSERT_TAIL(list, j, entry);
}

void
httpd_job_watch(struct httpd_job *j, struct worker_file *file)
{
	j->file = file;
	if ((j->evcon = evhttp_request_get_connection(j->req)) != NULL)
		evhttp_connection_set_closecb(j->evcon, httpd_job_gone, j);
	/* where the event backend cannot tell, the job runs on */
	j->closed = httpd_watch_close(j->req, httpd_job_closed, j);
}

struct evhttp_request *
httpd_job_reply(struct httpd_job *j)
{
	httpd_job_unwatch(j);
	j->replied = 1;
	j->evcon = evhttp_request_get_connection(j->req);
	if (j->evcon != NULL) {
		evhttp_request_set_on_complete_cb(j->req, httpd_job_sent, j);
		evhttp_connection_set_closecb(j->evcon, httpd_job_reply_closed,
		    j);
	}
	return j->req;
}

/* Without a connection evhttp frees the request at once: over now. */
void
httpd_job_replied(struct httpd_job *j)
{
	if (j->evcon == NULL)
		httpd_job_free(j);
}

struct evhttp_request *
httpd_job_back(struct httpd_job *j, const struct worker_file *file)
{
	j->file = NULL;
	core_count_file(file->duration, file->compute_s);
	log_info("%s: %s of %.1f s of audio in %.2f s (%.2f s in all)%s%s",
	    j->door, j->what, file->duration, file->compute_s,
	    core_now() - j->t0, file->error ? ": " : "",
	    file->error ? file->err : "");
	if (j->req == NULL) {		/* evhttp or the client is gone */
		httpd_job_free(j);
		return NULL;
	}
	return httpd_job_reply(j);
}

int
httpd_jobs_count(const struct httpd_job_list *list)
{
	const struct httpd_job *j;
	int n = 0;

	TAILQ_FOREACH(j, list, entry)
		n++;
	return n;
}

/*
 * A reply being written is given up with its connection; a job still
 * running is freed when it comes back (worker_stop ends it).
 */
void
httpd_jobs_stop(struct httpd_job_list *list)
{
	struct httpd_job *j, *next;

	TAILQ_FOREACH_SAFE(j, list, entry, next) {
		if (j->evcon != NULL)
			evhttp_connection_set_closecb(j->evcon, NULL, NULL);
		if (j->replied) {
			httpd_job_free(j);
			continue;
		}
		httpd_job_unwatch(j);
		j->evcon = NULL;
		j->req = NULL;
	}
}

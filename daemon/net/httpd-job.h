/*
 * An HTTP request answered when a worker-file job comes back (httpd-job.c):
 * the OpenAI door's uploads and Deepgram's pre-recorded audio. From the
 * request to its reply written, the job is on its door's list (what the
 * door's busy() counts, so a drain waits for it); a client that goes away
 * first, or a connection evhttp frees first, has the job canceled at its
 * next window and forgotten when it comes back. Loop thread only.
 *
 * The door's calls, in order:
 *   httpd_job_add        the request taken (before worker_file_new)
 *   httpd_job_watch      the job queued: watch the client until it is back
 *   httpd_job_back       in the job's done(): the request to answer, or NULL
 *   httpd_job_reply      instead, when the job was not queued (its error)
 *   httpd_job_replied    once the reply is handed to evhttp
 */
#ifndef SOTTOD_HTTPD_JOB_H
#define SOTTOD_HTTPD_JOB_H

#include "tailq.h"

struct evhttp_connection;
struct evhttp_request;
struct event;
struct worker_file;

/*
 * The first member of the door's struct for the request, which the door
 * allocates (calloc) and the job frees with free() when it is over: after
 * httpd_job_back returns NULL, at httpd_job_replied or later (the reply
 * written, its connection closed, or httpd_jobs_stop). Does not own req or
 * evcon (evhttp's) nor file (the door's done() frees it).
 */
struct httpd_job {
	struct evhttp_request	*req;		/* NULL once it is gone */
	struct evhttp_connection *evcon;	/* watched, or NULL */
	struct event		*closed;	/* the client closes, or NULL */
	struct worker_file	*file;		/* until it is back, or NULL */
	struct httpd_job_list	*list;		/* the door's */
	const char		*door;		/* the log's: "http", ... */
	const char		*what;		/* "transcription", ... */
	double			 t0;
	int			 replied;	/* waits for its reply written */
	TAILQ_ENTRY(httpd_job)	 entry;
};
TAILQ_HEAD(httpd_job_list, httpd_job);

/*
 * j (zeroed) answers req, on list until it is over; door and what (static
 * strings) name it in the log.
 */
void	httpd_job_add(struct httpd_job_list *list, struct httpd_job *j,
	    struct evhttp_request *req, const char *door, const char *what);
/* j's file was queued: watch req's connection until it comes back. */
void	httpd_job_watch(struct httpd_job *j, struct worker_file *file);
/*
 * The door's done(): file counted and logged; the request to answer, as
 * httpd_job_reply, or NULL when it is gone (j is freed then).
 */
struct evhttp_request *httpd_job_back(struct httpd_job *j,
	    const struct worker_file *file);
/* The request about to be answered, watched until its reply is written. */
struct evhttp_request *httpd_job_reply(struct httpd_job *j);
/* The reply was handed to evhttp: j may be freed now. */
void	httpd_job_replied(struct httpd_job *j);

/* The jobs on list: its door's busy(). */
int	httpd_jobs_count(const struct httpd_job_list *list);
/* evhttp is going away (its door's stop()): forget the requests. */
void	httpd_jobs_stop(struct httpd_job_list *list);

#endif

/*
 * The compute threads' private parts, shared by worker.c (the threads and
 * their queue), worker-batch.c (a batch of steps), worker-file.c (a
 * file) and worker-stream.c (a stream's audio, results and model). The
 * rest of the daemon sees worker.h.
 */
#ifndef SOTTOD_WORKER_PRIVATE_H
#define SOTTOD_WORKER_PRIVATE_H

#include <pthread.h>

#include "core-private.h"
#include "worker.h"

/*
 * A session's side of the compute thread: pending audio (under lock, the
 * loop appends), and the engine stream the compute thread alone uses.
 */
struct worker_stream {
	uint64_t	 id;
	pthread_mutex_t	 lock;		/* guards pending */
	float		*pending;
	size_t		 n_pending, cap_pending;
	struct sotto_stream_params params;
	char		 language[PROTO_LANGUAGE_MAX];
	char		*prompt;	/* owned copy of params.prompt */
	int		 live;		/* catch up when behind */
	enum worker_early early;	/* guarded by lock: the STEP job
					   queued is early (worker_queue_
					   early_step) */
	size_t		 held;		/* guarded by lock: samples fed the
					   engine since its last step (by
					   previews, or not yet a step) */
	size_t		 fed_quiet;	/* guarded by lock: samples under
					   the gate that end the audio fed
					   (SIZE_MAX: none above it yet):
					   a pause, an end of speech */
	int		 follow;	/* moves to a reloaded model */
	int		 running;	/* guarded by worker.c's lock: a
					   compute thread steps it */
	struct model_ref *model;	/* the model it runs on */
	/* compute thread only: */
	struct sotto_stream *stream;
	struct sotto_speaker_track *track;	/* owned; NULL: no labels */
	double		 track_t0;	/* its audio before this stream, s */
	size_t		 track_fed;	/* samples this stream gave it */
	int		 failed;
	double		 t_offset;	/* audio of earlier streams */
	double		 stale_since;	/* its model was replaced */
	double		 attained_s;	/* compute it has had, in s */
	double		 last_job;	/* guarded by worker.c's lock:
					   worker_now() when its last job
					   ended (0: none yet) */
	TAILQ_ENTRY(worker_stream) all;	/* worker.c's streams */
};

/* A job in the compute thread's queue. */
struct worker_job {
	struct worker_stream	*ws;		/* NULL for FILE */
	struct worker_file	*file;		/* FILE only */
	enum worker_kind	 kind;
	double			 queued_at;	/* worker_now() */
	TAILQ_ENTRY(worker_job)	 entry;
};
TAILQ_HEAD(worker_job_list, worker_job);

/*
 * worker-sched.c, with the queue's lock held: the job to run next (files
 * too only when files is set) at time now (worker_now()), or NULL; the
 * best STEP or FINISH job to run with it in a batch, or NULL. Neither
 * takes it out of the queue.
 */
#define WORKER_FILE_WAIT_S	1.0	/* a file waits no longer for streams */
struct worker_job *worker_sched_next(struct worker_job_list *, int files,
	    double now);
struct worker_job *worker_sched_step(struct worker_job_list *);

double	worker_now(void);

/* worker-batch.c, compute thread */
#define WORKER_BATCH	16	/* streams stepped together, at most */
/* A STEP or FINISH job taken into a batch. */
struct worker_task {
	struct worker_stream	*ws;
	enum worker_kind	 kind;
};
/*
 * Run the batch t[n] (streams that no other thread steps); out[i] is
 * task i's result, owned by the caller (NULL when out of memory).
 */
void	worker_run_steps(const struct worker_task *t, int n,
	    struct worker_result **out);
/* Debug log of a batch that began at t0 (worker_now()) and took dt s. */
void	worker_trace(const struct worker_task *t, int n, double t0,
	    double dt);

/* worker.c, compute thread: files (worker-file.c) */
int	worker_queue_file(struct worker_file *);	/* loop */
void	worker_file_run(struct worker_file *);
void	worker_yield(void);
/* Hand the loop a result now (a file's segments): it owns r from here. */
void	worker_post(struct worker_result *);
int	worker_stopping(void);

/* worker-stream.c, compute thread */
/*
 * A result for a job of ws (owned by the caller), with the stream created
 * if it is not yet; NULL when out of memory. A failed stream's result has
 * error set.
 */
struct worker_result *worker_prepare(struct worker_stream *,
	    enum worker_kind);
/* Mark ws failed and r an error. */
void	worker_fail(struct worker_stream *, struct worker_result *r);
/* Shutdown: a job's result without running it (owned by the caller). */
struct worker_result *worker_skip(struct worker_stream *, enum worker_kind);
int	worker_copy(struct worker_stream *, struct worker_result *,
	    const struct sotto_stream_update *);
int	worker_feed(struct worker_stream *, size_t max, char *err);
size_t	worker_feed_size(struct worker_stream *);
/* How the STEP job of ws was queued (and no longer): WORKER_EARLY_*. */
enum worker_early worker_take_early_step(struct worker_stream *);
/*
 * A preview of ws's window with its pending audio, into r: 1; 0 when a
 * step is due instead (previews fed the engine nearly a step); -1 with
 * r->err.
 */
int	worker_preview(struct worker_stream *, struct worker_result *r);
/* ws's engine stream stepped: no audio held by previews. */
void	worker_stepped(struct worker_stream *);
int	worker_finish(struct worker_stream *, struct worker_result *,
	    char *err);
int	worker_finish_at_once(struct worker_stream *);
int	worker_may_move(struct worker_stream *);
int	worker_switch(struct worker_stream *, struct worker_result *);

#endif

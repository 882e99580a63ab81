/*
 * The compute thread (worker.c, worker-stream.c, worker-file.c): the one
 * thread that runs the engine. Sessions queue their streams' steps;
 * doors queue whole files (worker_file_new) and get them back on the
 * loop. Its private parts are in worker-private.h.
 */
#ifndef SOTTOD_WORKER_H
#define SOTTOD_WORKER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "sotto.h"
#include "tailq.h"

struct event;
struct model_ref;

/* worker.c */
enum worker_kind {
	WORKER_STEP,		/* one step, if one is due */
	WORKER_FINISH,		/* one step of the rest, or the end */
	WORKER_FREE,
	WORKER_FILE,		/* a whole file: worker-file.c */
	WORKER_FILE_SEGMENTS,	/* a file's segments, as decided */
};

struct worker_segment {
	double			 start, end;
	char			*text;
	struct sotto_word	*words;		/* owned; NULL: none asked */
	int			 n_words;
	int			 speaker;	/* 1 is "S1"; 0: none */
};

struct worker_file;
struct worker_result {
	uint64_t		 id;		/* session */
	enum worker_kind	 kind;
	struct worker_file	*file;		/* WORKER_FILE: the job */
	int			 error, stepped, due;
	int			 aborted;	/* shutdown: not run */
	int			 ended;		/* FINISH: the stream is over */
	char			 err[SOTTO_ERR_MAX];
	struct worker_segment	*finals;
	int			 n_finals;
	char			*partial;
	double			 partial_start, partial_end, audio_time;
	double			 compute_s;
	char			 language[8];	/* detected; "" none */
	float			 language_prob;
	int			 language_settled;
	TAILQ_ENTRY(worker_result) entry;
};

struct worker_stream;
/*
 * live: catch up in larger steps when behind (worker.c). NULL when out
 * of memory.
 */
struct worker_stream *worker_stream_new(uint64_t id,
	    const struct sotto_stream_params *, int live);
/* Before its first job: move to the new model after a reload. */
void	worker_stream_follow(struct worker_stream *);
/*
 * Before its first job: label each final with its speaker (live speaker
 * labels, docs/speakers.md), with spk (core_speakers(): it outlives the
 * stream). 0, or -1 with why in err.
 */
int	worker_stream_speakers(struct worker_stream *,
	    const struct sotto_speaker *, char *err);
/*
 * Before its first job, instead of worker_stream_speakers: go on with an
 * ended stream's track (worker_stream_track_take()), which has had t0
 * seconds of audio: this stream's new voices are numbered on from its,
 * and a voice it knew keeps its label. ws owns track from now on.
 */
void	worker_stream_track_give(struct worker_stream *,
	    struct sotto_speaker_track *, double t0);
/*
 * The track of a stream with no job queued or running (done), taken from
 * it (the caller owns it; NULL without labels), with *t0 the seconds of
 * audio it has had.
 */
struct sotto_speaker_track *worker_stream_track_take(struct worker_stream *,
	    double *t0);
int	worker_stream_push(struct worker_stream *, const float *, size_t);
/* Audio not yet stepped: pending, and what the engine holds unstepped. */
size_t	worker_stream_pending(struct worker_stream *);
/*
 * Whether a live stream's pending audio is worth a job before a whole
 * step came (worker-stream.c): a step, when the speaker stopped (sound,
 * then 0.3 s under the engine's -50 dBFS gate); with soon > 0, a preview
 * (sotto_stream_preview: the partial sooner, the finals unchanged) of
 * at least soon samples that end in sound. The caller queues it with
 * worker_queue_early_step(). PAUSING: sound, then less than 0.3 s under
 * the gate (no job; the speaker may be stopping).
 */
enum worker_early {
	WORKER_EARLY_NO,
	WORKER_EARLY_END,	/* step all that is pending */
	WORKER_EARLY_PREVIEW,	/* preview it */
	WORKER_EARLY_PAUSING,	/* (worker_stream_early's answer only) */
};
enum worker_early worker_stream_early(struct worker_stream *, size_t soon);
int	worker_queue_early_step(struct worker_stream *, enum worker_early);
/* No job runs or waits and one stream is alive (the caller's). */
int	worker_idle_alone(void);
int	worker_queue(struct worker_stream *, enum worker_kind);
struct worker_result *worker_next_result(void);
void	worker_result_free(struct worker_result *);
double	worker_step_seconds(void);
#define WORKER_THREADS_MAX	8	/* compute threads, at most */
int	worker_start(struct event *wake, int n, int cores, char *err,
	    size_t errlen);
/* Shutdown: no more engine work; jobs return at once, aborted. */
void	worker_abort(void);
void	worker_stop(void);
int	worker_alive(void);
int	worker_queue_depth(void);

/* worker-file.c: whole files transcribed on the compute thread */
struct worker_file;
/*
 * A file's segments as each window decides them (they never change),
 * on the loop, before done(): text and times; seg[n] is the callee's
 * for the call only.
 */
typedef void worker_file_segments_fn(struct worker_file *,
	    const struct worker_segment *seg, int n, void *arg);

struct worker_file_params {
	char		 language[PROTO_LANGUAGE_MAX];	/* "": detect */
	enum sotto_task	 task;
	int		 beam_size;
	float		 temperature;	/* the first; fallback by 0.2 to 1 */
	const char	*prompt;	/* NULL or copied */
	int		 word_timestamps;	/* segments get their words */
	/*
	 * Speaker labels (sotto_diarize(), after the transcript; needs
	 * word_timestamps): the models from core_speakers(), or NULL for
	 * none. A labelling that fails fails the job.
	 */
	const struct sotto_speaker *speakers;
	const struct sotto_vad	*speakers_vad;
	struct sotto_diarize_params diarize;
	/* NULL, or told of the segments while the file is transcribed */
	worker_file_segments_fn *segments;
};

enum worker_file_error {
	WORKER_FILE_OK = 0,
	WORKER_FILE_BAD_INPUT,	/* not audio, damaged, empty: the client's */
	WORKER_FILE_FAILED,	/* the engine failed */
	WORKER_FILE_CANCELED,	/* sottod is stopping, or worker_file_cancel */
};

typedef void worker_file_done_fn(struct worker_file *, void *arg);

struct worker_file {
	uint64_t		 id;
	void			*data;		/* the encoded file */
	size_t			 len;
	struct worker_file_params params;
	char			*prompt;
	struct model_ref	*model;
	worker_file_done_fn	*done;
	void			*arg;
	atomic_int		 cancel;	/* set by worker_file_cancel */
	/* the result, once done */
	enum worker_file_error	 error;
	char			 err[SOTTO_ERR_MAX];
	struct sotto_result	*res;		/* NULL on error */
	double			 duration;	/* seconds of audio */
	double			 compute_s;
	TAILQ_ENTRY(worker_file) entry;		/* loop: jobs not yet done */
};

/*
 * Queue the transcription of data[len], an audio file in any format
 * common/audio.c reads (libsndfile, else FFmpeg; the job owns data from
 * the call on, even when this fails), on the current model. done(f, arg)
 * runs on the loop when it is over: f->error, f->err, f->res; the callee
 * frees f with worker_file_free. NULL with msg when out of memory.
 */
struct worker_file *worker_file_new(uint64_t id, void *data, size_t len,
	    const struct worker_file_params *, worker_file_done_fn *done,
	    void *arg, char *msg);
void	worker_file_free(struct worker_file *);
/*
 * Loop thread, before done(): stop the job at its next window (it has no
 * one to go to); done() still comes, with WORKER_FILE_CANCELED.
 */
void	worker_file_cancel(struct worker_file *);
/* Jobs queued or running (they count as sessions). */
int	worker_file_count(void);
/* The first n of them (the loop's list, oldest first). */
int	worker_file_list(struct worker_file **, int n);
/* The loop (server.c): f is back from the compute thread; done(). */
void	worker_file_done(struct worker_file *);
/* The loop (server.c): segments of a file still running (r->file). */
void	worker_file_segments(const struct worker_result *);

#endif

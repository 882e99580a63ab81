/*
 * One run of `sotto stream`, shared by its files: cmd-stream.c (options,
 * the loop, events), stream-feed.c (the audio sent, and when) and
 * stream-resume.c (--resume).
 */
#ifndef SOTTO_CLIENT_STREAM_RUN_H
#define SOTTO_CLIENT_STREAM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include <opus.h>

#include "proto.h"
#include "stream.h"

struct json_object;

#define STREAM_QUEUE_MAX_BYTES	(256 * 1024)	/* --fast: unsent audio */
#define STREAM_OPUS_FRAME	320		/* 20 ms at 16 kHz */
#define STREAM_RESUME_S		30	/* reconnecting, at most */
#define STREAM_RESUMES_MAX	20

struct stream_opts {
	const char *socket, *file, *language, *task;
	const char *output;		/* -o: NULL standard output */
	const char *prompt;		/* --prompt: NULL none */
	enum stream_format format;
	enum proto_format raw_format, send_format;
	int fast, rate, channels, chunk_ms, quiet, words, resume, diarize;
};

struct stream_src {
	float *pcm;			/* file: 16 kHz mono */
	size_t n, off;
	OpusEncoder *enc;
	int stdin_eof;
};

struct stream_run {
	struct conn c;
	struct stream_output out;
	struct stream_src src;
	double t0;
	size_t sent;
	int is_stdin, end_sent;
	/* --resume */
	const char *path;
	struct stream_sent frames;	/* every AUDIO frame sent */
	size_t frame0;			/* frames[frame0]: the session's first */
	int resuming;			/* an OPEN resume awaits its answer */
	int gone;			/* no_session: open a new one */
	int64_t last_final;		/* id of the last final received */
	int resumes;
	double last_final_end;		/* its end, session seconds */
};

/* cmd-stream.c: queue the OPEN of a new session. */
int	stream_open_frame(struct conn *, const struct stream_opts *,
	    int is_stdin);

/* stream-feed.c */
double	stream_now(void);
/* Read the file (or nothing for standard input); -1 after a message. */
int	stream_load(struct stream_src *, const struct stream_opts *);
/*
 * Queue the audio that is due and END after it (at once when
 * interrupted); the poll timeout in ms, -1 for none.
 */
int	stream_feed(struct stream_run *, const struct stream_opts *,
	    int interrupted);
/* Queue raw audio from standard input; 0 at its end or when none came. */
int	stream_stdin_chunk(struct stream_run *, const struct stream_opts *);

/* stream-resume.c: the --resume flow */
void	stream_note_final(struct stream_run *, struct json_object *ev);
int	stream_resume_answer(struct stream_run *, const struct stream_opts *,
	    const char *type, struct json_object *ev);
int	stream_resume(struct stream_run *, const struct stream_opts *);

#endif

/*
 * The daemon's clients in the sotto CLI (stream, listen, status): the
 * connection (daemon-conn.c) and how events are printed (stream-output.c).
 */
#ifndef SOTTO_CLIENT_STREAM_H
#define SOTTO_CLIENT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_DAEMON	4	/* cannot connect, or the daemon failed us */
#define EXIT_UNDECODED	5	/* the daemon stopped before decoding it all */
#define CONN_SOCKET_DEFAULT	"/run/sotto/sottod.sock"

/* cmd-stream.c, cmd-listen.c, cmd-status.c */
int	cmd_stream(int argc, char **argv);
int	cmd_listen(int argc, char **argv);
int	cmd_status(int argc, char **argv);

/* daemon-conn.c: a non-blocking connection with frame buffers. */
struct conn {
	int		 fd;
	uint8_t		*in, *out;
	size_t		 in_len, in_cap, out_off, out_len, out_cap;
	size_t		 consumed;	/* of in, by the last event */
	int		 eof;
	int		 wclosed;	/* the daemon stopped reading */
	int		 answered;	/* an event came: sottod is there */
};

/* A monotonic clock, for deadlines and periods of the connection. */
long long conn_now_ms(void);
/* --socket, else $SOTTO_SOCKET, else CONN_SOCKET_DEFAULT. */
const char *conn_socket_path(const char *opt);
/* Connect and queue HELLO. Returns 0 or -1 with err. */
int	conn_open(struct conn *, const char *path, char *err, size_t errlen);
void	conn_close(struct conn *);
/*
 * What to say when the connection ends (or times out) before sottod
 * answered at all: under socket activation systemd takes the connection,
 * and a sottod that fails to start closes it without a word.
 */
const char *conn_no_answer_hint(void);
int	conn_queue(struct conn *, uint8_t type, const void *, size_t);
size_t	conn_pending(const struct conn *);
/*
 * Wait up to timeout_ms for the socket (and extra_fd, if >= 0, for
 * reading), write what is queued, read what arrived. Returns 1 when
 * extra_fd is readable, 0 otherwise, -1 with err on a connection error.
 */
int	conn_poll(struct conn *, int extra_fd, int timeout_ms, char *err,
	    size_t errlen);
/*
 * The next EVENT payload (NUL-terminated, valid until the next call) or
 * NULL; -1 in *ret_bad for a malformed frame.
 */
const char *conn_next_event(struct conn *, size_t *ret_len, int *ret_bad);

/*
 * stream-resume.c: every AUDIO frame sent since the stream began, the
 * payloads of the last 16 MiB kept (older ones NULL), each with its
 * audio time and length in seconds.
 */
struct stream_frame {
	void		*data;
	size_t		 len;
	double		 t, seconds;
};

struct stream_sent {
	struct stream_frame *f;
	size_t		 n, cap, first;	/* first: oldest payload kept */
	size_t		 bytes;
	double		 seconds;	/* audio sent in all */
};

int	stream_sent_add(struct stream_sent *, const void *, size_t,
	    double seconds);
void	stream_sent_free(struct stream_sent *);
/* Queue frames [from, n) again; the seconds of those no longer kept. */
double	stream_sent_resend(const struct stream_sent *, struct conn *,
	    size_t from);
/* The first frame that ends after audio time t. */
size_t	stream_sent_at(const struct stream_sent *, double t);
/*
 * Close c, connect again (retrying with backoff, 0.1 s doubling to 2 s,
 * for at most max_s seconds) and queue HELLO and the OPEN that resumes
 * session after final since and closed unit since_unit (session NULL:
 * HELLO only). 0, or -1 with err.
 */
int	stream_reconnect(struct conn *, const char *path, const char *session,
	    int64_t since, int64_t since_unit, int max_s, char *err,
	    size_t errlen);

/* stream-output.c */
enum stream_format {
	STREAM_TEXT,
	STREAM_JSONL,
	STREAM_SRT,
	STREAM_VTT,
};

struct stream_output {
	FILE		*f;
	enum stream_format format;
	int		 tty;		/* text: redraw the partial in place */
	int		 partial_shown;
	int		 units;		/* sottod sends caption units: text,
					   srt and vtt print those */
	int64_t		 last_unit;	/* the last closed unit printed */
	int		 cue;		/* srt/vtt cue number */
	int		 ended, failed;
	int		 werr;		/* errno of a failed write to f, or 0 */
	double		 undecoded_s;	/* from "end": audio never decoded */
	/*
	 * Seconds added to every start and end printed: where the session's
	 * audio begins in the input (not 0 for a new session opened after
	 * sottod lost the first, so times stay on the input's clock).
	 */
	double		 time_offset;
	char		 session[64];
	char		 speaker[16];	/* text: the last line's, "" none */
};

int	stream_output_format(const char *, enum stream_format *);
void	stream_output_init(struct stream_output *, FILE *, enum stream_format);
/*
 * -o PATH: the file the output goes to (created or truncated), or NULL
 * with the reason printed as cmd's; "-" is standard output.
 */
FILE	*stream_output_open(const char *path, const char *cmd);
/*
 * Print one event (json, len bytes). Sets ->ended on "end" (and
 * ->undecoded_s, with a message on stderr, when the daemon says part of
 * the audio was never decoded), ->failed on an error event (its message
 * goes to stderr), ->werr when the output could not be written (the
 * caller says so: the transcript is lost).
 */
void	stream_output_event(struct stream_output *, const char *json,
	    size_t len);
void	stream_output_done(struct stream_output *);
/* Take the partial off the terminal line, before a message on stderr. */
void	stream_output_clear(struct stream_output *);

#endif

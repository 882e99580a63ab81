/*
 * sottod: shared structures and every prototype of the daemon core, under
 * a heading per file. Everything here runs on the loop thread except
 * worker.c's compute thread (see its design note).
 */
#ifndef SOTTOD_H
#define SOTTOD_H

#include <sys/queue.h>

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "proto.h"
#include "sotto.h"

#ifndef SOTTO_VERSION
#define SOTTO_VERSION	"0"
#endif
#define SOTTOD_SERVER_NAME	"sottod/" SOTTO_VERSION

struct event;
struct event_base;
struct bufferevent;
struct peer;
struct session;
struct worker_result;

/* The daemon: one per process, set up by sottod.c. */
struct sottod {
	struct config		 cfg;
	struct event_base	*base;
	struct sotto_model	*model;		/* current (models.c owns it) */
	char			 model_name[PROTO_NAME_MAX];
	int			 multilingual;
	double			 started;	/* monotonic seconds */
	int			 draining;	/* SIGTERM: 1 finishing streams,
						   2 ending them (grace over) */
	int			 listen_fd;
	int			 own_socket;	/* created by us, not systemd */
};
extern struct sottod sottod;

/* Totals since the start, for GET /metrics (loop thread). */
struct sottod_stats {
	double		 audio_in_s;	/* audio received: streams, files */
	double		 audio_done_s;	/* audio the engine has decoded */
	uint64_t	 sessions;	/* streams opened */
	uint64_t	 files;		/* files transcribed */
	double		 files_compute_s;	/* compute time they took */
};
extern struct sottod_stats sottod_stats;	/* session.c */

double	sottod_now(void);
void	sottod_reload(void);
void	sottod_load_model(void);	/* reload.c: at start, or exit */

/*
 * check.c: --check-config's model checks. cfg as read from path, where
 * lines says each key was (both NULL: no file); model_flag: the model
 * came from --model. 0, or -1 with err.
 */
int	check_engine(const struct config *cfg, const char *path,
	    const struct config_lines *lines, int model_flag, char *err,
	    size_t errlen);
/*
 * The same for [http] listen and [wyoming] listen (or --http, --wyoming:
 * the flags): an HTTP address off loopback needs [http] token; the two
 * must not share a port.
 */
int	check_listeners(const struct config *cfg, const char *path,
	    const struct config_lines *lines, int http_flag, int wyoming_flag,
	    char *err, size_t errlen);

/* models.c: the current model and those older sessions still use */
struct model_ref;
int	models_set_current(struct sotto_model *);
struct model_ref *models_take(void);
const struct sotto_model *models_model(const struct model_ref *);
int	models_is_current(const struct model_ref *);
void	models_drop(struct model_ref *);
void	models_free_all(void);

/* reload.c: SIGHUP loads a replaced or renamed model on a thread */
int	reload_init(char *err, size_t errlen);
int	reload_model(void);
void	reload_stop(void);

/* vad.c: [engine] vad; the model is shared by every stream */
int	vad_start(char *err, size_t errlen);	/* at start */
void	vad_reload(void);			/* after a SIGHUP */
const struct sotto_vad *vad_for(int live);	/* NULL: no VAD */
void	vad_free(void);
/* --check-config: cfg's VAD model loads (when vad is not off). */
int	vad_check(const struct config *, char *err, size_t errlen);

/* wyoming.c: the Wyoming front door (TCP, off unless configured) */
int	wyoming_start(const char *listen, int fd, char *err, size_t errlen);
void	wyoming_drain(void);
void	wyoming_stop(void);

/* mem.c */
void	mem_init(void);
void	mem_idle(void);		/* any thread */

/* server.c */
int	server_start(int listen_fd, char *err, size_t errlen);
int	server_full(void);	/* no more connections of any kind */
void	server_stop(void);
void	server_drain_check(void);
int	server_clients(void);

/* peer.c */
enum peer_state {
	PEER_NEW,		/* waiting for HELLO */
	PEER_READY,		/* may OPEN, SUBSCRIBE or ask STATUS */
	PEER_STREAMING,		/* owns an open session: AUDIO, END */
	PEER_ENDING,		/* sent END; waiting for the end event */
	PEER_SUBSCRIBED,	/* receives a shared source's events */
};

enum peer_event {
	PEER_EVENT_PARTIAL,	/* dropped when the peer lags */
	PEER_EVENT_FINAL,	/* never dropped; over the cap: disconnect */
	PEER_EVENT_CONTROL,	/* as a final */
	PEER_EVENT_REPLAY,	/* a kept final resent: never over the cap */
};

/*
 * A front door other than the sottod protocol (wyoming.c, ws.c) gives its
 * peers ops: it reads their input itself, writes each session event (the
 * sottod protocol's JSON, as peer_send got it) in its own format, is
 * told when the session ended, and may add last words when the peer
 * starts closing. NULL ops: the sottod protocol.
 */
struct peer_ops {
	const char *name;			/* in status: "ws", "wyoming" */
	void	(*read)(struct peer *);
	void	(*write)(struct peer *, const char *json);
	void	(*ended)(struct peer *);	/* instead of peer.c's */
	void	(*free)(struct peer *);		/* p->front */
	void	(*closing)(struct peer *);	/* may be NULL */
};

struct peer {
	uint64_t		 id;
	long			 uid;		/* SO_PEERCRED; -1 unknown */
	struct bufferevent	*bev;
	const struct peer_ops	*ops;		/* NULL: sottod protocol */
	void			*front;		/* the front door's state */
	int			 flags;
#define PEER_CLOSING	0x1	/* flush the output, then free */
#define PEER_DEAD	0x2	/* freed once the last reference goes */
#define PEER_PAUSED	0x4	/* reading stopped: its session lags */
#define PEER_EOF	0x8	/* half-closed after END */
#define PEER_BUSY	0x10	/* no session, but a reply is coming */
#define PEER_NO_RESUME	0x20	/* its sessions end with the connection */
#define PEER_LINGER	0x40	/* closing: our side is shut, input dropped */
	size_t			 lingered;	/* bytes dropped so */
	enum peer_state		 state;
	struct event		*timer;		/* handshake or idle timeout */
	int			 timeout_s;	/* what timer was set to */
	struct session		*session;	/* streamed or subscribed */
	uint64_t		 dropped_partials;
	TAILQ_ENTRY(peer)	 entry;		/* all peers */
	TAILQ_ENTRY(peer)	 sub_entry;	/* session->subs */
};
TAILQ_HEAD(peer_list, peer);
extern struct peer_list peers;

struct peer *peer_new(int fd, long uid, const struct peer_ops *);
void	peer_dispatch(struct peer *, const struct proto_frame *);
void	peer_send(struct peer *, enum peer_event, const char *json);
void	peer_fail(struct peer *, enum proto_error, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	peer_close(struct peer *);
void	peer_close_after_flush(struct peer *);
void	peer_pause(struct peer *, int);
void	peer_drain(struct peer *);
void	peer_timer(struct peer *);
void	peer_session_ended(struct peer *);
uint64_t peer_dropped_partials(void);

/* session.c */
#define SESSION_HISTORY_MAX	256	/* finals kept for resume */

struct session;
struct worker_result;
TAILQ_HEAD(session_list, session);
extern struct session_list sessions;

struct session *session_open(struct peer *, const struct msg_open *,
	    char *msg);
struct session *session_find(const char *name);
int	session_count(void);
/*
 * Every session and file job for a status event, the microphone's
 * included (ret owned by the caller); their number, or -1 when out of
 * memory.
 */
struct proto_session_info;
int	session_list(struct proto_session_info **ret);
void	session_attach(struct session *, struct peer *, int64_t since);
void	session_detach(struct session *, struct peer *);
void	session_audio(struct session *, const uint8_t *, size_t, char *msg,
	    enum proto_error *ret_error);
void	session_end(struct session *);
void	session_result(struct worker_result *);
void	session_drain_all(void);
void	session_abort_all(void);
int	session_busy(void);
double	session_max_lag(void);
const char *session_name(const struct session *);
int	session_done(const struct session *);
int	session_in_use(const struct session *);
int64_t	session_last_final(const struct session *);
void	session_free_all(void);

struct session *session_shared_new(const char *name, int rate,
	    int channels, const char *language);
void	session_shared_audio(struct session *, const int16_t *, size_t frames);
void	session_subscribe(struct session *, struct peer *, int64_t since);
double	session_overload_s(const struct session *);

/* session-mic.c: the microphone as a shared session "mic" */
int	session_mic_start(char *err, size_t errlen);
void	session_mic_stop(void);
int	session_mic_state(void);		/* -1 off, 0 down, 1 up */
struct session *session_mic(void);

/* source-client.c: client audio to 16 kHz mono float */
struct source_client;
enum source_quality {
	SOURCE_QUALITY_LIVE,	/* the fastest resampler: sessions */
	SOURCE_QUALITY_FILE,	/* `sotto transcribe`'s (common/audio.c) */
};
struct source_client *source_client_new(enum proto_format, int rate,
	    int channels, char *msg);
struct source_client *source_client_new_quality(enum proto_format,
	    int rate, int channels, enum source_quality, char *msg);
void	source_client_free(struct source_client *);
/*
 * Decode len bytes; *ret (owned by the source, valid until the next call)
 * holds *ret_n samples. Returns PROTO_OK or an error with msg.
 */
enum proto_error source_client_decode(struct source_client *,
	    const uint8_t *, size_t, const float **ret, size_t *ret_n,
	    char *msg);
/* The resampler's tail at the end of the stream. */
enum proto_error source_client_flush(struct source_client *,
	    const float **ret, size_t *ret_n, char *msg);

/* web.c: the live captions page at / and its WebSocket at /ws */
void	web_start(void);

/* ws.c: WebSocket clients on the HTTP listener */
struct evhttp_request;
void	ws_request(struct evhttp_request *);	/* GET /ws */

/* worker.c */
enum worker_kind {
	WORKER_STEP,		/* one step, if one is due */
	WORKER_FINISH,		/* one step of the rest, or the end */
	WORKER_FREE,
	WORKER_FILE,		/* a whole file: worker-file.c */
};

struct worker_segment {
	double			 start, end;
	char			*text;
	struct sotto_word	*words;		/* owned; NULL: none asked */
	int			 n_words;
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
int	worker_stream_push(struct worker_stream *, const float *, size_t);
size_t	worker_stream_pending(struct worker_stream *);
int	worker_queue(struct worker_stream *, enum worker_kind);
struct worker_result *worker_next_result(void);
void	worker_result_free(struct worker_result *);
double	worker_step_seconds(void);
int	worker_start(struct event *wake, char *err, size_t errlen);
/* Shutdown: no more engine work; jobs return at once, aborted. */
void	worker_abort(void);
void	worker_stop(void);
int	worker_alive(void);
int	worker_queue_depth(void);

/* worker-file.c: whole files transcribed on the compute thread */
struct worker_file_params {
	char		 language[PROTO_LANGUAGE_MAX];	/* "": detect */
	enum sotto_task	 task;
	int		 beam_size;
	float		 temperature;	/* the first; fallback by 0.2 to 1 */
	const char	*prompt;	/* NULL or copied */
	int		 word_timestamps;	/* segments get their words */
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
 * libsndfile reads (the job owns data from the call on, even when this
 * fails), on the current model. done(f, arg) runs on the loop when it
 * is over: f->error, f->err, f->res; the callee frees f with
 * worker_file_free. NULL with msg when out of memory.
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
void	worker_file_done(struct worker_file *);		/* server.c */

#endif

/*
 * A session's private parts, shared by session.c (sessions, their peers,
 * audio in, resume) and session-result.c (worker results out as events,
 * the end of a stream, shutdown). Doors see session.h; the rest of the
 * core core-private.h.
 */
#ifndef SOTTOD_SESSION_PRIVATE_H
#define SOTTOD_SESSION_PRIVATE_H

#include "caption.h"
#include "core-private.h"
#include "peer.h"
#include "session.h"

#define SESSION_LAG_HIGH_S	8.0
#define SESSION_LAG_LOW_S	4.0
#define SESSION_LAG_MAX_S	30.0

struct session {
	uint64_t		 id;
	char			 name[PROTO_SESSION_MAX];
	int			 flags;
#define SESSION_SHARED	0x1	/* no owner; subscribers */
#define SESSION_ENDING	0x2	/* END: FINISH jobs until the end */
#define SESSION_DONE	0x4	/* finished or failed: finals only */
#define SESSION_NO_RESUME 0x8	/* its owner cannot resume: no grace */
#define SESSION_FINISHED 0x10	/* everything received was decoded */
#define SESSION_ABORTED	0x20	/* shutdown: end at the next result */
	struct peer		*owner;
	struct peer_list	 subs;
	struct source_client	*src;
	struct worker_stream	*ws;
	int			 in_flight, due;
	size_t			 step_samples;
	size_t			 idle_step_samples; /* 0: none */
	int			 answer_first;	/* session_answer_first() */
	uint64_t		 received;	/* 16 kHz samples */
	uint64_t		 audio_frames;	/* AUDIO frames taken */
	double			 audio_time;	/* what the engine holds */
	double			 decoded_s;	/* its words are all final */
	double			 final_end;	/* end of the last final */
	double			 undecoded_s;	/* at the end: never decoded */
	double			 compute_s;	/* its steps' compute time */
	double			 last_step_s;	/* its last step's, 0: none yet */
	const char		*source;	/* status: socket, ws, ... */
	char			*last_partial;
	char			*language_ev;	/* the last language event */
	char			 language[8];	/* its language, settled */
	int			 language_settled;
	char			*hist[SESSION_HISTORY_MAX];
	int64_t			 next_final;
	struct caption		 caption;	/* its caption units */
	char			*unit_hist[SESSION_HISTORY_MAX];  /* closed */
	char			*unit_open;	/* the open unit's last event */
	double			 overload_s, dropping_s;
	struct event		*expire;
	TAILQ_ENTRY(session)	 entry;
};

TAILQ_HEAD(session_list, session);
extern struct session_list sessions;

/* session.c */
struct session *session_find_id(uint64_t id);
void	session_free(struct session *);
/* Seconds of its audio received and not yet decoded (0 once done). */
double	session_lag(const struct session *);
void	session_expire_arm(struct session *);
void	session_broadcast(struct session *, enum peer_event, const char *);
void	session_flow(struct session *);
int	session_push(struct session *, const float *, size_t);

/* session-result.c */
void	session_kick(struct session *);
char	*session_end_event(const struct session *);
void	session_unit(void *session, const struct caption_unit *);

#endif

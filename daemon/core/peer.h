/*
 * A client connection of any front door (peer.c): its socket as a
 * bufferevent, its state in the sottod protocol, the session it streams
 * or listens to, bounds on what it has not read, timeouts, and a close
 * that never resets what it still has to read. The door gives each of
 * its peers ops: how input is read and how an event is written in the
 * door's own format. The sottod protocol's frames, from any door, go
 * through peer_dispatch (peer-dispatch.c).
 */
#ifndef SOTTOD_PEER_H
#define SOTTOD_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "tailq.h"

#define PEER_ADDR_MAX	48	/* an IPv6 address as text, and a NUL */

struct bufferevent;
struct event;
struct session;
struct sotto_speaker_track;

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

struct peer;

/*
 * A door's side of its peers: it reads their input itself, writes each
 * session event (the sottod protocol's JSON, as peer_send got it) in its
 * own format, and may be told more.
 */
struct peer_ops {
	const char *name;			/* in status: "socket", "ws" */
	/* What a new peer must send first: "HELLO"; NULL: it need not. */
	const char *greeting;
	void	(*read)(struct peer *);
	void	(*write)(struct peer *, const char *json);
	/* The session ended; NULL: peer.c's default (back to READY). */
	void	(*ended)(struct peer *);
	void	(*free)(struct peer *);		/* p->front; may be NULL */
	/* The peer starts closing: its last words (may be NULL). */
	void	(*closing)(struct peer *);
	/*
	 * SIGTERM: take what the client sent before it (may be NULL: peer.c
	 * stops reading at once).
	 */
	void	(*drain)(struct peer *);
	/*
	 * After the last event is written: shut our side and read the
	 * client's until it closes (a TCP client that may still be sending:
	 * closing with input unread resets the connection, which can lose
	 * the last event), instead of closing at once.
	 */
	int	 linger;
};

struct peer {
	uint64_t		 id;
	long			 uid;		/* SO_PEERCRED; -1 unknown */
	char			 addr[PEER_ADDR_MAX];	/* TCP: the
						   client's address; "" */
	struct bufferevent	*bev;
	const struct peer_ops	*ops;
	void			*front;		/* the door's state */
	int			 flags;
#define PEER_CLOSING	0x1	/* flush the output, then free */
#define PEER_DEAD	0x2	/* freed once the last reference goes */
#define PEER_PAUSED	0x4	/* reading stopped: its session lags */
#define PEER_EOF	0x8	/* half-closed after END */
#define PEER_BUSY	0x10	/* no session, but a reply is coming */
#define PEER_NO_RESUME	0x20	/* its sessions end with the connection */
#define PEER_LINGER	0x40	/* closing: our side is shut, input dropped */
#define PEER_KEEP_SPEAKERS 0x80	/* its next session's speaker labels go
				   on from its last one's (track) */
	size_t			 lingered;	/* bytes dropped so */
	enum peer_state		 state;
	struct event		*timer;		/* handshake or idle timeout */
	int			 timeout_s;	/* what timer was set to */
	struct session		*session;	/* streamed or subscribed */
	/* PEER_KEEP_SPEAKERS: its ended session's labels, owned until the
	   next session with labels takes them; their audio lasted track_t0 */
	struct sotto_speaker_track *track;
	double			 track_t0;
	uint64_t		 dropped_partials;
	TAILQ_ENTRY(peer)	 entry;		/* all peers */
	TAILQ_ENTRY(peer)	 sub_entry;	/* session->subs */
};
TAILQ_HEAD(peer_list, peer);

/*
 * A peer for an accepted fd (which it owns from now on), or NULL; a TCP
 * peer's address is read from the socket.
 */
struct peer *peer_new(int fd, long uid, const struct peer_ops *);
/* The client address of a TCP socket as text into addr; "" otherwise. */
void	peer_addr(int fd, char addr[PEER_ADDR_MAX]);
/* The peer of id, or NULL when it is gone. */
struct peer *peer_find(uint64_t id);
/*
 * Connections open now: all of them; those of one door (its ops); of a
 * door, those of uid, or of the client address addr (TCP).
 */
int	peer_count(void);
int	peer_count_door(const struct peer_ops *);
int	peer_count_uid(const struct peer_ops *, long uid);
int	peer_count_addr(const struct peer_ops *, const char *addr);
int	peer_count_subscribed(void);
uint64_t peer_dropped_partials(void);

void	peer_dispatch(struct peer *, const struct proto_frame *);
void	peer_send(struct peer *, enum peer_event, const char *json);
void	peer_fail(struct peer *, enum proto_error, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	peer_close(struct peer *);
void	peer_close_after_flush(struct peer *);
void	peer_pause(struct peer *, int);
/*
 * SIGTERM (a door's drain): move all the peer's socket holds now into its
 * bufferevent's input, even while reading is paused, so the door can
 * handle what the client wrote before the signal. Bytes moved.
 */
size_t	peer_take_unread(struct peer *);
void	peer_timer(struct peer *);
void	peer_session_ended(struct peer *);

/* Shutdown (server.c): every peer drained, or closed. */
void	peer_drain_all(void);
void	peer_close_all(void);

#endif

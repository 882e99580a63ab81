/*
 * The Realtime door's own parts (realtime.c, realtime-out.c,
 * realtime-turn.c): one connection's state, its items, and the calls
 * between the files. Seen by daemon/realtime/ only.
 */
#ifndef SOTTOD_REALTIME_PRIVATE_H
#define SOTTOD_REALTIME_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "core.h"
#include "peer.h"
#include "realtime.h"
#include "session.h"
#include "source-client.h"
#include "tailq.h"
#include "ws-upgrade.h"

#define RT_ID_MAX	40

/*
 * An item: one piece of the input audio buffer, committed by the client
 * or by the VAD, transcribed by a live session of its own. Only the
 * first item of a connection has a session; the audio of those behind
 * it waits in pcm (16 kHz floats) until the one before has ended.
 */
struct rt_item {
	char			 id[RT_ID_MAX];
	float			*pcm;		/* waiting for its session */
	size_t			 n_pcm, cap_pcm;
	size_t			 samples;	/* all it was given */
	int			 open;		/* its session is open */
	int			 committed;
	char			*text;		/* the finals so far */
	int			 n_segments;	/* segment events sent */
	TAILQ_ENTRY(rt_item)	 entry;
};
TAILQ_HEAD(rt_items, rt_item);

struct rt_conn {
	struct ws_peer		 ws;		/* first: ws-upgrade.h */
	struct rt_config	 cfg;
	char			 id[RT_ID_MAX];	/* the session's, "sess_..." */
	uint64_t		 n_events, n_items;
	char			 last_item[RT_ID_MAX];	/* previous_item_id */
	struct rt_items		 items;		/* oldest (decoding) first */
	struct rt_item		*filling;	/* taking audio; NULL: none */
	size_t			 waiting;	/* samples in items' pcm */
	enum proto_error	 err;		/* why rt_audio failed */
	/* audio in */
	struct source_client	*src;		/* the client's format */
	enum rt_format		 src_format;
	int16_t			*g711;		/* G.711 as PCM */
	size_t			 cap_g711;
	uint64_t		 heard;		/* 16 kHz samples so far */
	/* server_vad */
	struct sotto_vad_state	*vad;
	float			 chunk[SOTTO_VAD_CHUNK];
	size_t			 n_chunk;
	float			*ring;		/* prefix padding */
	size_t			 cap_ring, n_ring;
	int			 speaking;
	size_t			 silence;	/* samples since speech */
};

/* realtime-out.c: server events */
struct json_object *rt_event(const char *type);
void	rt_send(struct rt_conn *, struct json_object *);
void	rt_send_session(struct rt_conn *, int updated);
void	rt_send_error(struct rt_conn *, const char *type, const char *code,
	    const char *client_event_id, const char *msg);
void	rt_send_item(struct rt_conn *, const char *type, const char *item_id,
	    const char *key, struct json_object *val);
void	rt_send_committed(struct rt_conn *, const struct rt_item *);
void	rt_send_completed(struct rt_conn *, const struct rt_item *);

/* realtime-turn.c: audio, turns, items */
int	rt_audio(struct rt_conn *, const uint8_t *, size_t, char *msg);
int	rt_commit(struct rt_conn *, char *msg);
void	rt_clear(struct rt_conn *);
int	rt_configure(struct rt_conn *, const struct rt_config *, char *msg);
void	rt_item_free(struct rt_conn *, struct rt_item *);
void	rt_free_items(struct rt_conn *);
/* The first item is done: the next one's session opens, if it can. */
void	rt_next(struct rt_conn *);

/* realtime-item.c: the first item's session's events */
void	rt_session_event(struct rt_conn *, const char *json);
void	rt_session_ended(struct rt_conn *);

#endif

/*
 * The Wyoming front door (Home Assistant; docs/protocol.md): wyoming.c
 * (the listener, events in and out), wyoming-utterance.c (an utterance's
 * audio and answer), wyoming-proto.c (the events' encoding).
 */
#ifndef SOTTOD_WYOMING_H
#define SOTTOD_WYOMING_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "peer.h"
#include "session.h"
#include "source-client.h"
#include "worker.h"
#include "wyoming-proto.h"

/* A connection's state (peer->front). */
struct wy_conn {
	int			 flags;
#define WY_OPEN		0x1	/* an utterance: its session is open */
#define WY_STOPPED	0x2	/* audio-stop: its transcript is computed */
#define WY_TEXT_DONE	0x4	/* the transcript is in */
#define WY_LIVE		0x8	/* answered by the live session's end */
	char			 language[PROTO_LANGUAGE_MAX]; /* transcribe */
	struct source_client	*src;		/* the current format's */
	int			 rate, width, channels;
	float			*audio;		/* the utterance, 16 kHz */
	size_t			 n_audio, cap_audio;
	float			*scratch;	/* samples of other widths */
	size_t			 cap_scratch;
	char			*chunks;	/* the live finals' text */
	size_t			 chunked;	/* of it, the bytes sent in
						   transcript-chunks */
	char			*text;		/* the transcript */
	char			 text_language[PROTO_LANGUAGE_MAX]; /* its own,
						   or the session's detected */
	char			*line;		/* header of the event read */
	size_t			 line_len, scanned;
	struct wy_header	 hdr;
};

/* wyoming.c */
/*
 * Serve on fd, a listening TCP socket from systemd, or (fd -1) listen on
 * addr (ADDRESS:PORT, listen-addr.h; "" for none). Registers the door.
 * 0, or -1 with err.
 */
int	wyoming_start(const char *addr, int fd, char *err, size_t errlen);

/* Queue an event line (consumed; NULL: out of memory, closes p). */
void	wy_send_raw(struct peer *, char *line);
/* The same, unless the client does not read what it has been sent. */
void	wy_send(struct peer *, char *line);
/* An event with one string field, or none when key is NULL. */
void	wy_send_text(struct peer *, const char *type, const char *key,
	    const char *value);
/* The Wyoming connection of peer id, or NULL. */
struct peer *wy_find(uint64_t id);

/* wyoming-utterance.c; each may fail p (peer_fail) and then returns -1 */
int	wy_open(struct peer *, struct wy_conn *, const struct wy_event *);
void	wy_chunk(struct peer *, struct wy_conn *, const struct wy_event *,
	    const uint8_t *payload, size_t len);
void	wy_audio_stop(struct peer *, struct wy_conn *);
/* The audio is over: finish the session, or transcribe the utterance. */
void	wy_stop(struct peer *, struct wy_conn *);
/* answer = live: the session is over; its finals answer. */
void	wy_answer_live(struct peer *, struct wy_conn *);
/* Answer once the transcript is in. */
void	wy_finish(struct peer *);
/* Forget the utterance. */
void	wy_reset(struct wy_conn *);
/* The finals' text not yet sent (audio-stop), as one last chunk. */
void	wy_send_rest(struct peer *, struct wy_conn *);
/* Keep a final's text, as sent in a transcript-chunk. */
void	wy_keep_chunk(struct peer *, struct wy_conn *, const char *text);

#endif

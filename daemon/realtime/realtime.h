/*
 * The OpenAI Realtime door, transcription sessions only: a WebSocket at
 * /v1/realtime?intent=transcription on the HTTP listener. The client
 * sends JSON events (session.update or the beta transcription_session.
 * update, input_audio_buffer.append with base64 audio, .commit, .clear);
 * each committed piece of audio (an item) is one live session, and its
 * finals go out as append-only transcription deltas, its end as the
 * item's completed transcript. docs/http.md has the wire format.
 *
 * realtime.c: the door (upgrade, WebSocket, peer ops)
 * realtime-msg.c: client events parsed, base64 decoded (no daemon state:
 *   tests/fuzz/fuzz-realtime.c drives it)
 * realtime-out.c: the server events' JSON
 * realtime-turn.c: audio in, turn detection, items and their sessions
 * realtime-item.c: what an item's session says, as transcription events
 */
#ifndef SOTTOD_REALTIME_H
#define SOTTOD_REALTIME_H

#include <stddef.h>
#include <stdint.h>

#define RT_LANGUAGE_MAX		16
#define RT_MODEL_MAX		64
#define RT_PROMPT_MAX		1024	/* as the socket's OPEN prompt */
#define RT_EVENT_ID_MAX		64
#define RT_MSG_MAX		256

/* Add /v1/realtime to the HTTP listener, when there is one. */
int	realtime_start(char *err, size_t errlen);

/* The audio formats a client may name, as bytes per sample and rate. */
enum rt_format {
	RT_FORMAT_PCM16,	/* s16le mono at 24 kHz */
	RT_FORMAT_PCMU,		/* G.711 mu-law at 8 kHz */
	RT_FORMAT_PCMA,		/* G.711 A-law at 8 kHz */
};

/* A transcription session's settings, as the client last updated them. */
struct rt_config {
	int		 beta;		/* transcription_session.* names */
	enum rt_format	 format;
	int		 server_vad;	/* turn detection; 0: the client commits */
	float		 threshold;	/* speech probability, 0 to 1 */
	int		 prefix_padding_ms;
	int		 silence_duration_ms;
	char		 model[RT_MODEL_MAX];	/* echoed; the loaded one runs */
	int		 diarize;	/* model gpt-4o-transcribe-diarize:
					   speaker labels (segment events) */
	char		 language[RT_LANGUAGE_MAX];	/* "": the config's */
	char		 prompt[RT_PROMPT_MAX];	/* vocabulary; "" none */
};

enum rt_msg_type {
	RT_MSG_UPDATE,		/* session.update, transcription_session.update */
	RT_MSG_APPEND,		/* input_audio_buffer.append */
	RT_MSG_COMMIT,
	RT_MSG_CLEAR,
};

struct rt_msg {
	enum rt_msg_type type;
	char		 event_id[RT_EVENT_ID_MAX];	/* the client's, or "" */
	struct rt_config cfg;		/* UPDATE: the settings after it */
	uint8_t		*audio;		/* APPEND: decoded, malloc'd */
	size_t		 n_audio;
};

/* Defaults of a new session: pcm16, server_vad 0.5 / 300 / 500 ms. */
void	rt_config_init(struct rt_config *, int server_vad);

/*
 * One client event (a WebSocket text message) into ret, an update applied
 * onto cur. 0, or -1 with msg (RT_MSG_MAX bytes), code (an OpenAI error
 * code) and ret->event_id when the event had one. Free ret->audio.
 */
int	rt_msg_parse(const uint8_t *, size_t, const struct rt_config *cur,
	    struct rt_msg *ret, const char **code, char *msg);

/*
 * Standard base64 (RFC 4648, padding optional, no white space) of len
 * characters into out (room for len / 4 * 3 + 3 bytes): the byte count,
 * or -1 for a character or length that is not base64.
 */
long	rt_base64_decode(const char *, size_t len, uint8_t *out);

#endif

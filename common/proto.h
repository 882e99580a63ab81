/*
 * The sottod wire protocol, version 1 (docs/protocol.md).
 *
 * A frame is a u32 little-endian length L, a u8 type and L - 1 bytes of
 * payload. Control payloads and server events are one JSON object; AUDIO
 * payloads are raw bytes. Everything here is a pure function over bytes:
 * no I/O, no globals, safe on any input (tests/fuzz/fuzz-proto.c).
 */
#ifndef SOTTO_PROTO_H
#define SOTTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define SOTTO_PROTO_VERSION		1
#define PROTO_HEADER_BYTES		5	/* u32 length + u8 type */
#define PROTO_MAX_FRAME_BYTES		(1024 * 1024)	/* default payload cap */
#define PROTO_MSG_MAX			256	/* error message buffers */
#define PROTO_SESSION_MAX		32	/* session id, with its NUL */
#define PROTO_LANGUAGE_MAX		16
#define PROTO_NAME_MAX			64
#define PROTO_PROMPT_MAX		1024	/* vocabulary, with its NUL */
#define PROTO_RATE_MIN			1000
#define PROTO_RATE_MAX			384000
#define PROTO_CHANNELS_MAX		32
#define PROTO_SINCE_NONE		(-2)	/* "since" absent */

/* Frame types: client to server below 0x80, server to client from 0x80. */
enum msg_type {
	MSG_HELLO = 0x01,
	MSG_OPEN = 0x02,
	MSG_SUBSCRIBE = 0x03,
	MSG_AUDIO = 0x04,
	MSG_END = 0x05,
	MSG_STATUS = 0x06,
	MSG_EVENT = 0x80,
};

/* Error event codes; proto_error_name() gives the wire string. */
enum proto_error {
	PROTO_OK = 0,
	PROTO_E_BAD_FRAME,	/* length 0, unknown type, bad audio framing */
	PROTO_E_TOO_LARGE,	/* payload over the server's frame cap */
	PROTO_E_BAD_JSON,	/* not one JSON object, or wrong field types */
	PROTO_E_BAD_VALUE,	/* well-formed, but a value is out of range */
	PROTO_E_BAD_ORDER,	/* a frame the connection's state forbids */
	PROTO_E_VERSION,	/* unsupported protocol version */
	PROTO_E_BUSY,		/* session limit reached */
	PROTO_E_NO_SESSION,	/* resume: no such session (expired?) */
	PROTO_E_UNAVAILABLE,	/* e.g. the microphone is not enabled */
	PROTO_E_OVERLOAD,	/* the engine fell behind a shared source */
	PROTO_E_SLOW_READER,	/* the client does not read its events */
	PROTO_E_INTERNAL,	/* the server failed; not the client's fault */
	PROTO_E_SHUTDOWN,	/* the server is stopping */
	PROTO_E_TOO_MANY,	/* over max_connections_per_uid */
	PROTO_E_TIMEOUT,	/* no HELLO, or nothing sent, in time */
	PROTO_E_TOO_FAST,	/* WebSocket: over the message rate cap */
};

enum proto_format {
	PROTO_FORMAT_S16LE = 0,
	PROTO_FORMAT_F32LE,
	PROTO_FORMAT_OPUS,
	PROTO_FORMAT_MULAW,	/* G.711, a byte a sample (telephony) */
	PROTO_FORMAT_ALAW,
};

enum proto_task {
	PROTO_TASK_TRANSCRIBE = 0,
	PROTO_TASK_TRANSLATE,
};

/* One frame, pointing into the caller's buffer. */
struct proto_frame {
	uint8_t		 type;
	const uint8_t	*payload;
	size_t		 len;		/* payload bytes (L - 1) */
};

struct msg_hello {
	int		 protocol;
	char		 client[PROTO_NAME_MAX];	/* "" if absent */
};

struct msg_open {
	enum proto_format format;
	int		 rate;			/* default 16000 */
	int		 channels;		/* default 1 */
	char		 language[PROTO_LANGUAGE_MAX];	/* "" = server's */
	enum proto_task	 task;
	char		 session[PROTO_SESSION_MAX];	/* resume; "" = new */
	int64_t		 since;			/* last final id seen; -1 */
	int64_t		 since_unit;		/* last closed unit seen;
						   absent: PROTO_SINCE_NONE */
	int		 live;			/* audio comes as it is
						   spoken; default 0 */
	int		 word_timestamps;	/* finals carry words;
						   default 0 */
	char		 prompt[PROTO_PROMPT_MAX];	/* vocabulary (names,
						   terms); "" none */
	int		 diarize;		/* finals carry speaker
						   labels; default 0 */
};

struct msg_subscribe {
	char		 source[PROTO_NAME_MAX];
	int64_t		 since;			/* replay finals after it, -1
						   all kept; absent: none */
	int64_t		 since_unit;		/* the same for closed caption
						   units */
};

/*
 * Find the frame at the start of buf. Returns 1 with *ret and *ret_used
 * (bytes the frame takes) set, 0 when more bytes are needed, or -1 with
 * *ret_error and msg (PROTO_MSG_MAX bytes) when the header is invalid:
 * length 0, a payload over max_payload bytes, or an unknown type. The
 * header is checked as soon as its 5 bytes are there.
 */
int	proto_frame_parse(const uint8_t *buf, size_t len, size_t max_payload,
	    struct proto_frame *ret, size_t *ret_used,
	    enum proto_error *ret_error, char *msg);

/* Write the 5-byte header of a frame with payload_len bytes. */
void	proto_frame_header(uint8_t *hdr, uint8_t type, size_t payload_len);

struct json_object;

/*
 * p[len] as exactly one JSON object (whitespace around it allowed), parsed
 * strictly (valid UTF-8, no NUL byte) and nested at most depth deep: the
 * one reader of JSON from clients (sotto, Wyoming and WebSocket frames).
 * Returns the object, which the caller puts, or NULL with what is wrong
 * in why (PROTO_MSG_MAX bytes, or NULL), e.g. "not a JSON object" or
 * "bad JSON: truncated", for the caller to put in its own words.
 */
struct json_object *proto_json_object(const void *p, size_t len, int depth,
	    char *why);

/* Whether type is one of enum msg_type. */
int	proto_type_known(uint8_t type);
const char *proto_type_name(uint8_t type);

/*
 * Decode a control payload. Each returns PROTO_OK or an error code with a
 * message in msg (PROTO_MSG_MAX bytes). Unknown fields are ignored (a
 * later minor version may add some); a known field of the wrong type is
 * PROTO_E_BAD_JSON, an out-of-range value PROTO_E_BAD_VALUE. HELLO does
 * not judge the version: the caller compares protocol with its own.
 */
enum proto_error proto_parse_hello(const uint8_t *, size_t,
	    struct msg_hello *, char *msg);
enum proto_error proto_parse_open(const uint8_t *, size_t,
	    struct msg_open *, char *msg);
enum proto_error proto_parse_subscribe(const uint8_t *, size_t,
	    struct msg_subscribe *, char *msg);
/* STATUS and END take an empty payload or an empty-or-any JSON object. */
enum proto_error proto_parse_empty(const uint8_t *, size_t, char *msg);

const char *proto_error_name(enum proto_error);
/*
 * The code of an error event as the daemon writes them (a JSON object
 * that starts {"type":"error","code":"NAME"), PROTO_OK for any other
 * event; an unknown name is PROTO_E_INTERNAL.
 */
enum proto_error proto_event_error_code(const char *json);
const char *proto_format_name(enum proto_format);
/* Bytes per sample of one channel for PCM formats, 0 for Opus. */
size_t	proto_format_sample_bytes(enum proto_format);

/*
 * A malloc'd copy of s (NULL: "") with each byte that does not start a
 * valid UTF-8 sequence replaced by U+FFFD; NULL when out of memory.
 */
char	*proto_utf8_clean(const char *s);
/* A JSON string of s with invalid UTF-8 replaced by U+FFFD; NULL when
 * out of memory. The caller owns it (json_object_put, or an object's). */
struct json_object *proto_json_text(const char *s);

/* A session id: 1-31 characters of [A-Za-z0-9_-]. */
int	proto_session_valid(const char *);

/*
 * Server events, each a malloc'd NUL-terminated JSON object (the frame
 * payload, without the NUL), or NULL when out of memory. Strings are
 * written as valid JSON whatever bytes they hold (invalid UTF-8 is
 * replaced).
 */
struct proto_word {
	double		 start, end;
	const char	*word;
	double		 probability;
};

struct proto_segment {
	double		 start, end;
	const char	*text;
	const struct proto_word *words;	/* NULL: no "words" field */
	int		 n_words;
	int		 speaker;	/* 1: "S1", ...; 0: no "speaker" */
};

char	*proto_event_hello(const char *server, const char *model);
/* audio_frames: the AUDIO frames the session took (a resume goes on
 * after them). */
char	*proto_event_opened(const char *session, int64_t last_final,
	    uint64_t audio_frames);
char	*proto_event_language(const char *session, const char *language,
	    double probability, int settled);
char	*proto_event_subscribed(const char *source, const char *session);
/* lag: seconds of the stream's audio received but not yet decoded */
char	*proto_event_partial(const char *session, const char *text,
	    double start, double end, double lag);
char	*proto_event_final(const char *session, int64_t id,
	    const struct proto_segment *, int n, double lag);
/* A caption unit (docs/protocol.md, "Caption units"). */
struct proto_unit {
	int64_t		 id;
	double		 start, end;
	const char	*text, *tentative;
	int		 closed;
	int64_t		 first_final, last_final;	/* -1: none */
	int		 speaker;	/* 1: "S1"; 0: no "speaker" */
};
char	*proto_event_unit(const char *session, const struct proto_unit *);
char	*proto_event_error(enum proto_error, const char *message);
/* The end of a stream: what was received and what was transcribed. */
struct proto_end {
	int64_t		 last_final;	/* id, -1 when none */
	double		 last_final_end; /* end of its last segment; 0 */
	double		 audio_s;	/* audio received */
	double		 undecoded_s;	/* of it, never transcribed */
};
char	*proto_event_end(const char *session, const struct proto_end *);
/* Not an error: a shared source skipped audio the engine could not take. */
char	*proto_event_overload(const char *session, double dropped_s,
	    double total_s);

/*
 * One session in a status event; a file has no audio_s, lag_s, rtf (< 0),
 * nor has a session rtf before its first step.
 */
struct proto_session_info {
	char		 id[PROTO_SESSION_MAX];
	const char	*source, *state;
	double		 audio_s, lag_s, rtf;
};

struct proto_status {
	int		 sessions, clients, subscribers;
	const char	*model;
	const char	*compute;	/* the model's products' path */
	double		 rtf, lag_s, uptime_s;
	int		 mic;		/* -1 off, 0 device down, 1 capturing */
	uint64_t	 dropped_partials, overload_s;
	const struct proto_session_info *list;
	int		 n_list;
};
char	*proto_event_status(const struct proto_status *);

/*
 * Client side: check an EVENT payload is one JSON object with a string
 * "type"; copy the type (at most PROTO_NAME_MAX - 1 bytes) to ret_type.
 */
enum proto_error proto_parse_event(const uint8_t *, size_t, char *ret_type,
	    char *msg);

#endif

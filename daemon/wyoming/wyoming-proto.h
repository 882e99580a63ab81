/*
 * The Wyoming protocol (Home Assistant's voice services): an event is a
 * JSON header line, {"type", "data", "data_length", "payload_length"}
 * and '\n', then data_length bytes of a JSON object merged over the
 * header's "data", then payload_length bytes of payload (audio). See
 * docs/protocol.md, "Wyoming".
 *
 * Everything here is a pure function over bytes, like proto.c: no I/O,
 * no globals, safe on any input (tests/fuzz/fuzz-wyoming.c). Errors are
 * proto.h's codes: PROTO_E_BAD_JSON for what is not the JSON a field
 * needs, PROTO_E_BAD_VALUE for a value out of range, PROTO_E_TOO_LARGE
 * for a length over the caller's limit.
 */
#ifndef SOTTO_WYOMING_PROTO_H
#define SOTTO_WYOMING_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define WY_PROTOCOL_VERSION	"1.10.2"	/* of the spec we follow */
#define WY_TYPE_MAX		64
#define WY_TEXT_MAX		256
#define WY_WIDTH_MAX		4

enum wy_kind {
	WY_UNKNOWN,		/* any other type: ignored */
	WY_DESCRIBE,
	WY_TRANSCRIBE,
	WY_AUDIO_START,
	WY_AUDIO_CHUNK,
	WY_AUDIO_STOP,
	WY_PING,
	WY_SELECT_PROGRAM,
};

/* What the header line says about the bytes after it. */
struct wy_header {
	char		 type[WY_TYPE_MAX];
	size_t		 data_length, payload_length;
};

struct wy_event {
	enum wy_kind	 kind;
	char		 type[WY_TYPE_MAX];
	int		 rate, width, channels;	/* audio-start, audio-chunk */
	char		 language[PROTO_LANGUAGE_MAX];	/* transcribe; "" */
	char		 name[PROTO_NAME_MAX];	/* transcribe, select-program */
	char		 text[WY_TEXT_MAX];	/* ping */
	int		 has_text;
};

/*
 * Parse a header line of len bytes (without its '\n'). data_length,
 * payload_length and their sum may be at most max. PROTO_OK or an error
 * with msg (PROTO_MSG_MAX bytes).
 */
enum proto_error wy_header_parse(const char *line, size_t len, size_t max,
	    struct wy_header *, char *msg);

/*
 * The event of a header line and the data_length bytes of data after it
 * (the payload is the caller's). Known events are checked: audio-start
 * and audio-chunk need rate (PROTO_RATE_MIN..PROTO_RATE_MAX), width (1
 * to WY_WIDTH_MAX bytes) and channels (1..PROTO_CHANNELS_MAX); optional
 * strings may be null. A type this server does not handle is WY_UNKNOWN.
 */
enum proto_error wy_event_parse(const char *line, size_t len,
	    const uint8_t *data, size_t data_len, struct wy_event *, char *msg);

/*
 * n samples of Wyoming PCM (little-endian, signed, but 8-bit unsigned as
 * in WAV files; width bytes each) as floats in [-1, 1).
 */
void	wy_pcm_float(const uint8_t *p, size_t n, int width, float *out);

/*
 * Writers. Each returns a malloc'd event, its header line with the data
 * inline and the '\n' (the form every version of the protocol reads), or
 * NULL when out of memory. Strings are written as valid UTF-8 whatever
 * bytes they hold.
 *
 * wy_write: an event whose data is n string fields, kv[2i] the key and
 * kv[2i + 1] its value (NULL: left out); n 0 writes no data.
 */
char	*wy_write(const char *type, const char *const *kv, int n);

struct wy_info {
	const char	*program;	/* "sotto" */
	const char	*version;
	const char	*model;
	const char	*const *languages;
	int		 n_languages;
	const char	*url;		/* the project's, for its attribution */
};
/* info: one asr program, its one model, transcript streaming. */
char	*wy_write_info(const struct wy_info *);

#endif

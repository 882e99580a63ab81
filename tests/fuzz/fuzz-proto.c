/*
 * libFuzzer target for common/proto.c: cut the input into frames the way
 * sottod does and decode every payload as each control message and as an
 * event; then re-encode events from the decoded strings. ASan checks
 * every read stays inside the input; any accepted message must hold
 * NUL-terminated fields of bounded length.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_MAX_PAYLOAD	(64 * 1024)

static void
fuzz_check_str(const char *s, size_t cap)
{
	if (memchr(s, '\0', cap) == NULL)
		abort();
}

/* Events built from decoded fields must come back as valid events. */
static void
fuzz_events(const struct msg_open *o, const struct msg_hello *h)
{
	struct proto_segment seg = { .start = 0.5, .end = 1.5, .text = h->client };
	char type[PROTO_NAME_MAX], msg[PROTO_MSG_MAX];
	char *ev[4];
	size_t i;

	ev[0] = proto_event_final(o->session, o->since, &seg, 1, 1e12);
	ev[1] = proto_event_partial(o->session, o->language, -1, 1e12, -1);
	ev[2] = proto_event_error(PROTO_E_BAD_JSON, h->client);
	ev[3] = proto_event_hello(h->client, o->language);
	for (i = 0; i < 4; i++) {
		if (ev[i] == NULL)
			continue;
		if (proto_parse_event((const uint8_t *)ev[i], strlen(ev[i]),
		    type, msg) != PROTO_OK)
			abort();
		free(ev[i]);
	}
}

static void
fuzz_payload(uint8_t type, const uint8_t *p, size_t n)
{
	struct msg_hello h;
	struct msg_open o;
	struct msg_subscribe s;
	char msg[PROTO_MSG_MAX], t[PROTO_NAME_MAX];
	enum proto_error eh, eo;

	(void)type;
	eh = proto_parse_hello(p, n, &h, msg);
	fuzz_check_str(msg, sizeof(msg));
	eo = proto_parse_open(p, n, &o, msg);
	if (eo == PROTO_OK) {
		fuzz_check_str(o.language, sizeof(o.language));
		fuzz_check_str(o.session, sizeof(o.session));
		if (o.rate < PROTO_RATE_MIN || o.rate > PROTO_RATE_MAX ||
		    o.channels < 1 || o.channels > PROTO_CHANNELS_MAX)
			abort();
		if (o.session[0] != '\0' && !proto_session_valid(o.session))
			abort();
	}
	if (proto_parse_subscribe(p, n, &s, msg) == PROTO_OK)
		fuzz_check_str(s.source, sizeof(s.source));
	(void)proto_parse_empty(p, n, msg);
	if (proto_parse_event(p, n, t, msg) == PROTO_OK)
		fuzz_check_str(t, sizeof(t));
	if (eh == PROTO_OK && eo == PROTO_OK)
		fuzz_events(&o, &h);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	size_t used, off = 0;
	int rc;

	while (off < size) {
		rc = proto_frame_parse(data + off, size - off,
		    FUZZ_MAX_PAYLOAD, &f, &used, &e, msg);
		if (rc <= 0) {
			/* Not a frame: still decode the rest as one payload. */
			fuzz_payload(0, data + off, size - off);
			break;
		}
		if (used > size - off || f.len + 5 != used ||
		    !proto_type_known(f.type))
			abort();
		fuzz_payload(f.type, f.payload, f.len);
		off += used;
	}
	return 0;
}

/*
 * libFuzzer target for daemon/wyoming/wyoming-proto.c: cut the input into events
 * the way daemon/wyoming/wyoming.c does (a header line, then data_length bytes of
 * data and payload_length bytes of payload), parse each, convert audio
 * payloads to floats, and write events back from the decoded strings: a
 * written event must be one line that parses again. ASan checks every
 * read stays inside the input.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wyoming-proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_MAX_EVENT	(64 * 1024)

static void
fuzz_check_str(const char *s, size_t cap)
{
	if (memchr(s, '\0', cap) == NULL)
		abort();
}

/*
 * A written event is one line whose header reads back with its type; with
 * parse, the whole event reads back too.
 */
static void
fuzz_written(char *line, const char *type, int parse)
{
	struct wy_header h;
	struct wy_event ev;
	char msg[PROTO_MSG_MAX];
	size_t n;

	if (line == NULL)
		return;
	n = strlen(line);
	if (n == 0 || line[n - 1] != '\n' || memchr(line, '\n', n - 1) != NULL)
		abort();
	if (wy_header_parse(line, n - 1, FUZZ_MAX_EVENT, &h, msg) != PROTO_OK ||
	    strcmp(h.type, type) != 0 || h.data_length != 0 ||
	    h.payload_length != 0)
		abort();
	if (parse && wy_event_parse(line, n - 1, NULL, 0, &ev, msg) !=
	    PROTO_OK)
		abort();
	free(line);
}

static void
fuzz_write_back(const struct wy_event *ev)
{
	const char *kv[4] = { "text", ev->text, "language", ev->language };
	const char *langs[2] = { ev->language, ev->name };
	struct wy_info in = { ev->type, ev->name, ev->name, langs, 2,
	    ev->name };

	fuzz_written(wy_write("transcript", kv, 2), "transcript", 1);
	fuzz_written(wy_write("pong", kv, 1), "pong", 1);
	fuzz_written(wy_write(ev->type, NULL, 0), ev->type, 0);
	fuzz_written(wy_write_info(&in), "info", 1);
}

static void
fuzz_audio(const struct wy_event *ev, const uint8_t *p, size_t len)
{
	float out[4096];
	size_t n = len / (size_t)ev->width, i;

	if (n > sizeof(out) / sizeof(out[0]))
		n = sizeof(out) / sizeof(out[0]);
	wy_pcm_float(p, n, ev->width, out);
	for (i = 0; i < n; i++)
		if (!(out[i] >= -1.0f && out[i] < 1.0f))
			abort();
}

static void
fuzz_event(const char *line, size_t len, const uint8_t *rest, size_t n)
{
	struct wy_event ev;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	e = wy_event_parse(line, len, rest, n, &ev, msg);
	fuzz_check_str(msg, sizeof(msg));
	if (e != PROTO_OK)
		return;
	fuzz_check_str(ev.type, sizeof(ev.type));
	fuzz_check_str(ev.language, sizeof(ev.language));
	fuzz_check_str(ev.name, sizeof(ev.name));
	fuzz_check_str(ev.text, sizeof(ev.text));
	if (ev.kind == WY_AUDIO_START || ev.kind == WY_AUDIO_CHUNK) {
		if (ev.rate < PROTO_RATE_MIN || ev.rate > PROTO_RATE_MAX ||
		    ev.width < 1 || ev.width > WY_WIDTH_MAX ||
		    ev.channels < 1 || ev.channels > PROTO_CHANNELS_MAX)
			abort();
	}
	fuzz_write_back(&ev);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wy_header h;
	char msg[PROTO_MSG_MAX];
	const uint8_t *nl;
	size_t off = 0, len, need;
	struct wy_event ev;

	while (off < size) {
		if ((nl = memchr(data + off, '\n', size - off)) == NULL)
			nl = data + size;
		len = (size_t)(nl - (data + off));
		if (wy_header_parse((const char *)data + off, len,
		    FUZZ_MAX_EVENT, &h, msg) != PROTO_OK) {
			fuzz_check_str(msg, sizeof(msg));
			/* Not a header: still parse the line as one. */
			fuzz_event((const char *)data + off, len, NULL, 0);
			off += len + 1;
			continue;
		}
		fuzz_check_str(h.type, sizeof(h.type));
		if (h.data_length > FUZZ_MAX_EVENT ||
		    h.payload_length > FUZZ_MAX_EVENT)
			abort();
		off += len + 1;
		need = h.data_length + h.payload_length;
		if (off > size || size - off < need)
			break;
		fuzz_event((const char *)data + off - len - 1, len, data + off,
		    h.data_length);
		if (wy_event_parse((const char *)data + off - len - 1, len,
		    data + off, h.data_length, &ev, msg) == PROTO_OK &&
		    ev.kind == WY_AUDIO_CHUNK)
			fuzz_audio(&ev, data + off + h.data_length,
			    h.payload_length);
		off += need;
	}
	return 0;
}

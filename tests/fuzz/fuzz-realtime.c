/*
 * libFuzzer target for the Realtime door's client events and audio bytes
 * (daemon/realtime/realtime-msg.c, realtime-codec.c, and the G.711 it
 * takes, daemon/sources/source-g711.c): the input is parsed
 * as a client event over the default settings and over a beta session
 * using G.711 with the VAD off; a parsed update must keep its settings in
 * range, a parsed append must hold no more bytes than its base64 can.
 * Then base64: the input, encoded here, must decode back to itself, and
 * the input as base64 text must decode within its bound or be refused.
 * The input as G.711 must expand to samples within each law's range.
 * ASan checks every read and write stays in bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "realtime.h"
#include "source-g711.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_B64_MAX	4096

static void
fuzz_check_config(const struct rt_config *c)
{
	if (!(c->threshold >= 0 && c->threshold <= 1) ||
	    c->prefix_padding_ms < 0 || c->prefix_padding_ms > 10000 ||
	    c->silence_duration_ms < 0 || c->silence_duration_ms > 10000 ||
	    c->format > RT_FORMAT_PCMA ||
	    memchr(c->model, '\0', sizeof(c->model)) == NULL ||
	    memchr(c->language, '\0', sizeof(c->language)) == NULL)
		abort();
}

static void
fuzz_event(const uint8_t *data, size_t size, const struct rt_config *cur)
{
	struct rt_msg m;
	const char *code = NULL;
	char msg[RT_MSG_MAX];

	msg[0] = '\0';
	if (rt_msg_parse(data, size, cur, &m, &code, msg) != 0) {
		if (code == NULL || msg[0] == '\0' || m.audio != NULL ||
		    memchr(msg, '\0', sizeof(msg)) == NULL)
			abort();
		return;
	}
	if (memchr(m.event_id, '\0', sizeof(m.event_id)) == NULL)
		abort();
	if (m.type == RT_MSG_UPDATE)
		fuzz_check_config(&m.cfg);
	if (m.type == RT_MSG_APPEND && (m.audio == NULL ||
	    m.n_audio > size / 4 * 3 + 3))
		abort();
	free(m.audio);
}

/* RFC 4648 base64 with padding: the inverse decode must undo. */
static size_t
fuzz_b64_encode(const uint8_t *in, size_t n, char *out)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0;
	uint32_t v;

	for (i = 0; i + 2 < n; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 1) {
		v = (uint32_t)in[i] << 16;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = '=';
	}
	return o;
}

static void
fuzz_base64(const uint8_t *data, size_t size)
{
	static char text[FUZZ_B64_MAX / 3 * 4 + 8];
	static uint8_t back[FUZZ_B64_MAX + 8];
	uint8_t *out;
	size_t n = size < FUZZ_B64_MAX ? size : FUZZ_B64_MAX, t;
	long got;

	t = fuzz_b64_encode(data, n, text);
	if (rt_base64_decode(text, t, back) != (long)n ||
	    memcmp(back, data, n) != 0)
		abort();
	if ((out = malloc(size / 4 * 3 + 3)) == NULL)
		return;
	got = rt_base64_decode((const char *)data, size, out);
	if (got < -1 || (got >= 0 && (size_t)got > size / 4 * 3 + 2))
		abort();
	free(out);
}

static void
fuzz_g711(const uint8_t *data, size_t size)
{
	int16_t *pcm;
	size_t i;

	if (size == 0 || (pcm = malloc(size * sizeof(*pcm))) == NULL)
		return;
	g711_decode(G711_ULAW, data, size, pcm);
	for (i = 0; i < size; i++)
		if (pcm[i] > 32124 || pcm[i] < -32124)
			abort();
	g711_decode(G711_ALAW, data, size, pcm);
	for (i = 0; i < size; i++)
		if (pcm[i] > 32256 || pcm[i] < -32256)
			abort();
	free(pcm);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_config cur;

	rt_config_init(&cur, 1);
	fuzz_event(data, size, &cur);
	rt_config_init(&cur, 0);
	cur.beta = 1;
	cur.format = RT_FORMAT_PCMU;
	fuzz_event(data, size, &cur);
	fuzz_base64(data, size);
	fuzz_g711(data, size);
	return 0;
}

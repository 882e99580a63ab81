/*
 * The bytes of the Realtime API's audio: base64 in the JSON events
 * (RFC 4648), and G.711 mu-law and A-law samples (ITU-T G.711) as 16-bit
 * PCM, the sottod protocol's s16le.
 */
#include <string.h>

#include "realtime.h"

/* A base64 character's 6 bits, or -1. */
static int
rt_b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long
rt_base64_decode(const char *s, size_t len, uint8_t *out)
{
	uint32_t acc = 0;
	size_t i, n = 0, pad = 0;
	int bits = 0, v;

	while (pad < 2 && len > 0 && s[len - 1] == '=') {
		len--;
		pad++;
	}
	/* a last group of 1 character, or padding that does not fill one */
	if (len % 4 == 1 || (pad > 0 && (len + pad) % 4 != 0))
		return -1;
	for (i = 0; i < len; i++) {
		if ((v = rt_b64_value((unsigned char)s[i])) < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)n;
}

/* mu-law: the complemented code's segment shifts its biased mantissa. */
static int16_t
rt_ulaw(uint8_t u)
{
	int t;

	u = (uint8_t)~u;
	t = ((u & 0x0f) << 3) + 0x84;
	t <<= (u & 0x70) >> 4;
	return (int16_t)((u & 0x80) ? 0x84 - t : t - 0x84);
}

/* A-law: even bits inverted; segment 0 is linear, the others doubled. */
static int16_t
rt_alaw(uint8_t a)
{
	int t, seg;

	a ^= 0x55;
	t = (a & 0x0f) << 4;
	seg = (a & 0x70) >> 4;
	if (seg == 0)
		t += 8;
	else {
		t += 0x108;
		if (seg > 1)
			t <<= seg - 1;
	}
	return (int16_t)((a & 0x80) ? t : -t);
}

void
rt_g711_decode(enum rt_format f, const uint8_t *in, size_t n, int16_t *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = f == RT_FORMAT_PCMA ? rt_alaw(in[i]) : rt_ulaw(in[i]);
}

/*
 * The bytes of the Realtime API's audio: base64 in the JSON events
 * (RFC 4648). Its G.711 is daemon/sources/source-g711.c's, which the
 * Deepgram door shares.
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

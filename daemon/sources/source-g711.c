/*
 * G.711 mu-law and A-law samples (ITU-T G.711) as 16-bit PCM: each byte
 * is a sign, a 3-bit segment (an exponent) and a 4-bit mantissa, so the
 * expansion is a shift, not a table the fuzzers would have to trust.
 */
#include "source-g711.h"

/* mu-law: the complemented code's segment shifts its biased mantissa. */
static int16_t
g711_ulaw(uint8_t u)
{
	int t;

	u = (uint8_t)~u;
	t = ((u & 0x0f) << 3) + 0x84;
	t <<= (u & 0x70) >> 4;
	return (int16_t)((u & 0x80) ? 0x84 - t : t - 0x84);
}

/* A-law: even bits inverted; segment 0 is linear, the others doubled. */
static int16_t
g711_alaw(uint8_t a)
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
g711_decode(enum g711_law law, const uint8_t *in, size_t n, int16_t *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = law == G711_ALAW ? g711_alaw(in[i]) : g711_ulaw(in[i]);
}

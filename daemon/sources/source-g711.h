/*
 * G.711 telephone audio (source-g711.c): mu-law and A-law bytes as the
 * 16-bit PCM every door then hands to a source_client. Below the doors,
 * since more than one takes G.711 (the Realtime door's audio/pcmu and
 * audio/pcma, the Deepgram door's encoding=mulaw and alaw) and doors may
 * not include each other.
 */
#ifndef SOTTOD_SOURCE_G711_H
#define SOTTOD_SOURCE_G711_H

#include <stddef.h>
#include <stdint.h>

enum g711_law {
	G711_ULAW,		/* mu-law: North America, Japan */
	G711_ALAW,		/* A-law: elsewhere */
};

/* n G.711 bytes as n s16 samples (out: 2 * n bytes). */
void	g711_decode(enum g711_law, const uint8_t *, size_t n, int16_t *out);

#endif

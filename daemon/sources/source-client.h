/*
 * Client audio (source-client.c): the sottod protocol's formats (s16le,
 * f32le at any rate and channel count, Opus) as 16 kHz mono float
 * samples, mixed and resampled as `sotto transcribe` reads a file.
 */
#ifndef SOTTOD_SOURCE_CLIENT_H
#define SOTTOD_SOURCE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct source_client;
enum source_quality {
	SOURCE_QUALITY_LIVE,	/* the fastest resampler: sessions */
	SOURCE_QUALITY_FILE,	/* `sotto transcribe`'s (common/audio.c) */
};
struct source_client *source_client_new(enum proto_format, int rate,
	    int channels, char *msg);
struct source_client *source_client_new_quality(enum proto_format,
	    int rate, int channels, enum source_quality, char *msg);
void	source_client_free(struct source_client *);
/*
 * Decode len bytes; *ret (owned by the source, valid until the next call)
 * holds *ret_n samples. Returns PROTO_OK or an error with msg.
 */
enum proto_error source_client_decode(struct source_client *,
	    const uint8_t *, size_t, const float **ret, size_t *ret_n,
	    char *msg);
/* The resampler's tail at the end of the stream. */
enum proto_error source_client_flush(struct source_client *,
	    const float **ret, size_t *ret_n, char *msg);

#endif

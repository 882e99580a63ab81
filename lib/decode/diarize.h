/*
 * Speaker labels for a transcript (sotto_diarize()): diarize.c cuts the
 * speech into pieces, embeds and clusters them; diarize-label.c gives
 * the transcript's words and segments their piece's speaker.
 */
#ifndef SOTTO_DIARIZE_H
#define SOTTO_DIARIZE_H

#include <stddef.h>

#include "sotto.h"

/* A piece of speech of the audio, and whose it is. */
struct diar_piece {
	size_t start, end;	/* samples, [start, end) */
	int label;		/* its group, 0, 1, ...; -1 until known */
};

/*
 * Each word of res takes the speaker of the piece its middle falls in
 * (else the nearest piece), pieces[n] sorted by time and all labelled;
 * segments are split where their words' speaker changes, and the
 * speakers numbered 1, 2, ... in order of first appearance. 0 or
 * SOTTO_ENOMEM (res then has its segments as they were, its labels
 * partly set).
 */
int	diarize_label(struct sotto_result *res, const struct diar_piece *pieces,
	    int n, char *err);

/* Called by diarize_stream() with piece i's audio, pcm[n]; 0 or an error. */
typedef int (*diar_piece_fn)(void *user, int i, const float *pcm, size_t n,
    char *err);

/*
 * Reads rd to its end, calling fn with the audio of each piece i of
 * p[n] (sorted, apart) that want[i] asks for, as it passes, then rewinds
 * rd; memory holds the longest piece asked for. A piece the audio ends
 * before is skipped. 0 or the first error.
 */
int	diarize_stream(const struct diar_piece *p, int n, const int *want,
	    const struct sotto_reader *rd, diar_piece_fn fn, void *user,
	    char *err);

/* The dot product of two embeddings (their cosine: unit length). */
float	diarize_dot(const float *x, const float *y);

/* dp's progress called: 0, or SOTTO_ECANCELED when it says stop. */
int	diarize_progress(const struct sotto_diarize_params *dp, char *err);

/*
 * Speaker changes inside pieces (diarize-edge.c): each piece that
 * touches one of another speaker is embedded again in short windows and
 * cut where they change speaker. *p[*n] (malloc'd, labelled, sorted) may
 * be replaced by a longer array. sum[k][SOTTO_SPEAKER_DIM]: each group's
 * embeddings summed; dp's progress is called after each window. 0 or an
 * error (*p then as it was).
 */
int	diarize_edges(struct diar_piece **p, int *n, const float *sum, int k,
	    const struct sotto_speaker *spk,
	    const struct sotto_diarize_params *dp,
	    const struct sotto_reader *rd, char *err);

#endif

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

#endif

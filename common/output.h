/*
 * A transcript written as txt, json, srt, vtt, tsv or lrc: what `sotto
 * transcribe` prints and what sottod's HTTP API answers.
 */
#ifndef SOTTO_OUTPUT_H
#define SOTTO_OUTPUT_H

#include <stdio.h>

#include "sotto.h"

/* output.c, subtitles.c */
enum output_format {
	OUTPUT_TXT,
	OUTPUT_JSON,
	OUTPUT_SRT,
	OUTPUT_VTT,
	OUTPUT_TSV,		/* openai-whisper's: start, end (ms), text */
	OUTPUT_LRC,		/* whisper.cpp's: [mm:ss.xx]text */
	OUTPUT_FORMATS,		/* how many there are */
	OUTPUT_ALL = OUTPUT_FORMATS,	/* each of them, a file each */
};

/* Cue layout of srt and vtt with words (openai's writer options). */
struct output_opts {
	int max_line_width;	/* characters per line; 0: a segment's */
	int max_line_count;	/* lines per cue; 0: a segment's */
	int highlight_words;	/* a cue per word, underlined */
};

/* A format's name (also the extension of its files); "all" parses too. */
int	output_format_parse(const char *s, enum output_format *ret);
const char *output_format_name(enum output_format);
/* Write one file's transcript (o NULL: no layout options); returns 0 or
 * -1 (errno set). */
int	output_write(FILE *, enum output_format, const struct output_opts *,
	    const char *file, double duration, const struct sotto_result *,
	    int n_files);

/* A cue's speaker label, before its text (speaker 0: none). */
void	output_cue_speaker(FILE *, int speaker, int srt);

/* subtitles.c: srt (or vtt) cues from the words of every segment */
void	subtitles_write_words(FILE *, const struct sotto_result *, int srt,
	    const struct output_opts *);

#endif

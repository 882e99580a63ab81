/*
 * Caption units (docs/protocol.md, "Caption units"): the finals of a
 * stream, which come as fragments of a few words, gathered into lines a
 * reader can take in at once. A unit grows by committed words (never
 * changed once in it) followed by the current tentative text, and closes
 * at the end of a sentence (the punctuation the model wrote), at a pause,
 * or at a caption's length (two lines of 42 characters, or 7 s).
 *
 * A pure state machine over text and times, no I/O: sottod's sessions
 * feed it so that every door shows the same units, and it lives here,
 * below both programs, so that the unit tests can drive it directly.
 */
#ifndef SOTTO_CAPTION_H
#define SOTTO_CAPTION_H

#include <stddef.h>
#include <stdint.h>

#define CAPTION_LINE_CHARS	42	/* a caption line (Netflix, BBC) */
#define CAPTION_MAX_CHARS	(2 * CAPTION_LINE_CHARS)
#define CAPTION_MAX_SECONDS	7.0
/* Silence between two committed words that ends the unit. */
#define CAPTION_PAUSE_SECONDS	0.8
/*
 * Audio after the last committed word, with nothing tentative after it
 * (or the tentative text only that far after it), that ends the unit: a
 * stream commits a word only once it ends 1 s or more before the end of
 * the decoded audio, so an empty hypothesis 1 s after the last word is
 * often the decoder stopping short, not the speaker.
 */
#define CAPTION_QUIET_SECONDS	2.0

/* A unit as an event shows it; text and tentative are borrowed. */
struct caption_unit {
	int64_t		 id;		/* 0, 1, 2... per stream */
	double		 start, end;	/* of its committed words */
	const char	*text;		/* committed, Whisper's leading blanks */
	const char	*tentative;	/* "" when closed */
	int64_t		 first_final, last_final;	/* finals in it */
	int		 closed;
	int		 speaker;	/* its finals' (1: "S1"); 0: none */
};

/* Called for each change: the open unit grew, or a unit closed. */
typedef void	(*caption_emit)(void *arg, const struct caption_unit *);

struct caption {
	int64_t		 next_id;
	char		*text;		/* the open unit's committed text */
	size_t		 len, cap;
	double		 start, end;
	int64_t		 first_final, last_final;
	double		 tentative_start;
	char		*shown;		/* tentative text clients last saw */
	size_t		 shown_len;	/* and the length of text then */
	int		 oom;		/* a copy failed: text may be short */
	int		 speaker;	/* the open unit's, 0: no labels */
	caption_emit	 emit;
	void		*arg;
};

void	caption_init(struct caption *, caption_emit, void *arg);
void	caption_free(struct caption *);
/*
 * A final segment (id final_id) of the stream: its words join the open
 * unit, closing it (and opening the next) where a sentence ends, a pause
 * came before a word, or the next word would pass the length limit.
 * Word times inside the segment are estimated from its start and end by
 * the text's bytes (finals carry no word times unless asked for).
 */
void	caption_final(struct caption *, int64_t final_id, double start,
	    double end, const char *text);
/*
 * The speaker of the finals that follow (live speaker labels): a change
 * closes the open unit, so that a unit, a line or a cue, is one
 * speaker's, as sotto transcribe --diarize's cues are.
 */
void	caption_speaker(struct caption *, int speaker);
/*
 * After a step: the tentative text that follows the committed words
 * ("" none) and the audio decoded so far. With no tentative text and
 * CAPTION_QUIET_SECONDS of audio after the last committed word (or the
 * tentative text starting that late), the unit closes (the speaker
 * paused); otherwise a changed unit is emitted open.
 */
void	caption_partial(struct caption *, const char *tentative,
	    double tentative_start, double audio_time);
/* The stream ended: the open unit, if any, closes as it is. */
void	caption_flush(struct caption *);

#endif

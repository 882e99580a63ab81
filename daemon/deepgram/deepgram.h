/*
 * The Deepgram door: Deepgram's live transcription WebSocket (and its
 * pre-recorded POST) at
 * /v1/listen on the HTTP listener, for the clients (deepgram-sdk, voice
 * agent frameworks) that speak it. Binary messages are audio, text
 * messages KeepAlive, Finalize and CloseStream; the server sends
 * Results, SpeechStarted, UtteranceEnd, Metadata and Error.
 * docs/http.md has the wire format.
 *
 * deepgram.c: the door (upgrade, WebSocket, peer ops)
 * deepgram-query.c: the query string and the client's text messages,
 *   parsed (no daemon state: tests/fuzz/fuzz-deepgram.c drives it)
 * deepgram-audio.c: audio in, the live session, Finalize and CloseStream
 * deepgram-result.c: what the session says, as Results and the events
 *   around them
 * deepgram-file.c: pre-recorded audio, POST /v1/listen with the file as
 *   the body, answered when it is transcribed (words, utterances,
 *   paragraphs, speakers)
 * deepgram-out.c: the server messages' JSON
 */
#ifndef SOTTOD_DEEPGRAM_H
#define SOTTOD_DEEPGRAM_H

#include <stddef.h>
#include <stdint.h>

#define DG_MSG_MAX		256
#define DG_MODEL_MAX		64
#define DG_LANGUAGE_MAX		16
#define DG_PROMPT_MAX		1024	/* as the socket's OPEN prompt */

/* Add /v1/listen to the HTTP listener, when there is one. */
int	deepgram_start(char *err, size_t errlen);

enum dg_encoding {
	DG_ENC_LINEAR16,	/* s16le PCM */
	DG_ENC_MULAW,		/* G.711 mu-law */
	DG_ENC_ALAW,		/* G.711 A-law */
};

/* A connection's settings, from its query string. */
struct dg_params {
	enum dg_encoding encoding;
	int		 sample_rate;	/* Hz */
	int		 channels;	/* downmixed to one */
	int		 interim_results;
	int		 punctuate;	/* punctuate or smart_format */
	int		 vad_events;	/* SpeechStarted */
	int		 endpointing_ms;	/* -1: endpointing=false */
	int		 utterance_end_ms;	/* 0: no UtteranceEnd */
	int		 diarize;	/* speaker labels */
	/* pre-recorded (POST) only; the live door ignores them */
	int		 utterances;
	int		 paragraphs;
	char		 model[DG_MODEL_MAX];	/* echoed; the loaded one runs */
	char		 language[DG_LANGUAGE_MAX];	/* Whisper's code,
					   "auto", or "": the config's */
	/* keywords and keyterm, ", "-joined: the stream's vocabulary */
	char		 prompt[DG_PROMPT_MAX];
};

/* Defaults: linear16 at 16 kHz, mono, no interim results, punctuated. */
void	dg_params_init(struct dg_params *);

/*
 * The query string (without '?'; NULL: none) into p, over its defaults.
 * 0, or -1 with *param (the parameter at fault) and msg (DG_MSG_MAX
 * bytes). Parameters sottod has no use for are ignored, as Deepgram
 * ignores those it does not know.
 */
int	dg_query_parse(const char *query, struct dg_params *p,
	    const char **param, char *msg);

enum dg_msg_type {
	DG_MSG_KEEPALIVE,
	DG_MSG_FINALIZE,
	DG_MSG_CLOSE_STREAM,
};

/*
 * One client text message: its type, or -1 with msg (DG_MSG_MAX bytes)
 * for one that is not JSON or not one of the three.
 */
int	dg_msg_parse(const uint8_t *, size_t, enum dg_msg_type *, char *msg);

#endif

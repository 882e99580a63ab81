/*
 * The Deepgram door's own parts: one connection's state and the calls
 * between its files. Seen by daemon/deepgram/ only.
 */
#ifndef SOTTOD_DEEPGRAM_PRIVATE_H
#define SOTTOD_DEEPGRAM_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <nettle/sha2.h>

#include "core.h"
#include "deepgram.h"
#include "peer.h"
#include "session.h"
#include "source-client.h"
#include "ws-upgrade.h"

#define DG_ID_MAX	40

struct evhttp_request;

/* Why the session is ending. */
enum dg_ending {
	DG_END_NONE,
	DG_END_FINALIZE,	/* Finalize: a new session takes what follows */
	DG_END_CLOSE,		/* CloseStream: Metadata, then the close */
};

struct dg_conn {
	struct ws_peer		 ws;		/* first: ws-upgrade.h */
	struct dg_params	 prm;
	char			 request_id[DG_ID_MAX];
	char			 created[32];	/* ISO 8601, UTC */
	enum proto_error	 err;		/* why dg_audio failed */
	/* audio in */
	struct source_client	*src;
	int16_t			*g711;		/* G.711 as PCM */
	size_t			 cap_g711;
	struct sha256_ctx	 sha;		/* of the bytes received */
	uint64_t		 bytes;
	uint64_t		 fed;		/* 16 kHz samples to sessions */
	uint64_t		 base;		/* fed before this session */
	float			*wait;		/* while a session ends */
	size_t			 n_wait, cap_wait;
	enum dg_ending		 ending;
	int			 close_after;	/* CloseStream in a Finalize */
	int			 finalized;	/* Results sent in a Finalize */
	/* results */
	double			 final_end;	/* the last final's end, s */
	double			 last_word_end;
	int			 utterance;	/* words since UtteranceEnd */
	int			 speaking;	/* SpeechStarted sent */
	int			 tentative;	/* the last interim had words */
	char			*interim;	/* its transcript */
};

/* deepgram-out.c: server messages */
struct json_object *dg_seconds(double);
void	dg_send(struct dg_conn *, struct json_object *);
struct json_object *dg_results(struct dg_conn *, double start, double end,
	    struct json_object *alternative);
void	dg_send_metadata(struct dg_conn *);
/* Metadata's fields (request id, sha256 as hex, model) into o. */
void	dg_metadata_fill(struct json_object *o, const char *request_id,
	    const char *sha256_hex, const char *created, double duration);
void	dg_sha256_hex(struct sha256_ctx *, char hex[2 * SHA256_DIGEST_SIZE +
	    1]);
void	dg_send_error(struct dg_conn *, const char *variant, const char *msg);
void	dg_send_event(struct dg_conn *, const char *type, const char *key,
	    double t);

/* deepgram.c */
void	dg_request_id(char out[DG_ID_MAX]);
/* now as Deepgram's "created": ISO 8601, UTC */
void	dg_created(char out[32]);
/* The query and the language: 0, or a 400 sent. */
int	dg_check(struct evhttp_request *, struct dg_params *);
/* An HTTP error as Deepgram's: {err_code, err_msg, request_id}. */
void	dg_refuse(struct evhttp_request *, int status, const char *code,
	    const char *msg);

/* deepgram-file.c: pre-recorded audio, POST /v1/listen */
void	dg_file_request(struct evhttp_request *);
int	dg_file_busy(void);
void	dg_file_stop(void);

/* deepgram-audio.c: audio, the session, Finalize and CloseStream */
int	dg_audio(struct dg_conn *, const uint8_t *, size_t, char *msg);
void	dg_finalize(struct dg_conn *, enum dg_ending);
void	dg_session_over(struct dg_conn *);
void	dg_conn_free_audio(struct dg_conn *);

/* deepgram-result.c: the session's events */
/* One alternative being built: its words, transcript and confidence. */
struct dg_alt {
	struct json_object	*words;
	char			*text;
	size_t			 len;
	double			 conf;
	int			 n;
	double			 first, last;	/* its words' span */
};
/*
 * Add Whisper's word w (n bytes, blanks trimmed) over [start, end] as
 * Deepgram's (word lower case and bare, punctuated_word); a word with
 * nothing left is not added.
 */
void	dg_alt_add(struct dg_alt *, int punctuate, const char *w, size_t n,
	    double start, double end, double conf);
/*
 * a's words from the from-th on get speaker (sotto's, 1 for "S1") as
 * Deepgram's "speaker": 0-based.
 */
void	dg_alt_speaker(struct dg_alt *, size_t from, int speaker);
/* The alternative as Deepgram's object (a's words and text taken). */
struct json_object *dg_alt_object(struct dg_alt *);

void	dg_session_event(struct dg_conn *, const char *json);
void	dg_utterance_check(struct dg_conn *, double now);
void	dg_finalize_done(struct dg_conn *);

#endif

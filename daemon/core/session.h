/*
 * Sessions (session.c, session-result.c, session-mic.c): one audio
 * stream each, decoded on the compute thread, with the peers that get
 * its events and the finals kept for a resume. A door opens one for a
 * peer, feeds it the client's audio in the format OPEN named, ends it,
 * and is told of its events through the peer (peer_send, ops->write)
 * and of its end through peer_session_ended. The rest is session.c's.
 */
#ifndef SOTTOD_SESSION_H
#define SOTTOD_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define SESSION_HISTORY_MAX	256	/* finals kept for resume */

struct peer;
struct session;

/*
 * A new client session for p, or NULL with msg and *err: PROTO_E_BAD_VALUE
 * (a language or task the model does not take), PROTO_E_UNAVAILABLE (the
 * speaker labels it asked for: their model does not load).
 */
struct session *session_open(struct peer *, const struct msg_open *,
	    char *msg, enum proto_error *err);
/*
 * A live session of 16 kHz mono f32 samples for p, for the doors that
 * decode their own wire format (Wyoming, Realtime, Deepgram): language
 * ("" for the config's, "auto"), prompt (the vocabulary, "" for none),
 * word times if words, speaker labels on its finals if diarize (OPEN's
 * "diarize"). p is streaming after it. NULL with msg and *err:
 * PROTO_E_BUSY over max_sessions, else as session_open's.
 */
struct session *session_open_live(struct peer *, const char *language,
	    const char *prompt, int words, int diarize, char *msg,
	    enum proto_error *err);
/*
 * Whether the loaded model transcribes language ("": the config's,
 * "auto"), as session_open would take it: 0, or -1 with msg. For doors
 * that can refuse a bad language before they accept a connection.
 */
int	session_check_language(const char *language, char *msg);
/*
 * Whether speaker labels can be had (their model loads, and stays): 0,
 * or -1 with msg saying what to run. For doors that refuse them before
 * a session opens.
 */
int	session_check_speakers(char *msg);
/*
 * Its client waits for the answer when the speech ends (a Wyoming voice
 * command, a Realtime turn), not for partials: no previews, and no step
 * begun as a pause begins (session-result.c, session_next), either of
 * which would hold the compute thread from the step that reads the end
 * of the speech.
 */
void	session_answer_first(struct session *);
/* Audio of the format OPEN named; *ret_error is PROTO_OK or why not. */
void	session_audio(struct session *, const uint8_t *, size_t, char *msg,
	    enum proto_error *ret_error);
/* End of stream: the rest is decoded, then "end" goes out. */
void	session_end(struct session *);
/* p goes away; a session it owned waits for a resume (or is freed). */
void	session_detach(struct session *, struct peer *);

/* Resume and subscribe (the sottod protocol's OPEN and SUBSCRIBE). */
struct session *session_find(const char *name);
/*
 * since: the last final the client has; since_unit: its last closed
 * caption unit (PROTO_SINCE_NONE: it wants no units replayed).
 */
void	session_attach(struct session *, struct peer *, int64_t since,
	    int64_t since_unit);
void	session_subscribe(struct session *, struct peer *, int64_t since,
	    int64_t since_unit);
const char *session_name(const struct session *);
int	session_done(const struct session *);
int	session_in_use(const struct session *);

/* Client streams and files decoding now (what max_sessions bounds). */
int	session_count(void);
/*
 * Every session and file job for a status event, the microphone's
 * included (ret owned by the caller); their number, or -1 when out of
 * memory.
 */
int	session_list(struct proto_session_info **ret);

/* The microphone as the shared session "mic" (session-mic.c). */
struct session *session_mic(void);
int	session_mic_state(void);		/* -1 off, 0 down, 1 up */

#endif

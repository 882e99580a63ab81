/*
 * How a session comes to be: the stream parameters a client's language
 * and task give on the loaded model (refused with a message the client
 * can act on), a client's session from its OPEN or a door's live
 * session, and the shared (microphone) session. session.c has the
 * sessions' life after that.
 */
#include <sys/random.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-private.h"
#include "log.h"
#include "model-path.h"
#include "peer.h"
#include "session-private.h"
#include "source-client.h"
#include "worker.h"

static uint64_t session_next_id = 1;

/*
 * The speaker model for a session that asked for labels (OPEN diarize,
 * [mic] diarize), into *ret (NULL when none asked): 0, or -1 with why in
 * msg. Loaded by the first such session (core_speakers()).
 */
static int
session_speakers(int diarize, const struct sotto_speaker **ret, char *msg)
{
	const struct sotto_vad *vad;
	char why[1024];
	/* what the client's message is put after: "OPEN: " */
	const size_t room = PROTO_MSG_MAX - 8;

	*ret = NULL;
	if (!diarize || core_speakers(ret, &vad, why, sizeof(why)) == 0)
		return 0;
	/* the loader's reason can be long (every directory it looked in):
	   then what to do comes first, the whole of it is in the log */
	if (strlen(why) < room)
		snprintf(msg, PROTO_MSG_MAX, "%s", why);
	else
		snprintf(msg, PROTO_MSG_MAX, "speaker labels need the speaker "
		    "model %.40s, which does not load: run '%s campplus' "
		    "(sottod's log says why)", core.cfg.speaker_model,
		    model_fetch_command());
	return -1;
}

/*
 * A session on sp; with spk, speaker labels, which go on from the last
 * session of from (a PEER_KEEP_SPEAKERS peer's, or NULL) when it left
 * them.
 */
static struct session *
session_new(const char *name, const struct sotto_stream_params *sp,
    enum proto_format format, int rate, int channels, int live,
    const struct sotto_speaker *spk, struct peer *from, char *msg)
{
	struct sotto_stream_params p = *sp;
	struct session *s;
	char err[SOTTO_ERR_MAX];

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return NULL;
	}
	p.vad = vad_for(live);
	caption_init(&s->caption, session_unit, s);
	TAILQ_INIT(&s->subs);
	s->id = session_next_id++;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->step_samples = (size_t)sp->step_ms * SOTTO_SAMPLE_RATE / 1000;
	if (core.cfg.idle_step_ms > 0 && core.cfg.idle_step_ms < sp->step_ms)
		s->idle_step_samples = (size_t)core.cfg.idle_step_ms *
		    SOTTO_SAMPLE_RATE / 1000;
	if ((s->src = source_client_new(format, rate, channels, msg)) == NULL ||
	    (s->ws = worker_stream_new(s->id, &p, live)) == NULL) {
		if (s->src != NULL)
			snprintf(msg, PROTO_MSG_MAX, "out of memory");
		source_client_free(s->src);
		free(s);
		return NULL;
	}
	if (spk != NULL && from != NULL && from->track != NULL) {
		/* the labels of from's last session go on */
		worker_stream_track_give(s->ws, from->track, from->track_t0);
		from->track = NULL;
	} else if (spk != NULL && worker_stream_speakers(s->ws, spk,
	    err) != 0) {
		snprintf(msg, PROTO_MSG_MAX, "speaker labels: %.200s", err);
		source_client_free(s->src);
		worker_queue(s->ws, WORKER_FREE);
		free(s);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&sessions, s, entry);
	core_totals.sessions++;
	return s;
}

/* Check language and task against the model; fill sp. */
static int
session_params(const char *language, enum proto_task task,
    struct sotto_stream_params *sp, char *msg)
{
	const char *code;
	int i, n;

	sotto_stream_params_init(sp);
	sp->step_ms = core.cfg.step_ms;
	sp->beam_size = core.cfg.beam_size;
	sp->task = task == PROTO_TASK_TRANSLATE ? SOTTO_TASK_TRANSLATE :
	    SOTTO_TASK_TRANSCRIBE;
	if (*language == '\0')
		language = core.cfg.language;
	if (!core.multilingual) {
		if (strcmp(language, "en") != 0 && strcmp(language, "auto"))
			goto english;
		if (task == PROTO_TASK_TRANSLATE)
			goto english;
		sp->language = "en";
		return 0;
	}
	if (strcmp(language, "auto") == 0)
		return 0;
	n = sotto_language_count(core.model);
	for (i = 0; i < n; i++)
		if ((code = sotto_language_code(core.model, i)) != NULL &&
		    strcmp(code, language) == 0) {
			sp->language = code;
			return 0;
		}
	snprintf(msg, PROTO_MSG_MAX, "unknown language '%s'", language);
	return -1;
english:
	snprintf(msg, PROTO_MSG_MAX, "model %s is English-only: language "
	    "must be en and task transcribe", core.model_name);
	return -1;
}

int
session_check_language(const char *language, char *msg)
{
	struct sotto_stream_params sp;

	return session_params(language, PROTO_TASK_TRANSCRIBE, &sp, msg);
}

int
session_check_speakers(char *msg)
{
	const struct sotto_speaker *spk;

	return session_speakers(1, &spk, msg);
}

struct session *
session_open(struct peer *p, const struct msg_open *m, char *msg,
    enum proto_error *err)
{
	const struct sotto_speaker *spk;
	struct sotto_stream_params sp;
	struct session *s;
	uint64_t r = 0;
	char name[PROTO_SESSION_MAX];

	*err = PROTO_E_BAD_VALUE;
	if (session_params(m->language, m->task, &sp, msg) != 0)
		return NULL;
	if (session_speakers(m->diarize, &spk, msg) != 0) {
		*err = PROTO_E_UNAVAILABLE;
		return NULL;
	}
	sp.word_timestamps = m->word_timestamps;
	sp.prompt = m->prompt;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r ^= (uint64_t)(core_now() * 1e9) ^ session_next_id << 48;
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)r);
	if ((s = session_new(name, &sp, m->format, m->rate, m->channels,
	    m->live, spk, p, msg)) == NULL)
		return NULL;
	s->owner = p;
	s->source = p->ops->name;
	core_count_session(s->source);
	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	log_info("session %s: opened (%s %d Hz x%d, language %s%s%s)",
	    s->name, proto_format_name(m->format), m->rate, m->channels,
	    sp.language ? sp.language : "auto", m->live ? ", live" : "",
	    spk != NULL ? ", speaker labels" : "");
	return s;
}

void
session_answer_first(struct session *s)
{
	s->idle_step_samples = 0;
	s->answer_first = 1;
}

struct session *
session_open_live(struct peer *p, const char *language, const char *prompt,
    int words, int diarize, char *msg, enum proto_error *err)
{
	struct msg_open m;
	struct session *s;

	if (session_count() >= core.cfg.max_sessions) {
		snprintf(msg, PROTO_MSG_MAX, "all %d sessions are in use "
		    "(max_sessions): try again later", core.cfg.max_sessions);
		*err = PROTO_E_BUSY;
		return NULL;
	}
	memset(&m, 0, sizeof(m));
	m.format = PROTO_FORMAT_F32LE;
	m.rate = SOTTO_SAMPLE_RATE;
	m.channels = 1;
	snprintf(m.language, sizeof(m.language), "%s", language);
	snprintf(m.prompt, sizeof(m.prompt), "%s", prompt);
	m.task = PROTO_TASK_TRANSCRIBE;
	m.since = -1;
	m.live = 1;
	m.word_timestamps = words;
	m.diarize = diarize;
	if ((s = session_open(p, &m, msg, err)) == NULL)
		return NULL;
	p->state = PEER_STREAMING;
	return s;
}

struct session *
session_shared_new(const char *name, int rate, int channels,
    const char *language, int diarize)
{
	const struct sotto_speaker *spk;
	struct sotto_stream_params sp;
	struct session *s;
	char msg[PROTO_MSG_MAX];

	if (session_params(language, PROTO_TASK_TRANSCRIBE, &sp, msg) != 0 ||
	    session_speakers(diarize, &spk, msg) != 0 ||
	    (s = session_new(name, &sp, PROTO_FORMAT_S16LE, rate, channels, 1,
	    spk, NULL, msg)) == NULL) {
		log_warnx("session %s: %s", name, msg);
		return NULL;
	}
	s->flags |= SESSION_SHARED;
	s->source = "mic";
	core_count_session(s->source);
	worker_stream_follow(s->ws);	/* it never ends: moves on a reload */
	return s;
}

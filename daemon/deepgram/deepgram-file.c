/*
 * Deepgram's pre-recorded transcription: POST /v1/listen with the audio
 * file as the body (docs/http.md), answered with Deepgram's response
 * (metadata, results.channels[0].alternatives[0] with its words, and
 * paragraphs and utterances when asked for). diarize=true labels the
 * speakers (sotto_diarize() in the file job): every word, paragraph and
 * utterance gets `speaker`, 0-based as Deepgram's.
 *
 * The file is transcribed as the OpenAI door's uploads are: a worker-file
 * job on the compute thread (struct httpd_job), counted against
 * max_sessions, waited for by a drain until its reply is written. A
 * client that goes away before the reply, or a connection evhttp frees
 * first, has its job canceled at its next window, forgotten when it comes
 * back.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "deepgram-private.h"
#include "httpd.h"
#include "httpd-job.h"
#include "worker.h"

/* Deepgram's utt_split: a pause this long ends an utterance. */
#define DG_UTT_SPLIT_S		0.8
/* A pause this long between segments starts a paragraph. */
#define DG_PARAGRAPH_GAP_S	1.0

/* One request being answered: see struct httpd_job for who frees it. */
struct dg_file {
	struct httpd_job	 job;		/* first: freed with it */
	struct dg_params	 prm;
	char			 request_id[DG_ID_MAX];
	char			 created[32];
	char			 sha[2 * SHA256_DIGEST_SIZE + 1];
};
_Static_assert(offsetof(struct dg_file, job) == 0,
    "struct httpd_job frees the struct it starts");
static struct httpd_job_list dg_files = TAILQ_HEAD_INITIALIZER(dg_files);
static uint64_t dg_next_file = 1;

int
dg_file_busy(void)
{
	return httpd_jobs_count(&dg_files);
}

/* evhttp is going away: forget its requests (done() frees the jobs). */
void
dg_file_stop(void)
{
	httpd_jobs_stop(&dg_files);
}

static void
dg_file_word(struct dg_alt *a, const struct dg_params *prm,
    const struct sotto_word *w)
{
	size_t before = json_object_array_length(a->words);

	dg_alt_add(a, prm->punctuate, w->word, strlen(w->word), w->start,
	    w->end, w->probability);
	if (prm->diarize)
		dg_alt_speaker(a, before, w->speaker);
}

/* An utterance: its words (a's, taken) as Deepgram's. */
static struct json_object *
dg_file_utterance(struct dg_alt *a, int speaker, int diarize)
{
	struct json_object *o = dg_alt_object(a);
	char id[DG_ID_MAX];

	dg_request_id(id);
	json_object_object_add(o, "start", dg_seconds(a->first));
	json_object_object_add(o, "end", dg_seconds(a->last));
	json_object_object_add(o, "channel", json_object_new_int(0));
	if (diarize)
		json_object_object_add(o, "speaker", json_object_new_int(
		    speaker > 0 ? speaker - 1 : 0));
	json_object_object_add(o, "id", json_object_new_string(id));
	return o;
}

/*
 * utterances=true: the words cut at each pause of DG_UTT_SPLIT_S or more
 * and, with diarize, at each change of speaker.
 */
static struct json_object *
dg_file_utterances(const struct sotto_result *res, const struct dg_params *p)
{
	struct json_object *out = json_object_new_array();
	struct dg_alt a = { .words = json_object_new_array() };
	const struct sotto_word *w, *prev = NULL;
	int i, k;

	for (i = 0; i < res->n_segments; i++)
		for (k = 0; k < res->segments[i].n_words; k++) {
			w = &res->segments[i].words[k];
			if (prev != NULL && a.n > 0 && (w->start - prev->end >=
			    DG_UTT_SPLIT_S || (p->diarize &&
			    w->speaker != prev->speaker))) {
				json_object_array_add(out, dg_file_utterance(
				    &a, prev->speaker, p->diarize));
				a = (struct dg_alt){ .words =
				    json_object_new_array() };
			}
			dg_file_word(&a, p, w);
			prev = w;
		}
	if (a.n > 0)
		json_object_array_add(out, dg_file_utterance(&a,
		    prev->speaker, p->diarize));
	else {
		json_object_put(a.words);
		free(a.text);
	}
	return out;
}

/* A segment's text without its outer blanks: [*b, *e). */
static void
dg_file_trim(const char *s, size_t *b, size_t *e)
{
	for (*b = 0; s[*b] == ' ' || s[*b] == '\n'; (*b)++)
		;
	for (*e = strlen(s); *e > *b && (s[*e - 1] == ' ' ||
	    s[*e - 1] == '\n'); (*e)--)
		;
}

/*
 * paragraphs=true: a paragraph a speaker's turn (with diarize) or the
 * segments up to a pause of DG_PARAGRAPH_GAP_S; each segment a sentence.
 * transcript is Deepgram's text of them, a blank line between two
 * ("\nSpeaker 0: ...\n\nSpeaker 1: ..." with diarize).
 */
static struct json_object *
dg_file_paragraphs(const struct sotto_result *res, const struct dg_params *p)
{
	struct json_object *o = json_object_new_object(), *list, *par = NULL,
	    *sent = NULL, *s;
	struct evbuffer *text = evbuffer_new();
	const struct sotto_segment *seg, *first = NULL;
	size_t b, e, len;
	int i, words = 0;

	list = json_object_new_array();
	for (i = 0; i <= res->n_segments; i++) {
		seg = i < res->n_segments ? &res->segments[i] : NULL;
		if (par != NULL && (seg == NULL || (p->diarize ? seg->speaker !=
		    first->speaker : seg->start - res->segments[i - 1].end >=
		    DG_PARAGRAPH_GAP_S))) {
			json_object_object_add(par, "sentences", sent);
			if (p->diarize)
				json_object_object_add(par, "speaker",
				    json_object_new_int(first->speaker > 0 ?
				    first->speaker - 1 : 0));
			json_object_object_add(par, "num_words",
			    json_object_new_int(words));
			json_object_object_add(par, "start",
			    dg_seconds(first->start));
			json_object_object_add(par, "end",
			    dg_seconds(res->segments[i - 1].end));
			json_object_array_add(list, par);
			par = NULL;
		}
		if (seg == NULL)
			break;
		dg_file_trim(seg->text, &b, &e);
		if (e == b)
			continue;
		if (par == NULL) {
			par = json_object_new_object();
			sent = json_object_new_array();
			first = seg;
			words = 0;
			if (text != NULL)
				evbuffer_add(text, "\n\n", json_object_array_length(list) > 0 ?
				    2 : 1);
			if (text != NULL && p->diarize)
				evbuffer_add_printf(text, "Speaker %d: ",
				    seg->speaker > 0 ? seg->speaker - 1 : 0);
		} else if (text != NULL)
			evbuffer_add(text, " ", 1);
		if (text != NULL)
			evbuffer_add(text, seg->text + b, e - b);
		s = json_object_new_object();
		json_object_object_add(s, "text",
		    json_object_new_string_len(seg->text + b, (int)(e - b)));
		json_object_object_add(s, "start", dg_seconds(seg->start));
		json_object_object_add(s, "end", dg_seconds(seg->end));
		json_object_array_add(sent, s);
		words += seg->n_words;
	}
	len = text != NULL ? evbuffer_get_length(text) : 0;
	json_object_object_add(o, "transcript", json_object_new_string_len(
	    len > 0 ? (const char *)evbuffer_pullup(text, -1) : "", (int)len));
	json_object_object_add(o, "paragraphs", list);
	if (text != NULL)
		evbuffer_free(text);
	return o;
}

/* Deepgram's response to f's transcript. */
static struct json_object *
dg_file_response(const struct dg_file *f, const struct worker_file *job)
{
	struct json_object *o = json_object_new_object(),
	    *md = json_object_new_object(), *results = json_object_new_object(),
	    *channels = json_object_new_array(), *ch = json_object_new_object(),
	    *alts = json_object_new_array(), *alt;
	struct dg_alt a = { .words = json_object_new_array() };
	const struct sotto_result *res = job->res;
	int i, k;

	dg_metadata_fill(md, f->request_id, f->sha, f->created,
	    job->duration);
	for (i = 0; i < res->n_segments; i++)
		for (k = 0; k < res->segments[i].n_words; k++)
			dg_file_word(&a, &f->prm, &res->segments[i].words[k]);
	alt = dg_alt_object(&a);
	if (f->prm.paragraphs)
		json_object_object_add(alt, "paragraphs",
		    dg_file_paragraphs(res, &f->prm));
	json_object_array_add(alts, alt);
	json_object_object_add(ch, "alternatives", alts);
	if (res->language != NULL && strcmp(f->prm.language, "auto") == 0)
		json_object_object_add(ch, "detected_language",
		    json_object_new_string(res->language));
	json_object_array_add(channels, ch);
	json_object_object_add(results, "channels", channels);
	if (f->prm.utterances)
		json_object_object_add(results, "utterances",
		    dg_file_utterances(res, &f->prm));
	json_object_object_add(o, "metadata", md);
	json_object_object_add(o, "results", results);
	return o;
}

/* Loop thread: the compute thread is done with the file. */
static void
dg_file_done(struct worker_file *job, void *arg)
{
	struct dg_file *f = arg;
	struct evhttp_request *req;

	if ((req = httpd_job_back(&f->job, job)) != NULL) {
		if (job->error == WORKER_FILE_OK)
			httpd_reply_object(req, 200, dg_file_response(f, job));
		else if (job->error == WORKER_FILE_BAD_INPUT)
			dg_refuse(req, 400, "Bad Request", job->err);
		else if (job->error == WORKER_FILE_CANCELED)
			dg_refuse(req, 503, "SERVICE_UNAVAILABLE", job->err);
		else
			dg_refuse(req, 500, "INTERNAL_SERVER_ERROR",
			    job->err);
		httpd_job_replied(&f->job);
	}
	worker_file_free(job);
}

/*
 * The body checked (not empty, not a URL to fetch) and the job's
 * parameters: 0, or -1 with the reply sent.
 */
static int
dg_file_check(struct evhttp_request *req, const struct dg_params *prm,
    struct worker_file_params *wp)
{
	const char *type = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Content-Type");
	const char *lang;
	char err[PROTO_MSG_MAX];

	if (type != NULL && strncmp(type, "application/json", 16) == 0) {
		dg_refuse(req, 400, "Bad Request", "sottod does not fetch "
		    "audio from a URL: send the audio file itself as the body");
		return -1;
	}
	if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) == 0) {
		dg_refuse(req, 400, "Bad Request", "no audio: send the audio "
		    "file as the body of the POST");
		return -1;
	}
	if (core_draining()) {
		dg_refuse(req, 503, "SERVICE_UNAVAILABLE", "sottod is "
		    "stopping");
		return -1;
	}
	if (session_count() >= core_config()->max_sessions) {
		dg_refuse(req, 429, "TOO_MANY_REQUESTS", "all sessions of "
		    "sottod are in use (max_sessions): try again later");
		return -1;
	}
	memset(wp, 0, sizeof(*wp));
	lang = prm->language[0] != '\0' ? prm->language :
	    core_config()->language;
	snprintf(wp->language, sizeof(wp->language), "%s",
	    strcmp(lang, "auto") == 0 ? "" : lang);
	wp->task = SOTTO_TASK_TRANSCRIBE;
	wp->beam_size = core_config()->http_beam_size;
	wp->prompt = prm->prompt[0] != '\0' ? prm->prompt : NULL;
	wp->word_timestamps = 1;	/* Deepgram's words have times */
	if (prm->diarize) {
		if (core_speakers(&wp->speakers, &wp->speakers_vad, err,
		    sizeof(err)) != 0) {
			dg_refuse(req, 503, "SERVICE_UNAVAILABLE", err);
			return -1;
		}
		sotto_diarize_params_init(&wp->diarize);
	}
	return 0;
}

void
dg_file_request(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct worker_file_params wp;
	struct sha256_ctx sha;
	struct dg_params prm;
	struct worker_file *wf;
	struct dg_file *f;
	char msg[PROTO_MSG_MAX];
	size_t len = evbuffer_get_length(in);
	void *data;

	if (dg_check(req, &prm) != 0 || dg_file_check(req, &prm, &wp) != 0)
		return;
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (data = malloc(len)) == NULL) {
		free(f);
		dg_refuse(req, 503, "INTERNAL_SERVER_ERROR", "out of memory");
		return;
	}
	evbuffer_remove(in, data, len);
	sha256_init(&sha);
	sha256_update(&sha, len, data);
	dg_sha256_hex(&sha, f->sha);
	f->prm = prm;
	dg_request_id(f->request_id);
	dg_created(f->created);
	httpd_job_add(&dg_files, &f->job, req, "deepgram", "transcription");
	if ((wf = worker_file_new(dg_next_file++, data, len, &wp,
	    dg_file_done, f, msg)) == NULL) {
		dg_refuse(httpd_job_reply(&f->job), 503,
		    "INTERNAL_SERVER_ERROR", msg);
		httpd_job_replied(&f->job);
		return;
	}
	httpd_job_watch(&f->job, wf);
}

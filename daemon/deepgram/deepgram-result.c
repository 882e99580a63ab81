/*
 * What the connection's session says, as Deepgram's messages.
 *
 * A final (committed words, never revised, with word times from the
 * alignment: the session is opened with word_timestamps) is a Results
 * with is_final true; a partial (the tentative words after the last
 * final, which the next partial replaces) is a Results with is_final
 * false, sent only with interim_results=true and only when its text
 * changed. A partial has no word times of its own: its words get times
 * spread over its span by their length. Each Results covers the audio
 * from the end of the last final to its own end, as Deepgram's do.
 * SpeechStarted comes with the first words heard after an utterance's
 * end; UtteranceEnd when utterance_end_ms of audio have passed after
 * the last final word with nothing tentative.
 */
#include <stdlib.h>
#include <string.h>

#include "deepgram-private.h"

/* Deepgram's word: lower case, without the punctuation around it. */
static char *
dg_plain(const char *w, size_t n)
{
	char *s = malloc(n + 1);
	size_t i, k = 0;
	unsigned char ch;

	if (s == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		ch = (unsigned char)w[i];
		if ((ch >= 'A' && ch <= 'Z'))
			s[k++] = (char)(ch | 0x20);
		else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch >= 0x80 || ch == '\'' || ch == '-')
			s[k++] = (char)ch;
	}
	s[k] = '\0';
	return s;
}

/* Add w (n bytes, Whisper's, blanks trimmed here) over [start, end]. */
void
dg_alt_add(struct dg_alt *a, int punctuate, const char *w, size_t n,
    double start, double end, double conf)
{
	struct json_object *o;
	const char *shown;
	char *plain, *t;
	size_t k;

	while (n > 0 && (*w == ' ' || *w == '\t' || *w == '\n')) {
		w++;
		n--;
	}
	while (n > 0 && (w[n - 1] == ' ' || w[n - 1] == '\n'))
		n--;
	if (n == 0 || (plain = dg_plain(w, n)) == NULL)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "word", json_object_new_string(plain[0] !=
	    '\0' ? plain : ""));
	json_object_object_add(o, "start", dg_seconds(start));
	json_object_object_add(o, "end", dg_seconds(end));
	json_object_object_add(o, "confidence", dg_seconds(conf));
	json_object_object_add(o, "punctuated_word",
	    json_object_new_string_len(w, (int)n));
	json_object_array_add(a->words, o);
	shown = punctuate ? w : plain;
	k = punctuate ? n : strlen(plain);
	if ((t = realloc(a->text, a->len + k + 2)) != NULL) {
		if (a->len > 0)
			t[a->len++] = ' ';
		memcpy(t + a->len, shown, k);
		a->len += k;
		t[a->len] = '\0';
		a->text = t;
	}
	free(plain);
	if (a->n++ == 0)
		a->first = start;
	a->last = end;
	a->conf += conf;
}

/* a's words from the from-th on are speaker's (sotto's 1-based "S1"). */
void
dg_alt_speaker(struct dg_alt *a, size_t from, int speaker)
{
	size_t i, n = json_object_array_length(a->words);

	/* Deepgram's are 0-based */
	for (i = from; i < n; i++)
		json_object_object_add(json_object_array_get_idx(a->words, i),
		    "speaker", json_object_new_int(speaker > 0 ?
		    speaker - 1 : 0));
}

/* Words of text with no times of their own, spread over [start, end]. */
static void
dg_alt_spread(struct dg_alt *a, int punctuate, const char *text,
    double start, double end)
{
	size_t len = strlen(text), at = 0, n;
	double per = len > 0 ? (end - start) / (double)len : 0;

	while (at < len) {
		at += strspn(text + at, " \t\n");
		n = strcspn(text + at, " \t\n");
		if (n == 0)
			break;
		dg_alt_add(a, punctuate, text + at, n, start + per * (double)at,
		    start + per * (double)(at + n), 0.5);
		at += n;
	}
}

/* The alternative as Deepgram's object (a's words taken). */
struct json_object *
dg_alt_object(struct dg_alt *a)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "transcript",
	    json_object_new_string(a->text != NULL ? a->text : ""));
	json_object_object_add(o, "confidence", dg_seconds(a->n > 0 ?
	    a->conf / a->n : 0));
	json_object_object_add(o, "words", a->words);
	free(a->text);
	return o;
}

static double
dg_num(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ?
	    json_object_get_double(v) : 0;
}

static const char *
dg_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) &&
	    json_object_is_type(v, json_type_string) ?
	    json_object_get_string(v) : "";
}

/* A final segment's words (ws, session times moved by off) into a. */
static void
dg_seg_words(struct dg_conn *c, struct json_object *ws, double off,
    struct dg_alt *a)
{
	struct json_object *w;
	double s, e;
	size_t j;
	const char *t;

	for (j = 0; j < json_object_array_length(ws); j++) {
		w = json_object_array_get_idx(ws, j);
		t = dg_str(w, "word");
		/* each final is aligned on its own: its first word may
		   start a little before the last one's end */
		s = off + dg_num(w, "start");
		s = s > c->final_end ? s : c->final_end;
		e = off + dg_num(w, "end");
		dg_alt_add(a, c->prm.punctuate, t, strlen(t), s, e > s ? e : s,
		    dg_num(w, "probability"));
	}
}

/* A final segment's speaker: 1 for "S1", 0 when it has none. */
static int
dg_seg_speaker(struct json_object *seg)
{
	const char *v = dg_str(seg, "speaker");

	return v[0] == 'S' ? atoi(v + 1) : 0;
}

/*
 * A final's segments into a: their words, or their text spread; with
 * diarize, each word with its segment's speaker (the session's label,
 * decided with the final).
 */
static void
dg_final_words(struct dg_conn *c, struct json_object *o, struct dg_alt *a)
{
	struct json_object *segs, *seg, *ws;
	double off = (double)c->base / SOTTO_SAMPLE_RATE;
	size_t i, before;

	if (!json_object_object_get_ex(o, "segments", &segs))
		return;
	for (i = 0; i < json_object_array_length(segs); i++) {
		seg = json_object_array_get_idx(segs, i);
		before = json_object_array_length(a->words);
		if (!json_object_object_get_ex(seg, "words", &ws) ||
		    json_object_array_length(ws) == 0)
			dg_alt_spread(a, c->prm.punctuate, dg_str(seg, "text"),
			    off + dg_num(seg, "start"), off + dg_num(seg, "end"));
		else
			dg_seg_words(c, ws, off, a);
		if (c->prm.diarize)
			dg_alt_speaker(a, before, dg_seg_speaker(seg));
	}
}

/* The first words of an utterance: SpeechStarted, with vad_events. */
static void
dg_speech_started(struct dg_conn *c, const struct dg_alt *a)
{
	if (a->n == 0 || c->speaking)
		return;
	c->speaking = 1;
	if (c->prm.vad_events)
		dg_send_event(c, "SpeechStarted", "timestamp", a->first);
}

/* Whether Whisper's text ends a sentence there. */
static int
dg_sentence_end(const struct dg_alt *a)
{
	char ch = a->len > 0 ? a->text[a->len - 1] : '\0';

	return ch == '.' || ch == '?' || ch == '!';
}

static void
dg_send_results(struct dg_conn *c, struct dg_alt *a, double end, int final,
    int speech_final)
{
	struct json_object *o;
	double start = c->final_end;

	if (end < start)
		end = start;
	o = dg_results(c, start, end, dg_alt_object(a));
	json_object_object_add(o, "is_final", json_object_new_boolean(final));
	json_object_object_add(o, "speech_final",
	    json_object_new_boolean(speech_final));
	json_object_object_add(o, "from_finalize", json_object_new_boolean(
	    final && c->ending == DG_END_FINALIZE));
	dg_send(c, o);
	if (final)
		c->final_end = end;
}

static void
dg_final(struct dg_conn *c, struct json_object *o)
{
	struct dg_alt a = { .words = json_object_new_array() };
	int speech_final;

	dg_final_words(c, o, &a);
	if (a.n == 0 && c->ending != DG_END_FINALIZE) {
		json_object_put(a.words);
		free(a.text);
		return;
	}
	dg_speech_started(c, &a);
	/* the end of what was said: a sentence, or the audio flushed */
	speech_final = c->prm.endpointing_ms >= 0 && a.n > 0 &&
	    (dg_sentence_end(&a) || c->ending != DG_END_NONE);
	if (a.n > 0) {
		c->last_word_end = a.last;
		c->utterance = 1;
	}
	c->tentative = 0;
	free(c->interim);
	c->interim = NULL;
	if (c->ending == DG_END_FINALIZE)
		c->finalized = 1;
	dg_send_results(c, &a, a.n > 0 ? a.last : c->final_end, 1,
	    speech_final);
}

static void
dg_partial(struct dg_conn *c, struct json_object *o)
{
	struct dg_alt a = { .words = json_object_new_array() };
	double off = (double)c->base / SOTTO_SAMPLE_RATE;
	const char *t;

	dg_alt_spread(&a, c->prm.punctuate, dg_str(o, "text"),
	    off + dg_num(o, "start"), off + dg_num(o, "end"));
	t = a.text != NULL ? a.text : "";
	c->tentative = a.n > 0;
	dg_speech_started(c, &a);
	if (!c->prm.interim_results || strcmp(t, c->interim != NULL ?
	    c->interim : "") == 0) {
		json_object_put(a.words);
		free(a.text);
		return;
	}
	free(c->interim);
	c->interim = strdup(t);
	dg_send_results(c, &a, a.n > 0 ? a.last : c->final_end, 0, 0);
}

void
dg_session_event(struct dg_conn *c, const char *json)
{
	struct json_object *o;
	const char *type;

	if ((o = json_tokener_parse(json)) == NULL)
		return;
	type = dg_str(o, "type");
	if (strcmp(type, "final") == 0)
		dg_final(c, o);
	else if (strcmp(type, "partial") == 0)
		dg_partial(c, o);
	else if (strcmp(type, "error") == 0)
		dg_send_error(c, dg_str(o, "code"), dg_str(o, "message"));
	json_object_put(o);
	dg_utterance_check(c, (double)c->fed / SOTTO_SAMPLE_RATE);
}

/* now: seconds of audio received. */
void
dg_utterance_check(struct dg_conn *c, double now)
{
	if (c->prm.utterance_end_ms <= 0 || !c->utterance || c->tentative ||
	    (now - c->last_word_end) * 1000.0 < c->prm.utterance_end_ms)
		return;
	c->utterance = 0;
	c->speaking = 0;
	dg_send_event(c, "UtteranceEnd", "last_word_end", c->last_word_end);
}

/*
 * A Finalize's session has ended: if no final came of it, an empty one
 * says so (from_finalize), as the client waits for one.
 */
void
dg_finalize_done(struct dg_conn *c)
{
	struct dg_alt a = { .words = json_object_new_array() };

	if (!c->finalized)
		dg_send_results(c, &a, c->final_end, 1, 0);
	else {
		json_object_put(a.words);
		free(a.text);
	}
	c->finalized = 0;
	c->speaking = 0;
}

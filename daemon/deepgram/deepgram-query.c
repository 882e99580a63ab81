/*
 * The Deepgram door's input that is text: the query string of the
 * upgrade (docs/http.md, "Deepgram live transcription") and the client's
 * JSON control messages. A bad value of a parameter sottod uses is an
 * error naming it (the upgrade is then answered 400, as Deepgram does);
 * parameters it does not use (smart_format's numerals, tag, ...) are
 * ignored, as Deepgram ignores unknown ones; diarize (or diarize_model,
 * whatever its value: it turns labels on) serves both, utterances and
 * paragraphs pre-recorded audio only.
 * Free of the daemon's state, so tests/fuzz/fuzz-deepgram.c can drive
 * it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "deepgram.h"
#include "proto.h"

#define DG_VALUE_MAX	128	/* a value sottod reads, decoded */
#define DG_JSON_DEPTH	8

void
dg_params_init(struct dg_params *p)
{
	memset(p, 0, sizeof(*p));
	p->encoding = DG_ENC_LINEAR16;
	p->sample_rate = 16000;
	p->channels = 1;
	p->punctuate = 1;		/* Whisper's text is punctuated */
	p->endpointing_ms = 10;		/* Deepgram's default */
}

static int
dg_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * s[0..n) percent-decoded ('+' is a blank) into out (DG_VALUE_MAX
 * bytes, NUL-terminated): 0, or -1 when too long, a bad escape or a NUL.
 */
static int
dg_unescape(const char *s, size_t n, char *out)
{
	size_t i, k = 0;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if (k + 1 >= DG_VALUE_MAX)
			return -1;
		if (s[i] == '+')
			out[k++] = ' ';
		else if (s[i] != '%')
			out[k++] = s[i];
		else {
			if (i + 2 >= n || (hi = dg_hex(s[i + 1])) < 0 ||
			    (lo = dg_hex(s[i + 2])) < 0 || (hi | lo) == 0)
				return -1;
			out[k++] = (char)(hi << 4 | lo);
			i += 2;
		}
	}
	out[k] = '\0';
	return 0;
}

/* A decimal integer in [lo, hi], digits only. */
static int
dg_int(const char *v, long lo, long hi, int *ret)
{
	long x = 0;
	size_t i;

	if (v[0] == '\0' || strlen(v) > 9)
		return -1;
	for (i = 0; v[i] != '\0'; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	if (x < lo || x > hi)
		return -1;
	*ret = (int)x;
	return 0;
}

static int
dg_bool(const char *v, int *ret)
{
	if (strcmp(v, "true") == 0)
		*ret = 1;
	else if (strcmp(v, "false") == 0)
		*ret = 0;
	else
		return -1;
	return 0;
}

static int
dg_encoding(const char *v, struct dg_params *p, char *msg)
{
	static const char *const other[] = { "linear32", "flac", "opus",
	    "ogg-opus", "speex", "amr-nb", "amr-wb", "g729" };
	size_t i;

	if (strcmp(v, "linear16") == 0)
		p->encoding = DG_ENC_LINEAR16;
	else if (strcmp(v, "mulaw") == 0)
		p->encoding = DG_ENC_MULAW;
	else if (strcmp(v, "alaw") == 0)
		p->encoding = DG_ENC_ALAW;
	else {
		for (i = 0; i < sizeof(other) / sizeof(other[0]); i++)
			if (strcmp(v, other[i]) == 0)
				break;
		snprintf(msg, DG_MSG_MAX, "encoding '%.32s' %s: send linear16 "
		    "(16-bit little-endian PCM), mulaw or alaw",
		    v, i < sizeof(other) / sizeof(other[0]) ?
		    "is not one sottod decodes" : "is not an encoding");
		return -1;
	}
	return 0;
}

/*
 * Deepgram's language tags ("en", "en-US", "multi") as Whisper's codes:
 * the primary subtag, lower case; "multi" detects the language.
 */
static int
dg_language(const char *v, struct dg_params *p, char *msg)
{
	size_t n = strcspn(v, "-_"), i;

	if (strcmp(v, "multi") == 0) {
		snprintf(p->language, sizeof(p->language), "auto");
		return 0;
	}
	if (n < 2 || n > 3 || strspn(v, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_0123456789") != strlen(v)) {
		snprintf(msg, DG_MSG_MAX, "language '%.32s' is not a language "
		    "tag (en, en-US, multi)", v);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (v[i] < 'A' || (v[i] > 'Z' && v[i] < 'a') || v[i] > 'z') {
			snprintf(msg, DG_MSG_MAX, "language '%.32s' is not a "
			    "language tag (en, en-US, multi)", v);
			return -1;
		}
		p->language[i] = (char)(v[i] | 0x20);
	}
	p->language[n] = '\0';
	return 0;
}

/* endpointing: false, true (Deepgram's 10 ms) or milliseconds. */
static int
dg_endpointing(const char *v, struct dg_params *p)
{
	if (strcmp(v, "false") == 0)
		p->endpointing_ms = -1;
	else if (strcmp(v, "true") == 0)
		p->endpointing_ms = 10;
	else
		return dg_int(v, 0, 60000, &p->endpointing_ms);
	return 0;
}

/*
 * keywords (Nova-2: "Gutenberg:2", the boost after the colon) and keyterm
 * (Nova-3: a word or phrase), each repeatable: appended to the vocabulary
 * that leads every window's prompt. Whisper has no boost, so it is
 * dropped.
 */
static int
dg_vocabulary(const char *k, const char *v, struct dg_params *p, char *msg)
{
	size_t n = strlen(v), used = strlen(p->prompt);
	const char *colon = strrchr(v, ':');

	if (strcmp(k, "keywords") == 0 && colon != NULL &&
	    strspn(colon + 1, "-+.0123456789") == strlen(colon + 1))
		n = (size_t)(colon - v);
	if (n == 0)
		return 0;
	if (used + (used ? 2 : 0) + n >= sizeof(p->prompt)) {
		snprintf(msg, DG_MSG_MAX, "%s: keywords and keyterms come to "
		    "more than %zu bytes", k, sizeof(p->prompt) - 1);
		return -1;
	}
	snprintf(p->prompt + used, sizeof(p->prompt) - used, "%s%.*s",
	    used ? ", " : "", (int)n, v);
	return 0;
}

/* One parameter sottod reads; unknown keys are not an error. */
static int
dg_param(const char *k, const char *v, struct dg_params *p, char *msg)
{
	int rc = 0;

	if (strcmp(k, "encoding") == 0)
		return dg_encoding(v, p, msg);
	if (strcmp(k, "language") == 0)
		return dg_language(v, p, msg);
	if (strcmp(k, "keywords") == 0 || strcmp(k, "keyterm") == 0)
		return dg_vocabulary(k, v, p, msg);
	if (strcmp(k, "model") == 0)
		/* only echoed: a longer name is cut, not refused */
		snprintf(p->model, sizeof(p->model), "%.*s",
		    (int)sizeof(p->model) - 1, v);
	else if (strcmp(k, "sample_rate") == 0)
		rc = dg_int(v, PROTO_RATE_MIN, PROTO_RATE_MAX, &p->sample_rate);
	else if (strcmp(k, "channels") == 0)
		rc = dg_int(v, 1, PROTO_CHANNELS_MAX, &p->channels);
	else if (strcmp(k, "interim_results") == 0)
		rc = dg_bool(v, &p->interim_results);
	else if (strcmp(k, "punctuate") == 0 || strcmp(k, "smart_format") == 0)
		rc = dg_bool(v, &p->punctuate);
	else if (strcmp(k, "diarize") == 0)
		rc = dg_bool(v, &p->diarize);
	else if (strcmp(k, "diarize_model") == 0)
		p->diarize = 1;	/* Deepgram's newer name: there is one */
	else if (strcmp(k, "utterances") == 0)
		rc = dg_bool(v, &p->utterances);
	else if (strcmp(k, "paragraphs") == 0)
		rc = dg_bool(v, &p->paragraphs);
	else if (strcmp(k, "vad_events") == 0)
		rc = dg_bool(v, &p->vad_events);
	else if (strcmp(k, "endpointing") == 0)
		rc = dg_endpointing(v, p);
	else if (strcmp(k, "utterance_end_ms") == 0)
		rc = dg_int(v, 1, 60000, &p->utterance_end_ms);
	if (rc != 0)
		snprintf(msg, DG_MSG_MAX, "%s '%.32s' must be %s", k, v,
		    strcmp(k, "sample_rate") == 0 ? "a whole number of Hz "
		    "from 1000 to 384000" : strcmp(k, "channels") == 0 ?
		    "from 1 to 32" : strcmp(k, "endpointing") == 0 ?
		    "false or milliseconds (0 to 60000)" :
		    strcmp(k, "utterance_end_ms") == 0 ? "milliseconds (1 "
		    "to 60000)" : "true or false");
	return rc;
}

/* The keys sottod reads: only their values are decoded and checked. */
static int
dg_known(const char *k)
{
	static const char *const keys[] = { "encoding", "language", "model",
	    "sample_rate", "channels", "interim_results", "punctuate",
	    "smart_format", "vad_events", "endpointing", "utterance_end_ms",
	    "keywords", "keyterm", "diarize", "diarize_model", "utterances",
	    "paragraphs" };
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(k, keys[i]) == 0)
			return 1;
	return 0;
}

int
dg_query_parse(const char *q, struct dg_params *p, const char **param,
    char *msg)
{
	static char key[DG_VALUE_MAX];	/* *param, until the next call */
	char val[DG_VALUE_MAX];
	size_t n, eq;

	dg_params_init(p);
	*param = NULL;
	while (q != NULL && *q != '\0') {
		n = strcspn(q, "&");
		eq = strcspn(q, "=");
		if (eq > n)
			eq = n;
		if (n > 0 && dg_unescape(q, eq, key) == 0 && dg_known(key)) {
			*param = key;
			if (dg_unescape(q + eq + (eq < n), n - eq - (eq < n),
			    val) != 0) {
				snprintf(msg, DG_MSG_MAX, "%s: the value is "
				    "too long or badly escaped", key);
				return -1;
			}
			if (dg_param(key, val, p, msg) != 0)
				return -1;
		}
		q += n + (q[n] == '&');
	}
	*param = NULL;
	return 0;
}

int
dg_msg_parse(const uint8_t *buf, size_t len, enum dg_msg_type *ret,
    char *msg)
{
	struct json_object *o, *t;
	const char *type;
	char why[PROTO_MSG_MAX];
	int rc = 0;

	if ((o = proto_json_object(buf, len, DG_JSON_DEPTH, why)) == NULL) {
		snprintf(msg, DG_MSG_MAX, "a text message must be one JSON "
		    "object (%.*s)", DG_MSG_MAX / 2, why);
		return -1;
	}
	type = json_object_object_get_ex(o, "type", &t) &&
	    json_object_is_type(t, json_type_string) ?
	    json_object_get_string(t) : NULL;
	if (type != NULL && strcmp(type, "KeepAlive") == 0)
		*ret = DG_MSG_KEEPALIVE;
	else if (type != NULL && strcmp(type, "Finalize") == 0)
		*ret = DG_MSG_FINALIZE;
	else if (type != NULL && strcmp(type, "CloseStream") == 0)
		*ret = DG_MSG_CLOSE_STREAM;
	else {
		snprintf(msg, DG_MSG_MAX, "type '%.48s' is not a message "
		    "sottod takes (KeepAlive, Finalize, CloseStream; audio "
		    "goes in binary messages)", type != NULL ? type : "");
		rc = -1;
	}
	json_object_put(o);
	return rc;
}

/*
 * The form of the OpenAI audio API's POST requests (docs/http.md): the
 * multipart body split by multipart.c, each field checked (file, model,
 * language, prompt, temperature, response_format,
 * timestamp_granularities[], stream, known_speaker_names[]), unknown
 * fields ignored as OpenAI ignores them (chunking_strategy: sottod
 * always goes through a file in 30 s windows).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "core.h"
#include "http-form.h"

/* A field's value as a string (at most len - 1 bytes); -1 when longer. */
static int
http_field(const struct multipart_part *p, char *buf, size_t len)
{
	if (p->len >= len || memchr(p->data, '\0', p->len) != NULL)
		return -1;
	memcpy(buf, p->data, p->len);
	buf[p->len] = '\0';
	return 0;
}

/*
 * A language the loaded model knows, or "auto" (as ""): an ISO 639-1
 * code, or a BCP 47 tag by its primary subtag ("en-US", "pt_BR": en,
 * pt; any case), as the Wyoming door takes it.
 */
static int
http_language(const char *v, char *out, char *msg, size_t msglen)
{
	char lang[PROTO_LANGUAGE_MAX];
	const char *code;
	size_t k;
	int i, n;

	if (*v == '\0' || strcmp(v, "auto") == 0) {
		*out = '\0';
		return 0;
	}
	for (k = 0; v[k] != '\0' && v[k] != '-' && v[k] != '_' &&
	    k + 1 < sizeof(lang); k++)
		lang[k] = (char)tolower((unsigned char)v[k]);
	lang[k] = '\0';
	n = core_multilingual() ? sotto_language_count(core_model()) : 0;
	for (i = 0; i < n; i++)
		if ((code = sotto_language_code(core_model(), i)) != NULL &&
		    strcmp(code, lang) == 0)
			break;
	if ((!core_multilingual() && strcmp(lang, "en") == 0) || i < n) {
		memcpy(out, lang, k + 1);
		return 0;
	}
	if (!core_multilingual())
		snprintf(msg, msglen, "language: model %s is English-only: "
		    "language must be en (or en-US, en-GB...), not '%.32s'",
		    core_model_name(), v);
	else
		snprintf(msg, msglen, "language: unknown language '%.64s' (an "
		    "ISO 639-1 code such as en or de, or a tag such as en-US)",
		    v);
	return -1;
}

static int
http_temperature(const char *v, float *ret)
{
	char *end;
	float t;

	errno = 0;
	t = strtof(v, &end);
	if (*v == '\0' || *end != '\0' || errno != 0 || !isfinite(t) ||
	    t < 0.0f || t > 1.0f)
		return -1;
	*ret = t;
	return 0;
}

/*
 * known_speaker_names[] names the speakers in order of first appearance
 * (sottod has no voices to match them with: known_speaker_references[]
 * is refused).
 */
static int
http_speaker_name(struct http_form *f, const struct multipart_part *p,
    char *msg, size_t msglen)
{
	struct http_speaker_names *n = &f->names;

	if (n->n == HTTP_SPEAKER_NAMES) {
		snprintf(msg, msglen, "known_speaker_names[]: at most %d "
		    "names", HTTP_SPEAKER_NAMES);
		return -1;
	}
	if (p->len == 0 || http_field(p, n->name[n->n],
	    sizeof(n->name[0])) != 0) {
		snprintf(msg, msglen, "known_speaker_names[]: a name is 1 to "
		    "%d bytes of text", HTTP_SPEAKER_NAME_MAX - 1);
		return -1;
	}
	n->n++;
	return 0;
}

/* One form field into f; -1 with msg. */
static int
http_form_field(struct http_form *f, const struct multipart_part *p,
    int *granularity, char *msg, size_t msglen)
{
	char v[64];

	if (strcmp(p->name, "file") == 0) {
		if (f->file != NULL) {
			snprintf(msg, msglen, "more than one file");
			return -1;
		}
		f->file = p;
		return 0;
	}
	if (strcmp(p->name, "prompt") == 0) {
		if (http_field(p, f->prompt, sizeof(f->prompt)) != 0) {
			snprintf(msg, msglen, "prompt: at most %d bytes of "
			    "text", HTTP_PROMPT_MAX);
			return -1;
		}
		f->p.prompt = f->prompt;
		return 0;
	}
	if (strcmp(p->name, "known_speaker_names[]") == 0 ||
	    strcmp(p->name, "known_speaker_names") == 0)
		return http_speaker_name(f, p, msg, msglen);
	if (strcmp(p->name, "known_speaker_references[]") == 0 ||
	    strcmp(p->name, "known_speaker_references") == 0) {
		snprintf(msg, msglen, "%s: sottod does not match voices to "
		    "reference clips; leave them out (known_speaker_names[] "
		    "alone names the speakers in the order they first speak)",
		    p->name);
		return -1;
	}
	if (strcmp(p->name, "model") != 0 && strcmp(p->name, "language") &&
	    strcmp(p->name, "temperature") && strcmp(p->name,
	    "response_format") && strcmp(p->name, "timestamp_granularities[]")
	    && strcmp(p->name, "stream"))
		return 0;	/* unknown fields are ignored, as OpenAI's */
	if (http_field(p, v, sizeof(v)) != 0) {
		snprintf(msg, msglen, "%.64s: value too long", p->name);
		return -1;
	}
	if (strcmp(p->name, "language") == 0)
		return http_language(v, f->p.language, msg, msglen);
	if (strcmp(p->name, "temperature") == 0) {
		if (http_temperature(v, &f->p.temperature) == 0)
			return 0;
		snprintf(msg, msglen, "temperature: '%s' is not a number "
		    "from 0 to 1", v);
		return -1;
	}
	if (strcmp(p->name, "response_format") == 0) {
		if (http_format_parse(v, &f->format) == 0)
			return 0;
		snprintf(msg, msglen, "response_format: '%s' is not json, "
		    "text, srt, vtt, verbose_json or diarized_json", v);
		return -1;
	}
	if (strcmp(p->name, "timestamp_granularities[]") == 0) {
		if (strcmp(v, "segment") == 0) {
			*granularity |= HTTP_GRAN_SEGMENT;
			return 0;
		}
		if (strcmp(v, "word") == 0) {
			*granularity |= HTTP_GRAN_WORD;
			return 0;
		}
		snprintf(msg, msglen, "timestamp_granularities[]: '%s' is "
		    "not segment or word", v);
		return -1;
	}
	if (strcmp(p->name, "stream") == 0) {
		if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
			snprintf(msg, msglen, "stream: '%s' is not true or "
			    "false", v);
			return -1;
		}
		f->stream = strcmp(v, "true") == 0;
		return 0;
	}
	return 0;	/* model: any name means the loaded model */
}

int
http_form(struct evhttp_request *req, enum sotto_task task,
    struct http_form *f, struct multipart_part *parts, char *msg,
    size_t msglen)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	char boundary[MULTIPART_BOUNDARY_MAX];
	size_t len = evbuffer_get_length(in);
	const uint8_t *body;
	int n, i;

	memset(f, 0, sizeof(*f));
	f->p.task = task;
	f->p.beam_size = core_config()->http_beam_size;
	if (multipart_boundary(evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Content-Type"), boundary,
	    msg, msglen) != 0)
		return -1;
	if ((body = evbuffer_pullup(in, -1)) == NULL && len > 0) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	if ((n = multipart_parse(body, len, boundary, parts, HTTP_FORM_PARTS,
	    msg, msglen)) < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (http_form_field(f, &parts[i], &f->granularity, msg,
		    msglen) != 0) {
			f->param = parts[i].name;
			return -1;
		}
	if (f->file == NULL) {
		f->param = "file";
		snprintf(msg, msglen, "no file: send the audio as the form "
		    "field 'file'");
		return -1;
	}
	if (f->granularity && f->format != HTTP_FORMAT_VERBOSE) {
		f->param = "timestamp_granularities[]";
		snprintf(msg, msglen, "timestamp_granularities[] needs "
		    "response_format verbose_json");
		return -1;
	}
	if (f->format == HTTP_FORMAT_DIARIZED &&
	    task == SOTTO_TASK_TRANSLATE) {
		f->param = "response_format";
		snprintf(msg, msglen, "response_format: diarized_json is for "
		    "transcriptions (translations have no speakers)");
		return -1;
	}
	/* OpenAI's default: segments; words only when asked for */
	if (f->granularity == 0)
		f->granularity = HTTP_GRAN_SEGMENT;
	/* speaker labels are decided word by word */
	f->p.word_timestamps = (f->granularity & HTTP_GRAN_WORD) != 0 ||
	    f->format == HTTP_FORMAT_DIARIZED;
	if (f->stream && task == SOTTO_TASK_TRANSLATE) {
		f->param = "stream";
		snprintf(msg, msglen, "stream: translations are not streamed "
		    "(OpenAI's are not either); leave stream out");
		return -1;
	}
	if (task == SOTTO_TASK_TRANSLATE && !core_multilingual()) {
		snprintf(msg, msglen, "model %s is English-only: it cannot "
		    "translate", core_model_name());
		return -1;
	}
	return 0;
}

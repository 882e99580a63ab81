/*
 * A transcript in each response_format of OpenAI's audio API: json,
 * verbose_json and diarized_json (json-c), text, and srt and vtt as
 * `sotto transcribe -f srt|vtt` writes them (common/output.c).
 * docs/http.md shows them.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "http.h"
#include "httpd.h"
#include "output.h"
#include "worker.h"

static const char *const http_format_names[] = {
	"json", "text", "srt", "vtt", "verbose_json", "diarized_json",
};

int
http_format_parse(const char *s, enum http_format *ret)
{
	size_t i;

	for (i = 0; i < sizeof(http_format_names) /
	    sizeof(http_format_names[0]); i++)
		if (strcmp(s, http_format_names[i]) == 0) {
			*ret = (enum http_format)i;
			return 0;
		}
	return -1;
}

/* The transcript: the segments' text, without outer blanks. */
char *
http_text(const struct sotto_result *res)
{
	size_t len = 0, a, b;
	char *text, *p;
	int i;

	for (i = 0; i < res->n_segments; i++)
		len += strlen(res->segments[i].text);
	if ((text = p = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0; i < res->n_segments; i++)
		p = stpcpy(p, res->segments[i].text);
	for (a = 0; isspace((unsigned char)text[a]); a++)
		;
	for (b = len; b > a && isspace((unsigned char)text[b - 1]); b--)
		;
	memmove(text, text + a, b - a);
	text[b - a] = '\0';
	return text;
}

/*
 * A time in seconds as JSON, rounded to milliseconds in the text itself
 * ("0.76", not json-c's 17 digits "0.76000000000000001"); the number
 * read back is the nearest double to it, as round(x * 1000) / 1000.
 */
static struct json_object *
http_seconds(double x)
{
	char buf[32];
	size_t n;

	x = round(x * 1000.0) / 1000.0;
	n = (size_t)snprintf(buf, sizeof(buf), "%.3f", x);
	if (n >= sizeof(buf) || !isfinite(x))
		return json_object_new_double(x);
	while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
		buf[--n] = '\0';
	return json_object_new_double_s(x, buf);
}

/* OpenAI's usage of a transcription billed by duration. */
struct json_object *
http_usage(const struct worker_file *f)
{
	struct json_object *u = json_object_new_object();

	json_object_object_add(u, "type", json_object_new_string("duration"));
	json_object_object_add(u, "seconds",
	    json_object_new_int((int)ceil(f->duration)));
	return u;
}

static struct json_object *
http_segment(const struct sotto_segment *s, int id)
{
	struct json_object *o = json_object_new_object(), *tok;
	int i;

	json_object_object_add(o, "id", json_object_new_int(id));
	json_object_object_add(o, "seek", json_object_new_int(
	    (int)lround(s->start * 100.0)));
	json_object_object_add(o, "start", http_seconds(s->start));
	json_object_object_add(o, "end", http_seconds(s->end));
	json_object_object_add(o, "text", json_object_new_string(s->text));
	tok = json_object_new_array_ext(s->n_tokens);
	for (i = 0; i < s->n_tokens; i++)
		json_object_array_add(tok, json_object_new_int(s->tokens[i]));
	json_object_object_add(o, "tokens", tok);
	json_object_object_add(o, "temperature",
	    json_object_new_double(s->temperature));
	json_object_object_add(o, "avg_logprob",
	    json_object_new_double(s->avg_logprob));
	json_object_object_add(o, "compression_ratio",
	    json_object_new_double(s->compression_ratio));
	json_object_object_add(o, "no_speech_prob",
	    json_object_new_double(s->no_speech_prob));
	return o;
}

/*
 * The words of all segments in one array, as OpenAI's: word (without
 * its blanks), start, end.
 */
static struct json_object *
http_words(const struct sotto_result *res)
{
	struct json_object *a = json_object_new_array(), *o;
	const struct sotto_word *w;
	size_t b, e;
	int i, k;

	for (i = 0; i < res->n_segments; i++)
		for (k = 0; k < res->segments[i].n_words; k++) {
			w = &res->segments[i].words[k];
			for (b = 0; isspace((unsigned char)w->word[b]); b++)
				;
			for (e = strlen(w->word); e > b &&
			    isspace((unsigned char)w->word[e - 1]); e--)
				;
			o = json_object_new_object();
			json_object_object_add(o, "word",
			    json_object_new_string_len(w->word + b,
			    (int)(e - b)));
			json_object_object_add(o, "start",
			    http_seconds(w->start));
			json_object_object_add(o, "end", http_seconds(w->end));
			json_object_array_add(a, o);
		}
	return a;
}

/*
 * A speaker as OpenAI labels them: known_speaker_names[] for the first
 * ones, else letters by number (A, B, ..., Z, AA, AB, ...). A segment
 * without a label (no words) is the first speaker's: the field is
 * required.
 */
static void
http_speaker_label(int speaker, const struct http_speaker_names *names,
    char *buf, size_t len)
{
	char tmp[16];
	size_t n = 0, i;
	int k;

	if (speaker < 1)
		speaker = 1;
	if (names != NULL && speaker <= names->n) {
		snprintf(buf, len, "%s", names->name[speaker - 1]);
		return;
	}
	for (k = speaker; k > 0 && n < sizeof(tmp); k = (k - 1) / 26)
		tmp[n++] = (char)('A' + (k - 1) % 26);
	for (i = 0; i < n && i + 1 < len; i++)
		buf[i] = tmp[n - 1 - i];
	buf[i] = '\0';
}

struct json_object *
http_diarized_segment(const struct sotto_segment *s, int i,
    const struct http_speaker_names *names)
{
	struct json_object *o = json_object_new_object();
	char id[24], who[HTTP_SPEAKER_NAME_MAX];
	size_t a, b;

	snprintf(id, sizeof(id), "seg_%d", i);
	http_speaker_label(s->speaker, names, who, sizeof(who));
	for (a = 0; isspace((unsigned char)s->text[a]); a++)
		;
	for (b = strlen(s->text); b > a &&
	    isspace((unsigned char)s->text[b - 1]); b--)
		;
	json_object_object_add(o, "type",
	    json_object_new_string("transcript.text.segment"));
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "start", http_seconds(s->start));
	json_object_object_add(o, "end", http_seconds(s->end));
	json_object_object_add(o, "text",
	    json_object_new_string_len(s->text + a, (int)(b - a)));
	json_object_object_add(o, "speaker", json_object_new_string(who));
	return o;
}

/* diarized_json: OpenAI's TranscriptionDiarized. */
static struct json_object *
http_diarized(const struct worker_file *f, const char *text,
    const struct http_speaker_names *names)
{
	struct json_object *o = json_object_new_object(), *segs;
	int i;

	json_object_object_add(o, "task", json_object_new_string("transcribe"));
	json_object_object_add(o, "duration", http_seconds(f->duration));
	json_object_object_add(o, "text", json_object_new_string(text));
	segs = json_object_new_array_ext(f->res->n_segments);
	for (i = 0; i < f->res->n_segments; i++)
		json_object_array_add(segs, http_diarized_segment(
		    &f->res->segments[i], i, names));
	json_object_object_add(o, "segments", segs);
	json_object_object_add(o, "usage", http_usage(f));
	return o;
}

/* json and verbose_json (with segments, words or both). */
static struct json_object *
http_json(enum http_format format, enum sotto_task task, int segments,
    int words, const struct worker_file *f, const char *text)
{
	struct json_object *o = json_object_new_object(), *segs;
	int i;

	if (format == HTTP_FORMAT_VERBOSE) {
		json_object_object_add(o, "task", json_object_new_string(
		    task == SOTTO_TASK_TRANSLATE ? "translate" :
		    "transcribe"));
		json_object_object_add(o, "language", json_object_new_string(
		    f->res->language != NULL ?
		    http_language_name(f->res->language) : ""));
		json_object_object_add(o, "duration",
		    http_seconds(f->duration));
	}
	json_object_object_add(o, "text", json_object_new_string(text));
	if (format == HTTP_FORMAT_VERBOSE && words)
		json_object_object_add(o, "words", http_words(f->res));
	if (format == HTTP_FORMAT_VERBOSE && segments) {
		segs = json_object_new_array_ext(f->res->n_segments);
		for (i = 0; i < f->res->n_segments; i++)
			json_object_array_add(segs,
			    http_segment(&f->res->segments[i], i));
		json_object_object_add(o, "segments", segs);
	}
	json_object_object_add(o, "usage", http_usage(f));
	return o;
}

/* text, srt and vtt, as `sotto transcribe -f txt|srt|vtt` would. */
static void
http_reply_text(struct evhttp_request *req, enum http_format format,
    const struct worker_file *f, const char *text)
{
	struct evbuffer *b = evbuffer_new();
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;

	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	if (b == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	if (format == HTTP_FORMAT_TEXT)
		evbuffer_add_printf(b, "%s\n", text);
	else if ((fp = open_memstream(&buf, &len)) != NULL) {
		output_write(fp, format == HTTP_FORMAT_SRT ? OUTPUT_SRT :
		    OUTPUT_VTT, NULL, "upload", f->duration, f->res, 1);
		if (fclose(fp) == 0)
			evbuffer_add(b, buf, len);
		free(buf);
	}
	httpd_count_reply(HTTP_OK);
	evhttp_send_reply(req, HTTP_OK, NULL, b);
	evbuffer_free(b);
}

void
http_reply_transcript(struct evhttp_request *req, enum http_format format,
    enum sotto_task task, int segments, int words,
    const struct http_speaker_names *names, const struct worker_file *f)
{
	char *text;

	if ((text = http_text(f->res)) == NULL) {
		httpd_reply_error(req, 500, "server_error", NULL,
		    "out of memory");
		return;
	}
	if (format == HTTP_FORMAT_DIARIZED)
		httpd_reply_object(req, HTTP_OK, http_diarized(f, text, names));
	else if (format == HTTP_FORMAT_JSON || format == HTTP_FORMAT_VERBOSE)
		httpd_reply_object(req, HTTP_OK, http_json(format, task,
		    segments, words, f, text));
	else
		http_reply_text(req, format, f, text);
	free(text);
}

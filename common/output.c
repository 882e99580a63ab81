/*
 * Transcript writers: plain text, JSON (one object per file and line),
 * SubRip, WebVTT, openai-whisper's TSV and LRC lyrics.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "output.h"

static const char *const format_names[] = {
	"txt", "json", "srt", "vtt", "tsv", "lrc", "all",
};

int
output_format_parse(const char *s, enum output_format *ret)
{
	size_t i;

	for (i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++)
		if (strcmp(s, format_names[i]) == 0) {
			*ret = (enum output_format)i;
			return 0;
		}
	return -1;
}

const char *
output_format_name(enum output_format fmt)
{
	return (size_t)fmt < sizeof(format_names) / sizeof(format_names[0]) ?
	    format_names[fmt] : "?";
}

/* The text without leading or trailing white space, as printf args. */
static int
trimmed(const char *s, const char **ret)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	*ret = s;
	return (int)n;
}

static void
timestamp(char *buf, size_t len, double t, char frac_sep)
{
	long ms = lround(t * 1000.0);

	snprintf(buf, len, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000,
	    ms / 60000 % 60, ms / 1000 % 60, frac_sep, ms % 1000);
}

/* The speaker before a cue's text: srt "[S1] ", vtt "<v S1>". */
void
output_cue_speaker(FILE *f, int speaker, int srt)
{
	if (speaker <= 0)
		return;
	if (srt)
		fprintf(f, "[S%d] ", speaker);
	else
		fprintf(f, "<v S%d>", speaker);
}

static void
write_cues(FILE *f, const struct sotto_result *r, int srt)
{
	char a[32], b[32];
	const char *text;
	int i, n;

	if (!srt)
		fprintf(f, "WEBVTT\n\n");
	for (i = 0; i < r->n_segments; i++) {
		timestamp(a, sizeof(a), r->segments[i].start, srt ? ',' : '.');
		timestamp(b, sizeof(b), r->segments[i].end, srt ? ',' : '.');
		n = trimmed(r->segments[i].text, &text);
		if (srt)
			fprintf(f, "%d\n", i + 1);
		fprintf(f, "%s --> %s\n", a, b);
		output_cue_speaker(f, r->segments[i].speaker, srt);
		fprintf(f, "%.*s\n\n", n, text);
	}
}

/*
 * A line per segment; with speaker labels a line per turn instead: "S1: "
 * and the segments up to the next change of speaker.
 */
static void
write_txt(FILE *f, const char *file, const struct sotto_result *r,
    int n_files)
{
	const struct sotto_segment *s;
	const char *text;
	int i, n;

	if (n_files > 1)
		fprintf(f, "==> %s <==\n", file);
	for (i = 0; i < r->n_segments; i++) {
		s = &r->segments[i];
		n = trimmed(s->text, &text);
		if (s->speaker <= 0) {
			fprintf(f, "%.*s\n", n, text);
			continue;
		}
		if (i == 0 || s->speaker != s[-1].speaker)
			fprintf(f, "S%d: ", s->speaker);
		else
			fputc(' ', f);
		fprintf(f, "%.*s", n, text);
		if (i + 1 == r->n_segments || s[1].speaker != s->speaker)
			fputc('\n', f);
	}
}

static json_object *
json_speaker(int speaker)
{
	char name[16];

	snprintf(name, sizeof(name), "S%d", speaker);
	return json_object_new_string(name);
}

/*
 * openai-whisper's tsv: a header, then start and end in whole
 * milliseconds and the text, tabs in it made spaces so that it stays one
 * column.
 */
static void
write_tsv(FILE *f, const struct sotto_result *r)
{
	const char *text;
	int i, j, n;

	fputs("start\tend\ttext\n", f);
	for (i = 0; i < r->n_segments; i++) {
		n = trimmed(r->segments[i].text, &text);
		fprintf(f, "%ld\t%ld\t", lround(r->segments[i].start * 1000.0),
		    lround(r->segments[i].end * 1000.0));
		for (j = 0; j < n; j++)
			fputc(text[j] == '\t' ? ' ' : text[j], f);
		fputc('\n', f);
	}
}

/*
 * LRC, as whisper.cpp writes it: a [by:] tag, then each segment on a
 * line of its own after its start as [minutes:seconds.hundredths] (the
 * minutes go past 99 on long files rather than wrap). A line break in a
 * segment would start a line without a time: it becomes a space.
 */
static void
write_lrc(FILE *f, const struct sotto_result *r)
{
	const char *text;
	long cs;
	int i, j, n;

	fputs("[by:sotto]\n", f);
	for (i = 0; i < r->n_segments; i++) {
		cs = lround(r->segments[i].start * 100.0);
		n = trimmed(r->segments[i].text, &text);
		fprintf(f, "[%02ld:%02ld.%02ld]", cs / 6000, cs / 100 % 60,
		    cs % 100);
		for (j = 0; j < n; j++)
			fputc(text[j] == '\n' || text[j] == '\r' ? ' ' :
			    text[j], f);
		fputc('\n', f);
	}
}

/* faster-whisper's Word fields: word, start, end, probability. */
static json_object *
json_words(const struct sotto_segment *s)
{
	json_object *a = json_object_new_array_ext(s->n_words), *w;
	int i;

	for (i = 0; i < s->n_words; i++) {
		w = json_object_new_object();
		json_object_object_add(w, "word",
		    json_object_new_string(s->words[i].word));
		json_object_object_add(w, "start", json_object_new_double(
		    round(s->words[i].start * 1000.0) / 1000.0));
		json_object_object_add(w, "end", json_object_new_double(
		    round(s->words[i].end * 1000.0) / 1000.0));
		json_object_object_add(w, "probability",
		    json_object_new_double(s->words[i].probability));
		if (s->words[i].speaker > 0)
			json_object_object_add(w, "speaker",
			    json_speaker(s->words[i].speaker));
		json_object_array_add(a, w);
	}
	return a;
}

static json_object *
json_segment(const struct sotto_segment *s, int id)
{
	json_object *o = json_object_new_object(), *tok;
	int i;

	json_object_object_add(o, "id", json_object_new_int(id));
	json_object_object_add(o, "start", json_object_new_double(
	    round(s->start * 1000.0) / 1000.0));
	json_object_object_add(o, "end", json_object_new_double(
	    round(s->end * 1000.0) / 1000.0));
	json_object_object_add(o, "text", json_object_new_string(s->text));
	tok = json_object_new_array_ext(s->n_tokens);
	for (i = 0; i < s->n_tokens; i++)
		json_object_array_add(tok, json_object_new_int(s->tokens[i]));
	json_object_object_add(o, "tokens", tok);
	json_object_object_add(o, "avg_logprob",
	    json_object_new_double(s->avg_logprob));
	json_object_object_add(o, "no_speech_prob",
	    json_object_new_double(s->no_speech_prob));
	json_object_object_add(o, "temperature",
	    json_object_new_double(s->temperature));
	json_object_object_add(o, "compression_ratio",
	    json_object_new_double(s->compression_ratio));
	if (s->speaker > 0)
		json_object_object_add(o, "speaker", json_speaker(s->speaker));
	if (s->words != NULL)
		json_object_object_add(o, "words", json_words(s));
	return o;
}

static int
write_json(FILE *f, const char *file, double duration,
    const struct sotto_result *r)
{
	json_object *o = json_object_new_object(), *segs;
	size_t len = 0;
	char *text, *p;
	int i, rc;

	for (i = 0; i < r->n_segments; i++)
		len += strlen(r->segments[i].text);
	if ((text = p = malloc(len + 1)) == NULL) {
		json_object_put(o);
		return -1;
	}
	segs = json_object_new_array_ext(r->n_segments);
	for (i = 0; i < r->n_segments; i++) {
		p = stpcpy(p, r->segments[i].text);
		json_object_array_add(segs, json_segment(&r->segments[i], i));
	}
	*p = '\0';
	json_object_object_add(o, "file", json_object_new_string(file));
	json_object_object_add(o, "language",
	    json_object_new_string(r->language));
	json_object_object_add(o, "duration", json_object_new_double(
	    round(duration * 1000.0) / 1000.0));
	json_object_object_add(o, "text", json_object_new_string(text));
	json_object_object_add(o, "segments", segs);
	free(text);
	rc = fprintf(f, "%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return rc < 0 ? -1 : 0;
}

int
output_write(FILE *f, enum output_format fmt, const struct output_opts *o,
    const char *file, double duration, const struct sotto_result *r,
    int n_files)
{
	static const struct output_opts segment_cues;

	if (o == NULL)
		o = &segment_cues;
	switch (fmt) {
	case OUTPUT_TXT:
		write_txt(f, file, r, n_files);
		break;
	case OUTPUT_JSON:
		return write_json(f, file, duration, r);
	case OUTPUT_SRT:
	case OUTPUT_VTT:
		if (r->n_segments > 0 && r->segments[0].words != NULL)
			subtitles_write_words(f, r, fmt == OUTPUT_SRT, o);
		else
			write_cues(f, r, fmt == OUTPUT_SRT);
		break;
	case OUTPUT_TSV:
		write_tsv(f, r);
		break;
	case OUTPUT_LRC:
		write_lrc(f, r);
		break;
	case OUTPUT_ALL:
		errno = EINVAL;		/* a file per format: the caller's */
		return -1;
	}
	return ferror(f) ? -1 : 0;
}

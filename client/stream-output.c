/*
 * Printing daemon events: text, jsonl (each event exactly as received),
 * SRT and WebVTT. From a sottod that sends caption units (its hello says
 * "units"), text is one line per closed unit (on a terminal the open
 * unit is redrawn in place, its committed words plain and the tentative
 * ones dimmed) and each closed unit is a cue; from an older one, each
 * final is a line and each final segment a cue, the partial dimmed.
 *
 * With speaker labels (OPEN diarize) a unit is one speaker's: text starts
 * a line with "S1: " at each change of speaker, as sotto transcribe
 * --diarize's txt starts a turn; a vtt cue opens with a voice span
 * (<v S1>), an srt cue with "[S1] ", as transcribe's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <json-c/json.h>

#include "stream.h"

int
stream_output_format(const char *s, enum stream_format *ret)
{
	static const char *const names[] = { "text", "jsonl", "srt", "vtt" };
	int i;

	for (i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum stream_format)i;
			return 0;
		}
	if (strcmp(s, "txt") == 0) {
		*ret = STREAM_TEXT;
		return 0;
	}
	return -1;
}

void
stream_output_init(struct stream_output *o, FILE *f, enum stream_format fmt)
{
	memset(o, 0, sizeof(*o));
	o->f = f;
	o->format = fmt;
	o->tty = isatty(fileno(f));
	o->last_unit = -1;
	if (fmt == STREAM_VTT)
		fputs("WEBVTT\n\n", f);
}

FILE *
stream_output_open(const char *path, const char *cmd)
{
	FILE *f;

	if (path == NULL || strcmp(path, "-") == 0)
		return stdout;
	if ((f = fopen(path, "w")) == NULL)
		fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path,
		    strerror(errno));
	return f;
}

static const char *
stream_output_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return "";
	return json_object_get_string(v);
}

static double
stream_output_num(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	return json_object_get_double(v);
}

void
stream_output_clear(struct stream_output *o)
{
	if (o->partial_shown) {
		fputs("\r\033[K", o->f);
		o->partial_shown = 0;
	}
}

/* Text without its leading blank (Whisper words start with one). */
static const char *
stream_output_trim(const char *s)
{
	while (*s == ' ')
		s++;
	return s;
}

static void
stream_output_time(FILE *f, double t, char sep)
{
	long ms = (long)(t * 1000 + 0.5);

	if (ms < 0)
		ms = 0;
	fprintf(f, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60,
	    ms / 1000 % 60, sep, ms % 1000);
}

/* A unit's or segment's "speaker" ("" without one). */
static const char *
stream_output_speaker(struct json_object *o)
{
	const char *s = stream_output_str(o, "speaker");

	return s != NULL ? s : "";
}

/* text: "S1: " when the speaker is not the last line's. */
static void
stream_output_turn(struct stream_output *o, struct json_object *u)
{
	const char *spk = stream_output_speaker(u);

	if (*spk == '\0' || strcmp(spk, o->speaker) == 0)
		return;
	fprintf(o->f, "%s: ", spk);
	snprintf(o->speaker, sizeof(o->speaker), "%s", spk);
}

static void
stream_output_cue(struct stream_output *o, struct json_object *seg)
{
	const char *spk = stream_output_speaker(seg);
	char sep = o->format == STREAM_SRT ? ',' : '.';

	o->cue++;
	if (o->format == STREAM_SRT)
		fprintf(o->f, "%d\n", o->cue);
	stream_output_time(o->f, o->time_offset + stream_output_num(seg,
	    "start"), sep);
	fputs(" --> ", o->f);
	stream_output_time(o->f, o->time_offset + stream_output_num(seg,
	    "end"), sep);
	fputc('\n', o->f);
	if (*spk != '\0')
		fprintf(o->f, o->format == STREAM_SRT ? "[%s] " : "<v %s>",
		    spk);
	fprintf(o->f, "%s\n\n", stream_output_trim(stream_output_str(seg,
	    "text")));
}

/* Columns of the terminal, less one so that \r can redraw the line. */
static int
stream_output_width(const struct stream_output *o)
{
	struct winsize ws;

	if (ioctl(fileno(o->f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		return ws.ws_col - 1;
	return 79;
}

/* Characters (UTF-8 sequences) in s. */
static int
stream_output_chars(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* s after its first n characters. */
static const char *
stream_output_skip(const char *s, int n)
{
	while (*s != '\0' && n > 0) {
		s++;
		if (((unsigned char)*s & 0xc0) != 0x80)
			n--;
	}
	return s;
}

/*
 * The open unit, redrawn in place: as much of its end as fits one line
 * (a line that wrapped could not be redrawn), the newest words last.
 */
static void
stream_output_open_unit(struct stream_output *o, const char *text,
    const char *tentative)
{
	int over, nt;

	stream_output_clear(o);
	text = stream_output_trim(text);
	if (*text == '\0')
		tentative = stream_output_trim(tentative);
	if (*text == '\0' && *tentative == '\0')
		return;
	nt = stream_output_chars(text);
	over = nt + stream_output_chars(tentative) - stream_output_width(o);
	if (over > 0) {
		text = stream_output_skip(text, over);
		tentative = stream_output_skip(tentative, over - nt);
	}
	fprintf(o->f, "%s\033[2m%s\033[0m", text, tentative);
	o->partial_shown = 1;
}

/* A unit: closed, a line or a cue; open, redrawn on a terminal. */
static void
stream_output_unit(struct stream_output *o, struct json_object *ev)
{
	struct json_object *v;
	int64_t id;

	if (!json_object_get_boolean(json_object_object_get(ev, "closed"))) {
		if (o->format == STREAM_TEXT && o->tty)
			stream_output_open_unit(o, stream_output_str(ev,
			    "text"), stream_output_str(ev, "tentative"));
		return;
	}
	id = json_object_object_get_ex(ev, "id", &v) ?
	    json_object_get_int64(v) : -1;
	if (id <= o->last_unit)
		return;		/* a resume sent it again */
	o->last_unit = id;
	stream_output_clear(o);
	if (o->format == STREAM_TEXT) {
		stream_output_turn(o, ev);
		fprintf(o->f, "%s\n", stream_output_trim(stream_output_str(ev,
		    "text")));
	} else
		stream_output_cue(o, ev);
}

static void
stream_output_final(struct stream_output *o, struct json_object *ev)
{
	struct json_object *segs, *seg;
	size_t i, n;
	int any = 0;

	if (!json_object_object_get_ex(ev, "segments", &segs) ||
	    !json_object_is_type(segs, json_type_array))
		return;
	n = json_object_array_length(segs);
	stream_output_clear(o);
	for (i = 0; i < n; i++) {
		seg = json_object_array_get_idx(segs, i);
		if (o->format != STREAM_TEXT) {
			stream_output_cue(o, seg);
			continue;
		}
		if (strcmp(stream_output_speaker(seg), o->speaker) != 0 &&
		    any) {
			fputc('\n', o->f);
			any = 0;
		}
		if (!any)
			stream_output_turn(o, seg);
		fprintf(o->f, "%s%s", any ? " " : "", stream_output_trim(
		    stream_output_str(seg, "text")));
		any = 1;
	}
	if (o->format == STREAM_TEXT && any)
		fputc('\n', o->f);
}

static void
stream_output_partial(struct stream_output *o, struct json_object *ev)
{
	const char *text = stream_output_trim(stream_output_str(ev, "text"));

	if (o->format != STREAM_TEXT || !o->tty)
		return;
	stream_output_clear(o);
	if (*text != '\0') {
		/* Dimmed, and cut to one line so \r can redraw it. */
		fprintf(o->f, "\033[2m%.*s\033[0m", 200, text);
		o->partial_shown = 1;
	}
}

static void
stream_output_other(struct stream_output *o, const char *type,
    struct json_object *ev)
{
	if (strcmp(type, "end") == 0) {
		o->ended = 1;
		o->undecoded_s = stream_output_num(ev, "undecoded_s");
		if (o->undecoded_s > 0) {
			stream_output_clear(o);
			fprintf(stderr, "sotto: sottod stopped before "
			    "transcribing the last %.1f s of the %.1f s of "
			    "audio it received\n", o->undecoded_s,
			    stream_output_num(ev, "audio_s"));
		}
	} else if (strcmp(type, "error") == 0) {
		stream_output_clear(o);
		fprintf(stderr, "sotto: sottod: %s: %s\n",
		    stream_output_str(ev, "code"),
		    stream_output_str(ev, "message"));
		o->failed = 1;
	} else if (strcmp(type, "overload") == 0) {
		stream_output_clear(o);
		fprintf(stderr, "sotto: sottod fell behind and skipped %s s "
		    "of audio\n", stream_output_str(ev, "dropped_s"));
	} else if (strcmp(type, "language") == 0 &&
	    json_object_get_boolean(json_object_object_get(ev, "settled")) &&
	    o->format != STREAM_JSONL) {
		stream_output_clear(o);
		fprintf(stderr, "sotto: language %s (probability %s)\n",
		    stream_output_str(ev, "language"),
		    stream_output_str(ev, "probability"));
	} else if (strcmp(type, "opened") == 0 ||
	    strcmp(type, "subscribed") == 0) {
		/* a new session (the old one was lost) counts units anew */
		if (strcmp(o->session, stream_output_str(ev, "session")) != 0)
			o->last_unit = -1;
		snprintf(o->session, sizeof(o->session), "%s",
		    stream_output_str(ev, "session"));
	}
}

/* Every "start" and "end" number in v and below it, plus dt. */
static void
stream_output_shift(struct json_object *v, double dt)
{
	struct json_object_iterator it, last;
	struct json_object *x;
	const char *key;
	size_t i;

	if (json_object_is_type(v, json_type_array)) {
		for (i = 0; i < json_object_array_length(v); i++)
			stream_output_shift(json_object_array_get_idx(v, i), dt);
		return;
	}
	if (!json_object_is_type(v, json_type_object))
		return;
	it = json_object_iter_begin(v);
	last = json_object_iter_end(v);
	for (; !json_object_iter_equal(&it, &last); json_object_iter_next(&it)) {
		key = json_object_iter_peek_name(&it);
		x = json_object_iter_peek_value(&it);
		if ((strcmp(key, "start") == 0 || strcmp(key, "end") == 0) &&
		    json_object_is_type(x, json_type_double))
			json_object_set_double(x, json_object_get_double(x) + dt);
		else if ((strcmp(key, "start") == 0 || strcmp(key, "end") ==
		    0) && json_object_is_type(x, json_type_int))
			/* replaces the value in its entry: the key stays */
			json_object_object_add(v, key, json_object_new_double(
			    (double)json_object_get_int64(x) + dt));
		else
			stream_output_shift(x, dt);
	}
}

/* jsonl: the event as sent, or with its times on the input's clock. */
static void
stream_output_line(struct stream_output *o, const char *json, size_t len,
    struct json_object *ev)
{
	if (ev != NULL && o->time_offset != 0) {
		stream_output_shift(ev, o->time_offset);
		fputs(json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN),
		    o->f);
	} else
		fwrite(json, 1, len, o->f);
	fputc('\n', o->f);
}

/*
 * Everything printed so far out to the file, or the reason it could not
 * be (a failed flush drops what it held: the first reason is kept).
 */
static void
stream_output_flush(struct stream_output *o)
{
	int before = errno;

	if (o->werr != 0)
		return;
	errno = 0;
	if (fflush(o->f) != 0 || ferror(o->f))
		o->werr = errno != 0 ? errno : before != 0 ? before : EIO;
}

void
stream_output_event(struct stream_output *o, const char *json, size_t len)
{
	struct json_object *ev;
	const char *type;

	errno = 0;
	ev = json_tokener_parse(json);
	if (o->format == STREAM_JSONL)
		stream_output_line(o, json, len, ev);
	if (ev == NULL) {
		fprintf(stderr, "sotto: sottod sent an event that is not "
		    "JSON\n");
		o->failed = 1;
		return;
	}
	type = stream_output_str(ev, "type");
	if (strcmp(type, "hello") == 0)
		o->units = json_object_get_boolean(json_object_object_get(ev,
		    "units"));
	if (o->format != STREAM_JSONL && o->units) {
		if (strcmp(type, "unit") == 0)
			stream_output_unit(o, ev);
	} else if (o->format != STREAM_JSONL) {
		if (strcmp(type, "final") == 0)
			stream_output_final(o, ev);
		else if (strcmp(type, "partial") == 0)
			stream_output_partial(o, ev);
	}
	stream_output_other(o, type, ev);
	json_object_put(ev);
	stream_output_flush(o);
}

void
stream_output_done(struct stream_output *o)
{
	errno = 0;
	stream_output_clear(o);
	stream_output_flush(o);
}

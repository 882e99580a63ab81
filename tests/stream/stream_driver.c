/*
 * stream-driver: feed an audio file through the sotto_stream_* API as a
 * live source would, and print what the stream reports as JSON lines.
 *
 *	stream-driver [-s step_ms] [-c chunk_ms] [-l lang] [-b beams]
 *	    [-t threads] [-v VAD.gguf] [-P ms] [-r] [-w] MODEL.gguf FILE|-
 *	stream-driver -B [options] MODEL.gguf FILE...
 *
 * FILE is any file common/audio.c reads (resampled to 16 kHz mono), or "-"
 * for raw s16le 16 kHz mono on standard input. Audio goes in chunk_ms
 * pieces (default 100); whenever sotto_stream_due() says so the driver
 * steps, and at the end it finishes. With -j SEED it steps after an
 * uneven 1-8 steps of audio each time (as sottod steps an overloaded
 * live stream), drawn from SEED. With -r it sleeps to pace the
 * audio as live; with -v the stream has that Silero VAD; with -w finals
 * have words (word timestamps); -p TEXT is the stream's vocabulary
 * (sotto_stream_params.prompt). Lines:
 *	{"type":"final","id":N,"start":S,"end":E,"text":T,"audio_time":A,
 *	    "words":[{"word":W,"start":S,"end":E,"probability":P}] (-w)}
 *	{"type":"partial","text":T,"start":S,"end":E,"audio_time":A}
 *	{"type":"step","audio_time":A,"compute_ms":M,"finish":0|1}
 *	{"type":"unit","id":N,"start":S,"end":E,"text":T,"first_final":F,
 *	    "last_final":L}: a caption unit that closed (common/caption.c,
 *	    fed as sottod's sessions feed it: each final, then the partial
 *	    after each step; the last closes at the finish), before the
 *	    step's "step" line
 *	{"type":"preview","text":T,"audio_time":A,"compute_ms":M}: with
 *	    -P MS, sotto_stream_preview() each MS of audio since the last
 *	    step or preview, while no step is due
 * audio_time is the seconds of audio pushed when the event was made.
 *
 * With -B every FILE is a stream of its own, fed in lockstep (a chunk
 * to each in turn), and the streams due after a round step together
 * through sotto_stream_step_many() (sottod's batching); each event has
 * "stream": the index of its FILE. A stream whose audio ends finishes.
 * -S is -B with the due streams stepped one at a time instead. A step
 * event's compute_ms is the time of its whole round.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "audio.h"
#include "caption.h"
#include "sotto.h"

enum { MANY_NO, MANY_BATCH, MANY_SERIAL };	/* opts.many: -B, -S */

struct opts {
	struct sotto_stream_params sp;
	struct sotto_model_params mp;
	int chunk_ms, realtime, many;
	int preview_ms;		/* -P: 0 none */
	unsigned jitter;	/* -j: seed of uneven steps, 0 none */
	const char *vad_path;
	struct sotto_vad *vad;
};

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
print_event(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

static void
print_event_of(json_object *o, int stream)
{
	if (stream >= 0)
		json_object_object_add(o, "stream",
		    json_object_new_int(stream));
	print_event(o);
}

/* Each stream's caption units; index 0 for a lone stream. */
static struct caption *captions;
static int n_captions;

static void
print_unit(void *arg, const struct caption_unit *u)
{
	int stream = (int)(intptr_t)arg;
	json_object *o;

	if (!u->closed)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("unit"));
	json_object_object_add(o, "id", json_object_new_int64(u->id));
	json_object_object_add(o, "start", json_object_new_double(u->start));
	json_object_object_add(o, "end", json_object_new_double(u->end));
	json_object_object_add(o, "text", json_object_new_string(u->text));
	json_object_object_add(o, "first_final",
	    json_object_new_int64(u->first_final));
	json_object_object_add(o, "last_final",
	    json_object_new_int64(u->last_final));
	print_event_of(o, stream);
}

static struct caption *
caption_of(int stream)
{
	int i = stream < 0 ? 0 : stream, k;
	struct caption *p;

	if (i >= n_captions) {
		if ((p = realloc(captions, (i + 1) * sizeof(*p))) == NULL) {
			fprintf(stderr, "stream-driver: out of memory\n");
			exit(1);
		}
		captions = p;
		for (k = n_captions; k <= i; k++)
			caption_init(&captions[k], print_unit,
			    (void *)(intptr_t)(k == 0 && stream < 0 ? -1 : k));
		n_captions = i + 1;
	}
	return &captions[i];
}

/* The units of a step's finals and partial, as sottod makes them. */
static void
feed_captions(const struct sotto_stream_update *u, int fin, int stream)
{
	struct caption *c = caption_of(stream);
	int i;

	for (i = 0; i < u->n_finals; i++)
		caption_final(c, (int64_t)(u->first_id + i), u->finals[i].start,
		    u->finals[i].end, u->finals[i].text);
	if (fin)
		caption_flush(c);
	else
		caption_partial(c, u->partial, u->partial_start, u->audio_time);
}

static json_object *
json_words(const struct sotto_segment *f)
{
	json_object *a = json_object_new_array(), *w;
	int i;

	for (i = 0; i < f->n_words; i++) {
		w = json_object_new_object();
		json_object_object_add(w, "word",
		    json_object_new_string(f->words[i].word));
		json_object_object_add(w, "start",
		    json_object_new_double(f->words[i].start));
		json_object_object_add(w, "end",
		    json_object_new_double(f->words[i].end));
		json_object_object_add(w, "probability",
		    json_object_new_double(f->words[i].probability));
		json_object_array_add(a, w);
	}
	return a;
}

static void
print_update(const struct sotto_stream_update *u, double ms, int fin,
    int stream)
{
	json_object *o;
	int i;

	for (i = 0; i < u->n_finals; i++) {
		o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("final"));
		json_object_object_add(o, "id",
		    json_object_new_int64((int64_t)(u->first_id + i)));
		json_object_object_add(o, "start",
		    json_object_new_double(u->finals[i].start));
		json_object_object_add(o, "end",
		    json_object_new_double(u->finals[i].end));
		json_object_object_add(o, "text",
		    json_object_new_string(u->finals[i].text));
		json_object_object_add(o, "audio_time",
		    json_object_new_double(u->audio_time));
		if (u->finals[i].words != NULL)
			json_object_object_add(o, "words",
			    json_words(&u->finals[i]));
		print_event_of(o, stream);
	}
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("partial"));
	json_object_object_add(o, "text", json_object_new_string(u->partial));
	json_object_object_add(o, "start",
	    json_object_new_double(u->partial_start));
	json_object_object_add(o, "end", json_object_new_double(u->partial_end));
	json_object_object_add(o, "audio_time",
	    json_object_new_double(u->audio_time));
	print_event_of(o, stream);
	feed_captions(u, fin, stream);
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("step"));
	json_object_object_add(o, "audio_time",
	    json_object_new_double(u->audio_time));
	json_object_object_add(o, "compute_ms", json_object_new_double(ms));
	json_object_object_add(o, "finish", json_object_new_int(fin));
	print_event_of(o, stream);
	fflush(stdout);
}

static int
read_raw(float **ret, size_t *ret_n)
{
	size_t cap = 1 << 16, n = 0, got, i;
	int16_t buf[4096];
	float *p = malloc(cap * sizeof(float)), *q;

	if (p == NULL)
		return -1;
	while ((got = fread(buf, 2, 4096, stdin)) > 0) {
		if (n + got > cap) {
			cap *= 2;
			if ((q = realloc(p, cap * sizeof(float))) == NULL) {
				free(p);
				return -1;
			}
			p = q;
		}
		for (i = 0; i < got; i++)
			p[n++] = buf[i] / 32768.0f;
	}
	*ret = p;
	*ret_n = n;
	return 0;
}

static int
preview(struct sotto_stream *s, char *err)
{
	struct sotto_stream_update u;
	json_object *o;
	double t = now();

	if (sotto_stream_preview(s, &u, err) != 0)
		return -1;
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("preview"));
	json_object_object_add(o, "text", json_object_new_string(u.partial));
	json_object_object_add(o, "audio_time",
	    json_object_new_double(u.audio_time));
	json_object_object_add(o, "compute_ms",
	    json_object_new_double((now() - t) * 1e3));
	print_event(o);
	return 0;
}

static int
run(struct sotto_stream *s, const float *pcm, size_t n, const struct opts *o)
{
	struct sotto_stream_update u;
	char err[SOTTO_ERR_MAX];
	size_t chunk = (size_t)o->chunk_ms * 16, off, k, fed = 0, want = 0;
	size_t since = 0, step = (size_t)o->sp.step_ms * 16;
	unsigned rng = o->jitter;
	double t0 = now(), t;

	for (off = 0; off < n; off += k) {
		k = n - off < chunk ? n - off : chunk;
		if (o->realtime && (t = t0 + (off + k) / 16000.0 - now()) > 0)
			usleep((useconds_t)(t * 1e6));
		if (sotto_stream_push(s, pcm + off, k, err) != 0)
			goto fail;
		fed += k;
		since += k;
		if (o->preview_ms > 0 && !sotto_stream_due(s) &&
		    since >= (size_t)o->preview_ms * 16) {
			since = 0;
			if (preview(s, err) != 0)
				goto fail;
		}
		if (!sotto_stream_due(s) || fed < want)
			continue;
		if (rng != 0) {	/* the next step after 1-8 steps of audio */
			rng = rng * 1103515245u + 12345u;
			want = step * (1 + (rng >> 16) % 8);
		}
		fed = since = 0;
		t = now();
		if (sotto_stream_step(s, &u, err) != 0)
			goto fail;
		print_update(&u, (now() - t) * 1e3, 0, -1);
	}
	t = now();
	if (sotto_stream_finish(s, &u, err) != 0)
		goto fail;
	print_update(&u, (now() - t) * 1e3, 1, -1);
	return 0;
fail:
	fprintf(stderr, "stream-driver: %s\n", err);
	return 1;
}

/* One stream per file, stepped together (-B). */
struct many {
	struct sotto_stream *s[64];
	float *pcm[64];
	size_t n[64], off[64];
	int count;
};

static int
run_many(struct many *mm, const struct opts *o)
{
	struct sotto_stream_update u[64];
	struct sotto_stream *due[64];
	int idx[64], rc[64], live = mm->count, i, k;
	char err[64][SOTTO_ERR_MAX];
	size_t chunk = (size_t)o->chunk_ms * 16, c;
	double t;

	while (live > 0) {
		for (i = 0, k = 0; i < mm->count; i++) {
			if (mm->s[i] == NULL)
				continue;
			c = mm->n[i] - mm->off[i] < chunk ?
			    mm->n[i] - mm->off[i] : chunk;
			if (sotto_stream_push(mm->s[i], mm->pcm[i] +
			    mm->off[i], c, err[0]) != 0)
				goto fail;
			mm->off[i] += c;
			if (sotto_stream_due(mm->s[i])) {
				idx[k] = i;
				due[k++] = mm->s[i];
			}
		}
		t = now();
		if (o->many == MANY_SERIAL)	/* for comparison */
			for (i = 0; i < k; i++)
				rc[i] = sotto_stream_step(due[i], &u[i],
				    err[i]);
		else if (k > 0)
			sotto_stream_step_many(due, k, u, rc, err);
		for (i = 0; i < k; i++)
			if (rc[i] != 0) {
				fprintf(stderr, "stream-driver: %s\n", err[i]);
				return 1;
			}
		t = (now() - t) * 1e3;	/* the round's time, for each */
		for (i = 0; i < k; i++)
			print_update(&u[i], t, 0, idx[i]);
		for (i = 0; i < mm->count; i++) {
			if (mm->s[i] == NULL || mm->off[i] < mm->n[i])
				continue;
			t = now();
			if (sotto_stream_finish(mm->s[i], &u[0], err[0]) != 0)
				goto fail;
			print_update(&u[0], (now() - t) * 1e3, 1, i);
			sotto_stream_free(mm->s[i]);
			mm->s[i] = NULL;
			live--;
		}
	}
	return 0;
fail:
	fprintf(stderr, "stream-driver: %s\n", err[0]);
	return 1;
}

static int
parse(int argc, char **argv, struct opts *o)
{
	int c;

	sotto_stream_params_init(&o->sp);
	sotto_model_params_init(&o->mp);
	o->chunk_ms = 100;
	o->realtime = 0;
	o->many = 0;
	o->jitter = 0;
	o->preview_ms = 0;
	o->vad_path = NULL;
	o->vad = NULL;
	while ((c = getopt(argc, argv, "s:c:l:b:t:v:j:p:P:rwBS")) != -1) {
		switch (c) {
		case 's': o->sp.step_ms = atoi(optarg); break;
		case 'c': o->chunk_ms = atoi(optarg); break;
		case 'l': o->sp.language = optarg; break;
		case 'b': o->sp.beam_size = atoi(optarg); break;
		case 't': o->mp.threads = atoi(optarg); break;
		case 'r': o->realtime = 1; break;
		case 'j': o->jitter = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': o->sp.word_timestamps = 1; break;
		case 'p': o->sp.prompt = optarg; break;
		case 'P': o->preview_ms = atoi(optarg); break;
		case 'B': o->many = MANY_BATCH; break;
		case 'S': o->many = MANY_SERIAL; break;
		case 'v': o->vad_path = optarg; break;
		default: return -1;
		}
	}
	if (o->chunk_ms < 1 || (o->many ? argc - optind < 2 ||
	    argc - optind > 65 : argc - optind != 2))
		return -1;
	return optind;
}

/* The -v model into the stream parameters: 0, or 3 after a message. */
static int
load_vad(struct opts *o)
{
	char err[SOTTO_ERR_MAX];

	if (o->vad_path == NULL)
		return 0;
	if (sotto_vad_load(o->vad_path, &o->vad, err) != 0) {
		fprintf(stderr, "stream-driver: %s\n", err);
		return 3;
	}
	o->sp.vad = o->vad;
	return 0;
}

static int
main_many(int argc, char **argv, int i, struct opts *o)
{
	struct sotto_model *m;
	struct many mm = { 0 };
	char err[SOTTO_ERR_MAX];
	int f, rc = 1;

	if ((rc = load_vad(o)) != 0)
		return rc;
	rc = 1;
	if (sotto_model_load(argv[i], &o->mp, &m, err) != 0) {
		fprintf(stderr, "stream-driver: %s\n", err);
		return 3;
	}
	for (f = i + 1; f < argc; f++, mm.count++) {
		snprintf(err, sizeof(err), "out of memory");
		if (audio_read_file(argv[f], &mm.pcm[mm.count],
		    &mm.n[mm.count], err, sizeof(err)) != 0 ||
		    sotto_stream_new(m, &o->sp, &mm.s[mm.count], err) != 0) {
			fprintf(stderr, "stream-driver: %s: %s\n", argv[f],
			    err);
			mm.count++;
			goto out;
		}
	}
	rc = run_many(&mm, o);
out:
	for (f = 0; f < mm.count; f++) {
		sotto_stream_free(mm.s[f]);
		free(mm.pcm[f]);
	}
	sotto_model_free(m);
	sotto_vad_free(o->vad);
	return rc;
}

int
main(int argc, char **argv)
{
	struct sotto_model *m;
	struct sotto_stream *s;
	struct opts o = { 0 };
	char err[SOTTO_ERR_MAX];
	float *pcm;
	size_t n;
	int i, rc;

	if ((i = parse(argc, argv, &o)) < 0) {
		fprintf(stderr, "usage: stream-driver [-s step_ms] [-c chunk_ms]"
		    " [-l lang] [-b beams] [-t threads] [-v vad] [-p vocabulary] [-P preview_ms] [-r] "
		    "[-w] MODEL "
		    "FILE|-\n"
		    "       stream-driver -B|-S [options] MODEL FILE...\n");
		return 2;
	}
	if (o.many)
		return main_many(argc, argv, i, &o);
	snprintf(err, sizeof(err), "out of memory");
	if (strcmp(argv[i + 1], "-") == 0 ? read_raw(&pcm, &n) != 0 :
	    audio_read_file(argv[i + 1], &pcm, &n, err, sizeof(err)) != 0) {
		fprintf(stderr, "stream-driver: %s\n", err);
		return 1;
	}
	if (load_vad(&o) != 0 ||
	    sotto_model_load(argv[i], &o.mp, &m, err) != 0) {
		if (o.vad == NULL && o.vad_path != NULL)
			err[0] = '\0';
		else
			fprintf(stderr, "stream-driver: %s\n", err);
		sotto_vad_free(o.vad);
		free(pcm);
		return 3;
	}
	if (sotto_stream_new(m, &o.sp, &s, err) != 0) {
		fprintf(stderr, "stream-driver: %s\n", err);
		rc = 1;
	} else {
		rc = run(s, pcm, n, &o);
		sotto_stream_free(s);
	}
	sotto_model_free(m);
	sotto_vad_free(o.vad);
	free(pcm);
	return rc;
}

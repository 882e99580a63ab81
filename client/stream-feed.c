/*
 * What `sotto stream` sends, and when: a file read whole and sent in
 * chunks paced as live (or as fast as sottod takes it with --fast), as
 * float samples or Opus packets; or raw audio from standard input as it
 * comes. Every AUDIO frame is kept for a resume (stream-resume.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <opus.h>

#include "audio.h"
#include "stream-run.h"

double
stream_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Queue an AUDIO frame of seconds of audio, kept for a resume. */
static int
stream_audio(struct stream_run *r, const void *p, size_t len,
    double seconds)
{
	if (stream_sent_add(&r->frames, p, len, seconds) != 0)
		return -1;
	return conn_queue(&r->c, MSG_AUDIO, p, len);
}

/* Queue the next chunk of the file; 0 when all of it is queued. */
static int
stream_file_chunk(struct stream_run *r, const struct stream_opts *o)
{
	struct stream_src *s = &r->src;
	size_t n = (size_t)o->chunk_ms * 16, i;
	unsigned char pkt[1500];
	float frame[STREAM_OPUS_FRAME];
	opus_int32 len;

	if (s->off >= s->n)
		return 0;
	if (n > s->n - s->off)
		n = s->n - s->off;
	if (s->enc == NULL) {
		stream_audio(r, s->pcm + s->off, n * sizeof(float),
		    n / 16000.0);
		s->off += n;
		return 1;
	}
	for (i = 0; i < n; i += STREAM_OPUS_FRAME) {
		memset(frame, 0, sizeof(frame));
		memcpy(frame, s->pcm + s->off + i, (n - i < STREAM_OPUS_FRAME ?
		    n - i : STREAM_OPUS_FRAME) * sizeof(float));
		len = opus_encode_float(s->enc, frame, STREAM_OPUS_FRAME, pkt,
		    sizeof(pkt));
		if (len > 0)
			stream_audio(r, pkt, (size_t)len,
			    STREAM_OPUS_FRAME / 16000.0);
	}
	s->off += n;
	return 1;
}

int
stream_stdin_chunk(struct stream_run *r, const struct stream_opts *o)
{
	struct stream_src *s = &r->src;
	size_t width = proto_format_sample_bytes(o->raw_format);
	unsigned char buf[16384];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		s->stdin_eof = 1;
		return 0;
	}
	return stream_audio(r, buf, (size_t)n, (double)n / (width *
	    (size_t)o->channels * (size_t)o->rate));
}

int
stream_load(struct stream_src *s, const struct stream_opts *o)
{
	char err[512];
	int e;

	memset(s, 0, sizeof(*s));
	if (strcmp(o->file, "-") == 0)
		return 0;
	if (audio_read_file(o->file, &s->pcm, &s->n, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto stream: %s\n", err);
		return -1;
	}
	if (o->send_format == PROTO_FORMAT_OPUS) {
		s->enc = opus_encoder_create(16000, 1, OPUS_APPLICATION_VOIP,
		    &e);
		if (s->enc == NULL) {
			fprintf(stderr, "sotto stream: opus: %s\n",
			    opus_strerror(e));
			return -1;
		}
		opus_encoder_ctl(s->enc, OPUS_SET_BITRATE(32000));
	}
	return 0;
}

int
stream_feed(struct stream_run *r, const struct stream_opts *o,
    int interrupted)
{
	double chunk_s = o->chunk_ms / 1000.0, next;

	if (r->end_sent || r->resuming)
		return -1;
	if (!interrupted && r->is_stdin && !r->src.stdin_eof)
		return -1;
	while (!interrupted && !r->is_stdin) {
		if (o->fast && conn_pending(&r->c) > STREAM_QUEUE_MAX_BYTES)
			return -1;
		next = r->t0 + (r->sent + 1) * chunk_s;
		if (!o->fast && stream_now() < next)
			return (int)((next - stream_now()) * 1000) + 1;
		if (!stream_file_chunk(r, o))
			break;
		r->sent++;
	}
	conn_queue(&r->c, MSG_END, NULL, 0);
	r->end_sent = 1;
	return -1;
}

/*
 * sotto stream --resume: the AUDIO frames sent, kept (the last
 * STREAM_KEEP_BYTES of them) so that a resumed session gets again what
 * it did not take, and the reconnection with backoff.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto.h"
#include "stream.h"

#define STREAM_KEEP_BYTES	(16u << 20)
#define RESUME_FIRST_MS		100
#define RESUME_MAX_MS		2000

int
stream_sent_add(struct stream_sent *s, const void *p, size_t len,
    double seconds)
{
	struct stream_frame *f;
	size_t cap;

	if (s->n == s->cap) {
		cap = s->cap ? 2 * s->cap : 1024;
		if ((f = realloc(s->f, cap * sizeof(*f))) == NULL)
			return -1;
		s->f = f;
		s->cap = cap;
	}
	f = &s->f[s->n];
	if ((f->data = malloc(len ? len : 1)) == NULL)
		return -1;
	memcpy(f->data, p, len);
	f->len = len;
	f->t = s->seconds;
	f->seconds = seconds;
	s->seconds += seconds;
	s->bytes += len;
	s->n++;
	while (s->bytes > STREAM_KEEP_BYTES && s->first < s->n) {
		s->bytes -= s->f[s->first].len;
		free(s->f[s->first].data);
		s->f[s->first++].data = NULL;
	}
	return 0;
}

void
stream_sent_free(struct stream_sent *s)
{
	size_t i;

	for (i = s->first; i < s->n; i++)
		free(s->f[i].data);
	free(s->f);
	memset(s, 0, sizeof(*s));
}

double
stream_sent_resend(const struct stream_sent *s, struct conn *c, size_t from)
{
	double lost = 0;
	size_t i;

	for (i = from; i < s->n; i++) {
		if (s->f[i].data == NULL)
			lost += s->f[i].seconds;
		else
			conn_queue(c, MSG_AUDIO, s->f[i].data, s->f[i].len);
	}
	return lost;
}

size_t
stream_sent_at(const struct stream_sent *s, double t)
{
	size_t i = s->n;

	while (i > 0 && s->f[i - 1].t + s->f[i - 1].seconds > t + 1e-9)
		i--;
	return i;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int
stream_reconnect(struct conn *c, const char *path, const char *session,
    int64_t since, int max_s, char *err, size_t errlen)
{
	char json[160];
	int delay = RESUME_FIRST_MS, waited = 0, n;

	conn_close(c);
	for (;;) {
		if (conn_open(c, path, err, errlen) == 0)
			break;
		if (waited >= max_s * 1000)
			return -1;
		sleep_ms(delay);
		waited += delay;
		delay = delay * 2 > RESUME_MAX_MS ? RESUME_MAX_MS : delay * 2;
	}
	if (session == NULL)
		return 0;
	n = snprintf(json, sizeof(json), "{\"session\":\"%s\",\"since\":%lld}",
	    session, (long long)since);
	return conn_queue(c, MSG_OPEN, json, (size_t)n);
}

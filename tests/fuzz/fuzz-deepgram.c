/*
 * libFuzzer target for the Deepgram door's text input
 * (daemon/deepgram/deepgram-query.c): the input as the upgrade's query
 * string (NUL-terminated copy) must parse into settings within range or
 * be refused with a message and, for a parameter sottod reads, its
 * name; the input as a client text message must be one of the three
 * types or be refused with a message. ASan checks every read and write
 * stays in bounds (the percent-decoding, the language tag).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "deepgram.h"
#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
fuzz_check_params(const struct dg_params *p)
{
	if (p->encoding > DG_ENC_ALAW ||
	    p->sample_rate < PROTO_RATE_MIN || p->sample_rate > PROTO_RATE_MAX ||
	    p->channels < 1 || p->channels > PROTO_CHANNELS_MAX ||
	    (p->interim_results | p->punctuate | p->vad_events) & ~1 ||
	    p->endpointing_ms < -1 || p->endpointing_ms > 60000 ||
	    p->utterance_end_ms < 0 || p->utterance_end_ms > 60000 ||
	    memchr(p->model, '\0', sizeof(p->model)) == NULL ||
	    memchr(p->language, '\0', sizeof(p->language)) == NULL)
		abort();
	/* a language is Whisper's code: 2 or 3 lower-case letters, auto */
	if (p->language[0] != '\0' && strcmp(p->language, "auto") != 0 &&
	    (strlen(p->language) < 2 || strlen(p->language) > 3 ||
	    strspn(p->language, "abcdefghijklmnopqrstuvwxyz") !=
	    strlen(p->language)))
		abort();
}

static void
fuzz_query(const uint8_t *data, size_t size)
{
	struct dg_params p;
	const char *param = NULL;
	char msg[DG_MSG_MAX], *q;

	if ((q = malloc(size + 1)) == NULL)
		return;
	memcpy(q, data, size);
	q[size] = '\0';
	msg[0] = '\0';
	if (dg_query_parse(q, &p, &param, msg) != 0) {
		if (msg[0] == '\0' || param == NULL ||
		    memchr(msg, '\0', sizeof(msg)) == NULL)
			abort();
	} else
		fuzz_check_params(&p);
	free(q);
}

static void
fuzz_message(const uint8_t *data, size_t size)
{
	enum dg_msg_type t = (enum dg_msg_type)-1;
	char msg[DG_MSG_MAX];

	msg[0] = '\0';
	if (dg_msg_parse(data, size, &t, msg) != 0) {
		if (msg[0] == '\0' || memchr(msg, '\0', sizeof(msg)) == NULL)
			abort();
	} else if (t != DG_MSG_KEEPALIVE && t != DG_MSG_FINALIZE &&
	    t != DG_MSG_CLOSE_STREAM)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_query(data, size);
	fuzz_message(data, size);
	return 0;
}

/*
 * The Deepgram door's server messages as JSON text, with Deepgram's
 * field names and types (docs/http.md): Results, Metadata, SpeechStarted,
 * UtteranceEnd and Error. Times are seconds of the connection's audio,
 * rounded to the millisecond as the sottod protocol's are.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "deepgram-private.h"

/* Deepgram names a model's version; a GGUF file has none to give. */
#define DG_MODEL_VERSION	"1"

/* Seconds to the millisecond, so that 1.0399999 goes out as 1.04. */
struct json_object *
dg_seconds(double s)
{
	return json_object_new_double(round(s * 1000.0) / 1000.0);
}

/* Send o (and put it), unless the connection is gone. */
void
dg_send(struct dg_conn *c, struct json_object *o)
{
	const char *s;

	if (o == NULL)
		return;
	if (!(c->ws.peer->flags & PEER_DEAD)) {
		s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE);
		(void)ws_conn_send_text(c->ws.conn, s, strlen(s));
	}
	json_object_put(o);
}

/*
 * The model's id as Deepgram gives one (a UUID): made from its name, so
 * that it is the same for every connection to the same model.
 */
static void
dg_model_uuid(char out[DG_ID_MAX])
{
	struct sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	const char *name = core_model_name();

	sha256_init(&h);
	sha256_update(&h, strlen(name), (const uint8_t *)name);
	sha256_digest(&h, sizeof(d), d);
	snprintf(out, DG_ID_MAX, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", d[0], d[1], d[2], d[3], d[4], d[5],
	    d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]);
}

static struct json_object *
dg_model_info(void)
{
	struct json_object *m = json_object_new_object();

	json_object_object_add(m, "name",
	    json_object_new_string(core_model_name()));
	json_object_object_add(m, "version", json_object_new_string(
	    DG_MODEL_VERSION));
	json_object_object_add(m, "arch", json_object_new_string("whisper"));
	return m;
}

/* [channel, channels]: the audio is transcribed as one channel. */
static struct json_object *
dg_channel_pair(void)
{
	struct json_object *a = json_object_new_array();

	json_object_array_add(a, json_object_new_int(0));
	json_object_array_add(a, json_object_new_int(1));
	return a;
}

/*
 * A Results message over [start, end] with one alternative (taken);
 * the caller adds is_final, speech_final and from_finalize.
 */
struct json_object *
dg_results(struct dg_conn *c, double start, double end,
    struct json_object *alternative)
{
	struct json_object *o = json_object_new_object(),
	    *ch = json_object_new_object(), *alts = json_object_new_array(),
	    *md = json_object_new_object();
	char uuid[DG_ID_MAX];

	json_object_object_add(o, "type", json_object_new_string("Results"));
	json_object_object_add(o, "channel_index", dg_channel_pair());
	json_object_object_add(o, "duration", dg_seconds(end > start ?
	    end - start : 0));
	json_object_object_add(o, "start", dg_seconds(start));
	json_object_array_add(alts, alternative);
	json_object_object_add(ch, "alternatives", alts);
	json_object_object_add(o, "channel", ch);
	dg_model_uuid(uuid);
	json_object_object_add(md, "request_id",
	    json_object_new_string(c->request_id));
	json_object_object_add(md, "model_info", dg_model_info());
	json_object_object_add(md, "model_uuid", json_object_new_string(uuid));
	json_object_object_add(o, "metadata", md);
	return o;
}

/* The last message before the close: what the connection took. */
void
dg_send_metadata(struct dg_conn *c)
{
	struct json_object *o = json_object_new_object();
	struct sha256_ctx h = c->sha;
	char hex[2 * SHA256_DIGEST_SIZE + 1];

	dg_sha256_hex(&h, hex);
	json_object_object_add(o, "type", json_object_new_string("Metadata"));
	dg_metadata_fill(o, c->request_id, hex, c->created,
	    (double)c->fed / SOTTO_SAMPLE_RATE);
	dg_send(c, o);
}

void
dg_sha256_hex(struct sha256_ctx *h, char hex[2 * SHA256_DIGEST_SIZE + 1])
{
	uint8_t d[SHA256_DIGEST_SIZE];
	size_t i;

	sha256_digest(h, sizeof(d), d);
	for (i = 0; i < sizeof(d); i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void
dg_metadata_fill(struct json_object *o, const char *request_id,
    const char *sha256_hex, const char *created, double duration)
{
	struct json_object *models = json_object_new_array(),
	    *info = json_object_new_object();
	char uuid[DG_ID_MAX];

	dg_model_uuid(uuid);
	json_object_object_add(o, "transaction_key",
	    json_object_new_string("deprecated"));
	json_object_object_add(o, "request_id",
	    json_object_new_string(request_id));
	json_object_object_add(o, "sha256", json_object_new_string(sha256_hex));
	json_object_object_add(o, "created", json_object_new_string(created));
	json_object_object_add(o, "duration", dg_seconds(duration));
	json_object_object_add(o, "channels", json_object_new_int(1));
	json_object_array_add(models, json_object_new_string(uuid));
	json_object_object_add(o, "models", models);
	json_object_object_add(info, uuid, dg_model_info());
	json_object_object_add(o, "model_info", info);
}

/* An Error message: variant is the kind, msg what to do about it. */
void
dg_send_error(struct dg_conn *c, const char *variant, const char *msg)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string("Error"));
	json_object_object_add(o, "variant", json_object_new_string(variant));
	json_object_object_add(o, "description", json_object_new_string(msg));
	dg_send(c, o);
}

/* SpeechStarted (key "timestamp") or UtteranceEnd ("last_word_end"). */
void
dg_send_event(struct dg_conn *c, const char *type, const char *key, double t)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "channel", dg_channel_pair());
	json_object_object_add(o, key, dg_seconds(t));
	dg_send(c, o);
}

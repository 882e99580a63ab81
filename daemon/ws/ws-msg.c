/*
 * WebSocket messages as socket protocol frames (docs/protocol.md): a
 * binary message is AUDIO; a text message is one JSON object whose
 * "type" names the frame it stands for, and is that frame's payload
 * (the "type" field is one more unknown field to proto.c's parsers).
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "ws.h"

#define WS_MSG_JSON_DEPTH	8

static const struct {
	const char	*name;
	uint8_t		 type;
} ws_msg_types[] = {
	{ "open", MSG_OPEN },
	{ "subscribe", MSG_SUBSCRIBE },
	{ "end", MSG_END },
	{ "status", MSG_STATUS },
};

/* The "type" of a JSON object: 1 with *ret, 0 when absent, -1 bad. */
static int
ws_msg_type(const uint8_t *p, size_t len, const char **ret, char *msg,
    struct json_object **ret_obj)
{
	struct json_object *o, *t = NULL;
	char why[PROTO_MSG_MAX];

	*ret_obj = NULL;
	if ((o = proto_json_object(p, len, WS_MSG_JSON_DEPTH, why)) == NULL) {
		snprintf(msg, PROTO_MSG_MAX, "a text message must be one JSON "
		    "object (%.*s)", PROTO_MSG_MAX / 2, why);
		return -1;
	}
	if (json_object_object_get_ex(o, "type", &t) &&
	    !json_object_is_type(t, json_type_string)) {
		snprintf(msg, PROTO_MSG_MAX, "\"type\" must be a string");
		json_object_put(o);
		return -1;
	}
	*ret_obj = o;
	if (t == NULL)
		return 0;
	*ret = json_object_get_string(t);
	return 1;
}

enum proto_error
ws_msg_frame(int binary, const uint8_t *p, size_t len,
    struct proto_frame *ret, char *msg)
{
	struct json_object *o;
	const char *name = "open";
	size_t i;
	int rc;

	ret->payload = p;
	ret->len = len;
	if (binary) {
		ret->type = MSG_AUDIO;
		return PROTO_OK;
	}
	if ((rc = ws_msg_type(p, len, &name, msg, &o)) < 0)
		return PROTO_E_BAD_JSON;
	for (i = 0; i < sizeof(ws_msg_types) / sizeof(ws_msg_types[0]); i++)
		if (strcmp(name, ws_msg_types[i].name) == 0)
			break;
	if (i == sizeof(ws_msg_types) / sizeof(ws_msg_types[0])) {
		snprintf(msg, PROTO_MSG_MAX, "unknown message type \"%.32s\" "
		    "(open, subscribe, end, status)", name);
		json_object_put(o);
		return PROTO_E_BAD_VALUE;
	}
	json_object_put(o);
	ret->type = ws_msg_types[i].type;
	return PROTO_OK;
}

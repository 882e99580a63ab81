/*
 * The HTTP door's routes on the listener, and the door itself: a drain
 * waits for the transcriptions being answered; at the end they are
 * cancelled.
 */
#include <stdio.h>

#include <event2/http.h>

#include "core.h"
#include "http.h"
#include "httpd.h"

#define GET	(EVHTTP_REQ_GET | EVHTTP_REQ_HEAD)
static const struct httpd_route http_routes[] = {
	{ "/", GET, 1, 0, web_page },
	{ "/health", GET, 1, 0, http_health },
	{ "/metrics", GET, 0, 0, http_metrics },
	{ "/v1/models", GET, 0, 0, http_models },
	{ "/v1/models/", GET, 0, 1, http_model },
	{ "/v1/audio/transcriptions", EVHTTP_REQ_POST, 0, 0,
	    http_transcriptions },
	{ "/v1/audio/translations", EVHTTP_REQ_POST, 0, 0,
	    http_translations },
};
#undef GET

static const struct door http_door = {
	.name = "http",
	.busy = http_busy,
	.stop = http_openai_stop,
};

int
http_start(char *err, size_t errlen)
{
	if (!httpd_on())
		return 0;
	if (httpd_routes(http_routes, sizeof(http_routes) /
	    sizeof(http_routes[0])) != 0) {
		snprintf(err, errlen, "http: cannot add the routes");
		return -1;
	}
	core_door_add(&http_door);
	return 0;
}

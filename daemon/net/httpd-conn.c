/*
 * The bufferevent of every HTTP connection (evhttp_set_bevcb), with one
 * addition: evhttp's own error pages become JSON.
 *
 * evhttp answers some requests before any route sees them: a body over
 * max_request_bytes (413), a request line or headers that do not parse
 * or are too long (400), an Expect other than 100-continue (417). It
 * writes a small HTML page and closes the connection. Every other error
 * of the API is an OpenAI-style JSON object, so a callback on the
 * connection's output buffer watches what is appended: when evhttp's
 * error page ("<HTML><HEAD>\n<TITLE>413 ...") has just been added after
 * its header block, the reply (from its status line on, still unsent: the
 * socket is written from the loop, later) is replaced by the same status
 * with a JSON body. The reply before it, if any, is left alone; nothing
 * else is ever touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "httpd.h"
#include "core.h"

#define HTTP_CONN_PAGE		"<HTML><HEAD>\n<TITLE>"
#define HTTP_CONN_PAGE_MAX	512	/* evhttp's pages are ~100 bytes */
#define HTTP_CONN_HEAD_MAX	1024	/* their header block */

/* The JSON error body for an evhttp status. */
static char *
httpd_conn_json(int code)
{
	struct json_object *o = json_object_new_object(), *e;
	char msg[256];
	const char *c;
	char *s;

	switch (code) {
	case 413:
		snprintf(msg, sizeof(msg), "the request body is over "
		    "max_request_bytes (%zu bytes), or its chunked encoding "
		    "is malformed", core_config()->http_max_request_bytes);
		c = "request_too_large";
		break;
	case 417:
		snprintf(msg, sizeof(msg), "Expect: only 100-continue is "
		    "understood");
		c = "expectation_failed";
		break;
	case 400:
		snprintf(msg, sizeof(msg), "malformed HTTP request: the request "
		    "line or headers do not parse, or are over 16 KiB");
		c = "bad_request";
		break;
	default:
		snprintf(msg, sizeof(msg), "HTTP error %d", code);
		c = NULL;
		break;
	}
	e = json_object_new_object();
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(code >= 500 ?
	    "server_error" : "invalid_request_error"));
	json_object_object_add(e, "param", NULL);
	json_object_object_add(e, "code", c != NULL ?
	    json_object_new_string(c) : NULL);
	json_object_object_add(o, "error", e);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

/*
 * The offset of the status line of the header block that ends at the
 * end of head[n] ("HTTP/1.x NNN ..." at the start of a line), or -1.
 */
static long
httpd_conn_status_line(const char *head, size_t n, size_t base)
{
	size_t i;

	if (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0)
		return -1;
	for (i = n - 4; i-- > 0;)
		if ((i == 0 || head[i - 1] == '\n') &&
		    strncmp(head + i, "HTTP/1.", 7) == 0) {
			if (i == 0 && base > 0)
				return -1;	/* may start before head[] */
			return (long)i;
		}
	return -1;
}

/* Replace out[from...] (evhttp's reply) with code and a JSON body. */
static void
httpd_conn_rewrite(struct evbuffer *out, size_t from, const char *status,
    int code)
{
	struct evbuffer *keep;
	char *json;

	if ((json = httpd_conn_json(code)) == NULL ||
	    (keep = evbuffer_new()) == NULL) {
		free(json);
		return;
	}
	evbuffer_unfreeze(out, 1);
	evbuffer_remove_buffer(out, keep, from);
	evbuffer_drain(out, evbuffer_get_length(out));
	evbuffer_add_printf(keep, "%s\r\nContent-Type: application/json\r\n"
	    "Connection: close\r\nContent-Length: %zu\r\n\r\n%s\n", status,
	    strlen(json) + 1, json);
	evbuffer_add_buffer(out, keep);
	evbuffer_freeze(out, 1);
	evbuffer_free(keep);
	free(json);
	httpd_count_reply(code);
}

static void
httpd_conn_output_cb(struct evbuffer *out, const struct evbuffer_cb_info *info,
    void *arg)
{
	static int rewriting;
	char page[HTTP_CONN_PAGE_MAX + 1], head[HTTP_CONN_HEAD_MAX + 1];
	size_t len = evbuffer_get_length(out), n = info->n_added, hn;
	struct evbuffer_ptr p;
	char status[128], *eol;
	long at;

	if (rewriting || n < strlen(HTTP_CONN_PAGE) ||
	    n > HTTP_CONN_PAGE_MAX || n > len)
		return;
	if (evbuffer_ptr_set(out, &p, len - n, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(out, &p, page, n) != (ev_ssize_t)n)
		return;
	page[n] = '\0';
	if (strncmp(page, HTTP_CONN_PAGE, strlen(HTTP_CONN_PAGE)) != 0)
		return;
	hn = len - n < HTTP_CONN_HEAD_MAX ? len - n : HTTP_CONN_HEAD_MAX;
	if (evbuffer_ptr_set(out, &p, len - n - hn, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(out, &p, head, hn) != (ev_ssize_t)hn)
		return;
	head[hn] = '\0';
	if ((at = httpd_conn_status_line(head, hn, len - n - hn)) < 0 ||
	    (eol = strstr(head + at, "\r\n")) == NULL ||
	    (size_t)(eol - (head + at)) >= sizeof(status))
		return;
	memcpy(status, head + at, (size_t)(eol - (head + at)));
	status[eol - (head + at)] = '\0';
	rewriting = 1;
	httpd_conn_rewrite(out, len - n - hn + (size_t)at, status,
	    atoi(page + strlen(HTTP_CONN_PAGE)));
	rewriting = 0;
}

/* evhttp_set_bevcb: what evhttp would make, and the hook. */
struct bufferevent *
httpd_conn_bev(struct event_base *base, void *arg)
{
	struct bufferevent *bev;

	if ((bev = bufferevent_socket_new(base, -1, 0)) == NULL)
		return NULL;
	if (evbuffer_add_cb(bufferevent_get_output(bev), httpd_conn_output_cb,
	    NULL) == NULL) {
		bufferevent_free(bev);
		return NULL;
	}
	return bev;
}

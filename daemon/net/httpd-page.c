/*
 * The error replies the listener writes itself, and evhttp's own error
 * pages as JSON (httpd-conn.c calls both).
 *
 * A refused connection's reply (httpd_page_send) is the first thing
 * written on its socket, straight to it: a few hundred bytes, which an
 * idle socket's buffer takes at once.
 *
 * evhttp answers some requests before any route sees them: a body over
 * max_request_bytes (413), a request line or headers that do not parse
 * or are too long (400), an Expect other than 100-continue (417). It
 * writes a small HTML page and closes the connection. Every other error
 * of the API is an OpenAI-style JSON object, so the output callback
 * watches what is appended: when evhttp's error page ("<HTML><HEAD>\n
 * <TITLE>413 ...") has just been added after its header block, the
 * reply (from its status line on, still unsent: the socket is written
 * from the loop, later) is replaced by the same status with a JSON body
 * and sottod's reason phrase. The reply before it, if any, is left
 * alone; nothing else is ever touched.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "core.h"
#include "httpd.h"
#include "httpd-private.h"

#define HTTP_PAGE		"<HTML><HEAD>\n<TITLE>"
#define HTTP_PAGE_MAX		512	/* evhttp's pages are ~100 bytes */
#define HTTP_PAGE_HEAD_MAX	1024	/* their header block */

/* The JSON error body for an evhttp status (malloc'd, or NULL). */
static char *
httpd_page_json(int code)
{
	char msg[256];
	const char *c;

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
	return httpd_error_json(code >= 500 ? "server_error" :
	    "invalid_request_error", c, NULL, msg);
}

/*
 * The offset of the status line of the header block that ends at the
 * end of head[n] ("HTTP/1.x NNN ..." at the start of a line), or -1.
 */
static long
httpd_page_status_line(const char *head, size_t n, size_t base)
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

/*
 * Replace out[from...] (evhttp's reply, its status line starting with
 * version: "HTTP/1.1") with code and a JSON body.
 */
static void
httpd_page_replace(struct evbuffer *out, size_t from, const char *version,
    int code)
{
	struct evbuffer *keep;
	char *json;

	if ((json = httpd_page_json(code)) == NULL ||
	    (keep = evbuffer_new()) == NULL) {
		free(json);
		return;
	}
	evbuffer_remove_buffer(out, keep, from);
	evbuffer_drain(out, evbuffer_get_length(out));
	evbuffer_add_printf(keep, "%.8s %d %s\r\nContent-Type: "
	    "application/json\r\nConnection: close\r\nContent-Length: "
	    "%zu\r\n\r\n%s\n", version, code, httpd_reason(code),
	    strlen(json) + 1, json);
	evbuffer_add_buffer(out, keep);
	evbuffer_free(keep);
	free(json);
	httpd_count_reply(code);
}

void
httpd_page_rewrite(struct evbuffer *out, const struct evbuffer_cb_info *info)
{
	static int rewriting;
	char page[HTTP_PAGE_MAX + 1], head[HTTP_PAGE_HEAD_MAX + 1];
	size_t len = evbuffer_get_length(out), n = info->n_added, hn;
	struct evbuffer_ptr p;
	long at;

	if (rewriting || n < strlen(HTTP_PAGE) || n > HTTP_PAGE_MAX ||
	    n > len)
		return;
	if (evbuffer_ptr_set(out, &p, len - n, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(out, &p, page, n) != (ev_ssize_t)n)
		return;
	page[n] = '\0';
	if (strncmp(page, HTTP_PAGE, strlen(HTTP_PAGE)) != 0)
		return;
	hn = len - n < HTTP_PAGE_HEAD_MAX ? len - n : HTTP_PAGE_HEAD_MAX;
	if (evbuffer_ptr_set(out, &p, len - n - hn, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(out, &p, head, hn) != (ev_ssize_t)hn)
		return;
	head[hn] = '\0';
	if ((at = httpd_page_status_line(head, hn, len - n - hn)) < 0)
		return;
	rewriting = 1;
	httpd_page_replace(out, len - n - hn + (size_t)at, head + at,
	    atoi(page + strlen(HTTP_PAGE)));
	rewriting = 0;
}

void
httpd_page_send(int fd, int status, const char *type, const char *code,
    const char *msg)
{
	char head[384], *json;
	struct iovec iov[3];
	struct msghdr mh;
	int n;

	if ((json = httpd_error_json(type, code, NULL, msg)) == NULL)
		return;
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: "
	    "application/json\r\nContent-Length: %zu\r\nConnection: close"
	    "\r\n%s%s\r\n", status, httpd_reason(status), strlen(json) + 1,
	    status == 401 ? "WWW-Authenticate: Bearer realm=\"sottod\"\r\n" :
	    "", status == 503 ? "Retry-After: 1\r\n" : "");
	if (n > 0 && (size_t)n < sizeof(head)) {
		iov[0].iov_base = head;
		iov[0].iov_len = (size_t)n;
		iov[1].iov_base = json;
		iov[1].iov_len = strlen(json);
		iov[2].iov_base = "\n";
		iov[2].iov_len = 1;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 3;
		(void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(json);
}

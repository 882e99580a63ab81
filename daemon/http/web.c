/*
 * The live captions page (daemon/http/web/index.html, embedded at build
 * time by daemon/http/web/embed.py) at / on the HTTP listener; it talks
 * to sottod through the WebSocket door at /ws (daemon/ws). The page is one file with its script and style: nothing is
 * fetched from elsewhere, and its Content-Security-Policy lets it load
 * nothing else either (its AudioWorklet comes from a blob: URL it makes).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http.h"
#include "httpd.h"

extern const unsigned char web_index_html[];
extern const size_t web_index_html_len;

#define WEB_CSP	"default-src 'none'; script-src 'unsafe-inline' blob:; " \
	"style-src 'unsafe-inline'; connect-src 'self'; img-src data:; " \
	"media-src 'self'; base-uri 'none'; form-action 'none'; " \
	"frame-ancestors 'none'"

/* GET / (or HEAD): the page. */
void
web_page(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *body;

	if ((body = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add_reference(body, web_index_html, web_index_html_len,
	    NULL, NULL);
	evhttp_add_header(h, "Content-Type", "text/html; charset=utf-8");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "Content-Security-Policy", WEB_CSP);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

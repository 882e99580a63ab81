/*
 * The HTTP listener (httpd.c, httpd-conn.c, docs/http.md): evhttp on the
 * loop thread, shared by the doors that answer HTTP (daemon/http) and
 * those that take a connection over from it (daemon/ws). Each adds its
 * routes; the listener checks the method and the token first. Loop
 * thread only.
 */
#ifndef SOTTOD_HTTPD_H
#define SOTTOD_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

struct evhttp_request;
struct json_object;

/*
 * Serve on fd, a listening TCP socket from systemd, or (fd -1) on
 * [http] listen (no-op when empty). Registers it with the core (a drain
 * stops accepting; requests in progress go on). 0, or -1 with err.
 */
int	httpd_start(int fd, char *err, size_t errlen);
/* Whether there is a listener (routes are added only then). */
int	httpd_on(void);

/* A path and what answers it. */
struct httpd_route {
	const char	*path;
	int		 methods;	/* EVHTTP_REQ_*: others get a 405 */
	int		 open;		/* no token needed */
	int		 prefix;	/* every path under path, not path */
	void		(*fn)(struct evhttp_request *);
};
/*
 * Add routes (static storage, kept) when there is a listener. 0, or -1
 * when evhttp refuses one.
 */
int	httpd_routes(const struct httpd_route *, size_t n);

/* Replies: a JSON object's text; an OpenAI-style JSON error. */
void	httpd_reply_json(struct evhttp_request *, int code, const char *json);
void	httpd_reply_error(struct evhttp_request *, int status,
	    const char *type, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
/* The same, naming the request's field it is about (its "param"). */
void	httpd_reply_param_error(struct evhttp_request *, int status,
	    const char *type, const char *code, const char *param,
	    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Reply with o (JSON), and put it. */
void	httpd_reply_object(struct evhttp_request *, int code,
	    struct json_object *o);
const char *httpd_method_name(struct evhttp_request *);
/*
 * Watch req's connection for the client closing it while its reply waits
 * (evhttp does not read a connection then, so it would not notice):
 * fn(fd, EV_CLOSED, arg) runs on the loop when it does. The event, for
 * event_free; NULL where the event backend cannot tell
 * (EV_FEATURE_EARLY_CLOSE, epoll's EPOLLRDHUP) or on failure: the
 * request then waits on.
 */
struct event *httpd_watch_close(struct evhttp_request *,
	    void (*fn)(evutil_socket_t, short, void *), void *arg);
/*
 * 1 when req carries "Authorization: Bearer TOKEN" or no [http] token is
 * set; otherwise a 401 was sent and 0 is returned.
 */
int	httpd_authorized(struct evhttp_request *);
/* Count a reply (GET /metrics); httpd_reply_json counts its own. */
void	httpd_count_reply(int code);
void	httpd_reply_counts(uint64_t counts[3]);	/* 2xx, 4xx, 5xx */
/* HTTP connections open now (GET /metrics). */
int	httpd_connections(void);

#endif

/*
 * What the HTTP listener's files share (httpd.c, httpd-listen.c,
 * httpd-conn.c, httpd-page.c, ws-upgrade.c) and the doors above do not
 * see. Loop thread only.
 */
#ifndef SOTTOD_HTTPD_PRIVATE_H
#define SOTTOD_HTTPD_PRIVATE_H

#include <stddef.h>

struct bufferevent;
struct event_base;
struct evbuffer;
struct evbuffer_cb_info;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;

/* httpd.c */
/* The reason phrase of a status sottod sends ("Too Many Requests"). */
const char *httpd_reason(int status);
/*
 * An OpenAI-style error object's text, without a newline (malloc'd), or
 * NULL when out of memory. param and code may be NULL.
 */
char	*httpd_error_json(const char *type, const char *code,
	    const char *param, const char *msg);
/* The paths of routes that need no token (NULL-terminated). */
const char *const *httpd_open_paths(void);

/* httpd-listen.c: the listening socket and accept(2) running short */
/* A socket listening on addr; -1 with err. */
int	httpd_listen_open(const char *addr, char *err, size_t errlen);
/* Hand fd to http; NULL when it cannot. */
struct evhttp_bound_socket *httpd_listen_bind(struct evhttp *, int fd);
/* SIGTERM or the end: no more accepting, no pause timer. */
void	httpd_listen_stop(void);

/* httpd-conn.c: every connection (evhttp_set_bevcb) */
struct bufferevent *httpd_conn_bev(struct event_base *, void *arg);
/* evhttp has read the whole of req: its route is called. */
void	httpd_conn_request(struct evhttp_request *);
/* Connections evhttp has, those refused or being set up too. */
int	httpd_conn_count(void);

/* httpd-page.c: an evhttp error page, just added to out, as JSON */
void	httpd_page_rewrite(struct evbuffer *out,
	    const struct evbuffer_cb_info *);
/*
 * A JSON error reply with its status line (Retry-After with a 503,
 * WWW-Authenticate with a 401, Connection: close), written to fd now,
 * as far as it takes it.
 */
void	httpd_page_send(int fd, int status, const char *type,
	    const char *code, const char *msg);

#endif

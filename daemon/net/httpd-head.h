/*
 * The header block of an HTTP request, read by the listener before evhttp
 * parses it (httpd-head.c): where it ends, how long a body follows, and
 * whether the request is to be refused at once (no token with a body,
 * a body over the limit announced with Expect: 100-continue, framing
 * that evhttp might read otherwise than a proxy). No libevent: the
 * fuzzer builds it alone.
 */
#ifndef SOTTOD_HTTPD_HEAD_H
#define SOTTOD_HTTPD_HEAD_H

#include <stddef.h>
#include <stdint.h>

/* A header block held back longer than this is refused (400). */
#define HTTPD_HEAD_MAX		(32 * 1024)

enum httpd_body {
	HTTPD_BODY_NONE,
	HTTPD_BODY_LENGTH,	/* Content-Length bytes */
	HTTPD_BODY_CHUNKED,	/* to the end evhttp finds */
};

/* What the block is checked against. */
struct httpd_head_rules {
	const char		*token;		/* [http] token; "" none */
	uint64_t		 max_body;	/* max_request_bytes */
	const char *const	*open;		/* paths that need no token,
						   NULL-terminated */
};

/* The verdict on one header block. */
struct httpd_head {
	size_t		 len;		/* of the block, its blank line too */
	enum httpd_body	 body;
	uint64_t	 length;	/* with HTTPD_BODY_LENGTH */
	int		 status;	/* 0: hand it to evhttp; else refuse */
	const char	*code;		/* the JSON error's code */
	char		 msg[192];
};

/*
 * Where the header block at the start of buf ends (the offset after its
 * blank line; lines end in LF or CRLF, as evhttp reads them), or 0 when
 * it does not yet. from: the length a previous call saw, to scan only
 * what came since.
 */
size_t	httpd_head_end(const char *buf, size_t len, size_t from);
/*
 * Check the complete block buf[0..len) (len from httpd_head_end).
 * Returns h->status: 0, or 400, 401 or 413 with h->code and h->msg.
 */
int	httpd_head_check(const char *buf, size_t len,
	    const struct httpd_head_rules *, struct httpd_head *h);
/*
 * Whether an Authorization value ("Bearer TOKEN", blanks around it
 * allowed) carries token; the token's bytes are compared in constant
 * time. An empty token is never carried.
 */
int	httpd_head_bearer(const char *value, size_t len, const char *token);
/* The same with another scheme ("Token TOKEN", as Deepgram's clients). */
int	httpd_head_scheme(const char *value, size_t len, const char *scheme,
	    const char *token);

#endif

/*
 * multipart/form-data (RFC 7578) request bodies, as the OpenAI audio
 * endpoints take them. Pure functions over bytes: no I/O, no globals,
 * safe on any input (tests/fuzz/fuzz-multipart.c).
 */
#ifndef SOTTOD_MULTIPART_H
#define SOTTOD_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#define MULTIPART_BOUNDARY_MAX	71	/* RFC 2046: 1-70 characters */
#define MULTIPART_NAME_MAX	128
#define MULTIPART_FILENAME_MAX	256
#define MULTIPART_TYPE_MAX	128
#define MULTIPART_HEADERS_MAX	8192	/* one part's header block */

/* One part; data points into the body given to multipart_parse. */
struct multipart_part {
	char		 name[MULTIPART_NAME_MAX];
	char		 filename[MULTIPART_FILENAME_MAX];
	int		 has_filename;
	char		 content_type[MULTIPART_TYPE_MAX];	/* or "" */
	const uint8_t	*data;
	size_t		 len;
};

/*
 * The boundary of a Content-Type header value ("multipart/form-data;
 * boundary=xyz", the boundary quoted or not) into boundary
 * (MULTIPART_BOUNDARY_MAX bytes). Returns 0, or -1 with a message in msg
 * (msglen bytes) when the type is not multipart/form-data or the
 * boundary is missing or malformed.
 */
int	multipart_boundary(const char *content_type, char *boundary,
	    char *msg, size_t msglen);

/*
 * Split body (len bytes) at boundary into at most max parts. Returns the
 * number of parts, or -1 with msg when the body is not a well-formed
 * multipart body: no opening or closing delimiter, a part without a
 * Content-Disposition form-data name, a header block over
 * MULTIPART_HEADERS_MAX, a name or filename too long, or more than max
 * parts.
 */
int	multipart_parse(const uint8_t *body, size_t len, const char *boundary,
	    struct multipart_part *parts, int max, char *msg, size_t msglen);

#endif

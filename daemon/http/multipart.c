/*
 * multipart/form-data bodies (RFC 7578 over RFC 2046's multipart syntax).
 *
 * A body is an optional preamble, then parts each opened by a delimiter
 * line "--BOUNDARY" (after CRLF, or at the very start), and a close
 * delimiter "--BOUNDARY--"; whatever follows it is ignored. A delimiter
 * line may end in blanks (transport padding) before its CRLF. A part is
 * header lines, an empty line, and data up to the CRLF before the next
 * delimiter. Only two headers matter: Content-Disposition (form-data,
 * with name and perhaps filename) and Content-Type. Parameter values
 * are tokens or quoted strings; in a quoted string a backslash escapes
 * only '"' and '\' (a Windows path keeps its backslashes), and
 * filename*=UTF-8''... is percent-decoded.
 *
 * Everything is bounded: header blocks by MULTIPART_HEADERS_MAX, names
 * by their buffers, parts by the caller's max; the data is never
 * copied. Search for delimiters is memmem over the body, so a body is
 * read once.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "multipart.h"

#define CRLF	"\r\n"

static int
multipart_error(char *msg, size_t msglen, const char *what)
{
	snprintf(msg, msglen, "malformed multipart/form-data body: %s", what);
	return -1;
}

/* RFC 2046 bchars (space allowed, not last). */
static int
multipart_bchar(int c)
{
	return isalnum(c) || (c != '\0' && strchr("'()+_,-./:=? ", c) != NULL);
}

static const char *
multipart_skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/*
 * A parameter value at p (a token, or a quoted string with \" and \\
 * escapes) into out (outlen bytes); returns the character after it, or
 * NULL when it does not fit or a quote is not closed.
 */
static const char *
multipart_value(const char *p, char *out, size_t outlen)
{
	size_t n = 0;

	if (*p != '"') {
		while (*p != '\0' && *p != ';' && *p != ' ' && *p != '\t') {
			if (n + 1 >= outlen)
				return NULL;
			out[n++] = *p++;
		}
		out[n] = '\0';
		return p;
	}
	for (p++; *p != '"'; p++) {
		if (*p == '\0')
			return NULL;
		if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
			p++;
		if (n + 1 >= outlen)
			return NULL;
		out[n++] = *p;
	}
	out[n] = '\0';
	return p + 1;
}

/*
 * The next "; name=value" parameter of a header value at *pp into name
 * and value; 1 when one was read, 0 at the end, -1 when malformed.
 */
static int
multipart_param(const char **pp, char *name, size_t namelen, char *value,
    size_t valuelen)
{
	const char *p = multipart_skip_blanks(*pp);
	size_t n = 0;

	if (*p == '\0')
		return 0;
	if (*p != ';')
		return -1;
	p = multipart_skip_blanks(p + 1);
	if (*p == '\0')		/* a trailing ';' */
		return 0;
	while (*p != '\0' && *p != '=' && *p != ';' && *p != ' ' &&
	    *p != '\t') {
		if (n + 1 >= namelen)
			return -1;
		name[n++] = *p++;
	}
	name[n] = '\0';
	p = multipart_skip_blanks(p);
	if (n == 0 || *p != '=')
		return -1;
	p = multipart_skip_blanks(p + 1);
	if ((p = multipart_value(p, value, valuelen)) == NULL)
		return -1;
	*pp = p;
	return 1;
}

/* The media type at the start of s (up to ';' or a blank) equals type. */
static int
multipart_type_is(const char *s, const char *type, const char **ret_end)
{
	size_t n;

	s = multipart_skip_blanks(s);
	n = strcspn(s, "; \t");
	*ret_end = s + n;
	return n == strlen(type) && strncasecmp(s, type, n) == 0;
}

int
multipart_boundary(const char *content_type, char *boundary, char *msg,
    size_t msglen)
{
	char name[32], value[MULTIPART_BOUNDARY_MAX + 1];
	const char *p;
	size_t i, n;
	int rc;

	boundary[0] = '\0';
	if (content_type == NULL || !multipart_type_is(content_type,
	    "multipart/form-data", &p)) {
		snprintf(msg, msglen, "Content-Type must be multipart/form-"
		    "data, not %s", content_type != NULL ? content_type :
		    "missing");
		return -1;
	}
	while ((rc = multipart_param(&p, name, sizeof(name), value,
	    sizeof(value))) == 1) {
		if (strcasecmp(name, "boundary") != 0 || boundary[0] != '\0')
			continue;
		n = strlen(value);
		for (i = 0; i < n && multipart_bchar((unsigned char)value[i]);
		    i++)
			;
		if (n == 0 || n > MULTIPART_BOUNDARY_MAX - 1 || i != n ||
		    value[n - 1] == ' ')
			break;
		memcpy(boundary, value, n + 1);
	}
	if (rc == 0 && boundary[0] != '\0')
		return 0;
	boundary[0] = '\0';
	snprintf(msg, msglen, "Content-Type: %s", rc == 0 ? "no boundary "
	    "parameter" : "a malformed parameter or boundary (1 to 70 "
	    "characters of RFC 2046)");
	return -1;
}

static int
multipart_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* filename*=UTF-8''percent%20encoded (RFC 5987); -1 when malformed. */
static int
multipart_ext_value(const char *v, char *out, size_t outlen)
{
	const char *q;
	size_t n = 0;
	int hi, lo;

	if ((q = strstr(v, "''")) == NULL)
		return -1;
	for (q += 2; *q != '\0'; q++) {
		if (n + 1 >= outlen)
			return -1;
		if (*q == '%') {
			if ((hi = multipart_hex((unsigned char)q[1])) < 0 ||
			    (lo = multipart_hex((unsigned char)q[2])) < 0 ||
			    (hi == 0 && lo == 0))
				return -1;
			out[n++] = (char)(hi << 4 | lo);
			q += 2;
		} else
			out[n++] = *q;
	}
	out[n] = '\0';
	return 0;
}

/* Content-Disposition: form-data; name="..."; filename="..." */
static int
multipart_disposition(const char *v, struct multipart_part *part)
{
	char name[32], value[MULTIPART_FILENAME_MAX];
	const char *p;
	int rc, ext = 0;

	if (!multipart_type_is(v, "form-data", &p))
		return -1;
	while ((rc = multipart_param(&p, name, sizeof(name), value,
	    sizeof(value))) == 1) {
		if (strcasecmp(name, "name") == 0) {
			if (strlen(value) >= sizeof(part->name))
				return -1;
			memcpy(part->name, value, strlen(value) + 1);
		} else if (strcasecmp(name, "filename*") == 0) {
			if (multipart_ext_value(value, part->filename,
			    sizeof(part->filename)) != 0)
				return -1;
			part->has_filename = ext = 1;
		} else if (strcasecmp(name, "filename") == 0 && !ext) {
			memcpy(part->filename, value, strlen(value) + 1);
			part->has_filename = 1;
		}
	}
	return rc == 0 && part->name[0] != '\0' ? 0 : -1;
}

/* One header line (without its CRLF, NUL-terminated) of a part. */
static int
multipart_header(char *line, struct multipart_part *part, char *msg,
    size_t msglen)
{
	char *colon, *v;
	size_t n;

	if (*line == ' ' || *line == '\t')
		return multipart_error(msg, msglen, "a folded part header");
	if ((colon = strchr(line, ':')) == NULL || colon == line)
		return multipart_error(msg, msglen, "a part header without "
		    "a name and ':'");
	*colon = '\0';
	v = (char *)multipart_skip_blanks(colon + 1);
	n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		v[--n] = '\0';
	if (strcasecmp(line, "Content-Disposition") == 0) {
		if (multipart_disposition(v, part) != 0)
			return multipart_error(msg, msglen, "a Content-"
			    "Disposition that is not form-data with a name "
			    "(or a name or filename too long)");
	} else if (strcasecmp(line, "Content-Type") == 0) {
		if (n >= sizeof(part->content_type))
			return multipart_error(msg, msglen, "a part's "
			    "Content-Type is too long");
		memcpy(part->content_type, v, n + 1);
	}
	return 0;
}

/* The header block h[n] (no final CRLF CRLF) of a part. */
static int
multipart_headers(const uint8_t *h, size_t n, struct multipart_part *part,
    char *msg, size_t msglen)
{
	char block[MULTIPART_HEADERS_MAX + 1], *line, *next;

	if (n > MULTIPART_HEADERS_MAX)
		return multipart_error(msg, msglen, "a part's headers are "
		    "over 8 KiB");
	if (memchr(h, '\0', n) != NULL)
		return multipart_error(msg, msglen, "a NUL byte in a part's "
		    "headers");
	memcpy(block, h, n);
	block[n] = '\0';
	for (line = n > 0 ? block : NULL; line != NULL; line = next) {
		if ((next = strstr(line, CRLF)) != NULL) {
			*next = '\0';
			next += 2;
		}
		if (multipart_header(line, part, msg, msglen) != 0)
			return -1;
	}
	if (part->name[0] == '\0')
		return multipart_error(msg, msglen, "a part without "
		    "Content-Disposition: form-data; name=...");
	return 0;
}

/*
 * After a delimiter at p: 1 for the close delimiter, 0 when a part
 * follows (*ret_next at its first header byte), -1 when malformed.
 */
static int
multipart_after_delimiter(const uint8_t *p, const uint8_t *end,
    const uint8_t **ret_next)
{
	if (end - p >= 2 && p[0] == '-' && p[1] == '-')
		return 1;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
		return -1;
	*ret_next = p + 2;
	return 0;
}

int
multipart_parse(const uint8_t *body, size_t len, const char *boundary,
    struct multipart_part *parts, int max, char *msg, size_t msglen)
{
	char delim[MULTIPART_BOUNDARY_MAX + 8];
	const uint8_t *end = body + len, *p, *h, *d;
	size_t dlen;
	int n = 0, rc;

	dlen = (size_t)snprintf(delim, sizeof(delim), CRLF "--%s", boundary);
	if (*boundary == '\0' || dlen >= sizeof(delim))
		return multipart_error(msg, msglen, "bad boundary");
	/* the first delimiter may open the body, without its CRLF */
	if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0)
		p = body + dlen - 2;
	else if ((p = memmem(body, len, delim, dlen)) != NULL)
		p += dlen;
	else
		return multipart_error(msg, msglen, "no delimiter line with "
		    "the boundary of the Content-Type");
	for (;;) {
		if ((rc = multipart_after_delimiter(p, end, &h)) < 0)
			return multipart_error(msg, msglen, "a delimiter line "
			    "that does not end in CRLF");
		if (rc == 1)
			break;
		if (n == max) {
			snprintf(msg, msglen, "more than %d form fields", max);
			return -1;
		}
		memset(&parts[n], 0, sizeof(parts[n]));
		if (end - h >= 2 && h[0] == '\r' && h[1] == '\n')
			d = h;		/* no headers at all */
		else if ((d = memmem(h, (size_t)(end - h) <
		    MULTIPART_HEADERS_MAX + 4 ? (size_t)(end - h) :
		    MULTIPART_HEADERS_MAX + 4, CRLF CRLF, 4)) == NULL)
			return multipart_error(msg, msglen, "a part's headers "
			    "do not end with an empty line within 8 KiB");
		if (multipart_headers(h, (size_t)(d - h), &parts[n], msg,
		    msglen) != 0)
			return -1;
		d += d == h ? 2 : 4;
		if ((p = memmem(d, (size_t)(end - d), delim, dlen)) == NULL)
			return multipart_error(msg, msglen, "no closing "
			    "delimiter (the body is cut short?)");
		parts[n].data = d;
		parts[n].len = (size_t)(p - d);
		n++;
		p += dlen;
	}
	if (n == 0)
		return multipart_error(msg, msglen, "no parts");
	return n;
}

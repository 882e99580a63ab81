/*
 * Configuration values: one parser per kind of value (strings, numbers,
 * sizes with K/M/G, yes/no, octal modes, listen addresses, tokens, and the
 * keys with a fixed set of words). Each checks the value against its
 * key's limits and stores it at the key's field; the message names the
 * key and says what was expected.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "config-key.h"
#include "listen-addr.h"

/* A non-empty string that fits its field. */
int
config_parse_string(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	size_t len = strlen(value);

	if (len == 0) {
		snprintf(msg, msglen, "%s: empty value", k->key);
		return -1;
	}
	if (len >= k->size) {
		snprintf(msg, msglen, "%s: value too long (%zu bytes, at most "
		    "%zu)", k->key, len, k->size - 1);
		return -1;
	}
	memcpy(field, value, len + 1);
	return 0;
}

int
config_parse_precision(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	if (strcmp(value, "auto") != 0 && strcmp(value, "fp32") != 0 &&
	    strcmp(value, "bf16") != 0 && strcmp(value, "int8") != 0) {
		snprintf(msg, msglen, "%s: \"%s\" is not auto, fp32, bf16 or "
		    "int8", k->key, value);
		return -1;
	}
	return config_parse_string(k, field, value, msg, msglen);
}

/* "auto" or a Whisper language code: two or three lower-case letters. */
int
config_parse_language(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	size_t i, len = strlen(value);

	if (strcmp(value, "auto") == 0)
		return config_parse_string(k, field, value, msg, msglen);
	for (i = 0; i < len; i++) {
		if (!islower((unsigned char)value[i]))
			break;
	}
	if (len < 2 || len > 3 || i != len) {
		snprintf(msg, msglen, "%s: \"%s\" is not a language code "
		    "(en, de, ...) or auto", k->key, value);
		return -1;
	}
	return config_parse_string(k, field, value, msg, msglen);
}

int
config_parse_log_level(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	if (strcmp(value, "warning") != 0 && strcmp(value, "info") != 0 &&
	    strcmp(value, "debug") != 0) {
		snprintf(msg, msglen, "%s: \"%s\" is not warning, info or "
		    "debug", k->key, value);
		return -1;
	}
	return config_parse_string(k, field, value, msg, msglen);
}

/* ADDRESS:PORT (listen-addr.c), or empty: off. */
int
config_parse_listen(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char m[CONFIG_MSG_MAX];

	if (*value != '\0' && listen_addr_parse(value, &ss, &len, m,
	    sizeof(m)) != 0) {
		snprintf(msg, msglen, "%s: %s", k->key, m);
		return -1;
	}
	if (strlen(value) >= k->size) {
		snprintf(msg, msglen, "%s: value too long", k->key);
		return -1;
	}
	memcpy(field, value, strlen(value) + 1);
	return 0;
}

/* Empty (none), or 16 to 255 printable ASCII characters, no blanks. */
int
config_parse_token(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	size_t i, len = strlen(value);

	for (i = 0; i < len; i++)
		if (!isgraph((unsigned char)value[i]))
			break;
	if (len != 0 && (len < 16 || len >= k->size || i != len)) {
		snprintf(msg, msglen, "%s: a token is 16 to %zu printable "
		    "ASCII characters without blanks", k->key, k->size - 1);
		return -1;
	}
	memcpy(field, value, len + 1);
	return 0;
}

/* Which sessions have voice activity detection. */
int
config_parse_vad(const struct config_key *k, void *field, const char *value,
    char *msg, size_t msglen)
{
	if (strcmp(value, "live") != 0 && strcmp(value, "all") != 0 &&
	    strcmp(value, "off") != 0) {
		snprintf(msg, msglen, "%s: \"%s\" is not live, all or off",
		    k->key, value);
		return -1;
	}
	return config_parse_string(k, field, value, msg, msglen);
}

/*
 * [wyoming] answer: live (the utterance's live session, finished) or
 * whole (the utterance decoded again as one file).
 */
int
config_parse_answer(const struct config_key *k, void *field,
    const char *value, char *msg, size_t msglen)
{
	if (strcmp(value, "live") != 0 && strcmp(value, "whole") != 0) {
		snprintf(msg, msglen, "%s: \"%s\" is not live (finish the "
		    "live session) or whole (decode the utterance again)",
		    k->key, value);
		return -1;
	}
	return config_parse_string(k, field, value, msg, msglen);
}

/* File permission bits in octal: 0660, 666 (at most 0777). */
int
config_parse_mode(const struct config_key *k, void *field, const char *value,
    char *msg, size_t msglen)
{
	size_t len = strlen(value);
	long v;

	if (len < 3 || len > 4 || strspn(value, "01234567") != len ||
	    (v = strtol(value, NULL, 8)) > k->max) {
		snprintf(msg, msglen, "%s: \"%s\" is not an octal mode "
		    "such as 0660 (at most 0777)", k->key, value);
		return -1;
	}
	*(int *)field = (int)v;
	return 0;
}

/* A decimal integer: digits with an optional leading minus sign only. */
static int
config_parse_number(const struct config_key *k, const char *value,
    const char **ret_end, unsigned long long *ret, int *ret_neg,
    char *msg, size_t msglen)
{
	const char *p = value;
	char *end;

	*ret_neg = (*p == '-');
	if (*ret_neg)
		p++;
	if (!isdigit((unsigned char)*p)) {
		snprintf(msg, msglen, "%s: \"%s\" is not a number", k->key,
		    value);
		return -1;
	}
	errno = 0;
	*ret = strtoull(p, &end, 10);
	if (errno == ERANGE) {
		snprintf(msg, msglen, "%s: %s is too large", k->key, value);
		return -1;
	}
	*ret_end = end;
	return 0;
}

static int
config_range_error(const struct config_key *k, const char *value, char *msg,
    size_t msglen)
{
	snprintf(msg, msglen, "%s: %s is out of range (%lld to %lld)", k->key,
	    value, k->min, k->max);
	return -1;
}

int
config_parse_int(const struct config_key *k, void *field, const char *value,
    char *msg, size_t msglen)
{
	unsigned long long u;
	const char *end;
	long long v;
	int neg;

	if (config_parse_number(k, value, &end, &u, &neg, msg, msglen) == -1)
		return -1;
	if (*end != '\0') {
		snprintf(msg, msglen, "%s: \"%s\" is not a whole number",
		    k->key, value);
		return -1;
	}
	if (u > (unsigned long long)LLONG_MAX)
		return config_range_error(k, value, msg, msglen);
	v = neg ? -(long long)u : (long long)u;
	if (v < k->min || v > k->max)
		return config_range_error(k, value, msg, msglen);
	*(int *)field = (int)v;
	return 0;
}

/* A byte count with an optional K, M or G (KiB, MiB, GiB) suffix. */
int
config_parse_size(const struct config_key *k, void *field, const char *value,
    char *msg, size_t msglen)
{
	static const struct {
		const char	*suffix;
		size_t		 mul;
	} units[] = {
		{ "", 1 }, { "B", 1 },
		{ "K", CONFIG_KIB }, { "KiB", CONFIG_KIB },
		{ "M", CONFIG_MIB }, { "MiB", CONFIG_MIB },
		{ "G", CONFIG_GIB }, { "GiB", CONFIG_GIB },
	};
	unsigned long long u;
	const char *end;
	size_t i;
	int neg;

	if (config_parse_number(k, value, &end, &u, &neg, msg, msglen) == -1)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0)
			break;
	}
	if (i == sizeof(units) / sizeof(units[0])) {
		snprintf(msg, msglen, "%s: \"%s\" is not a size (bytes, or a "
		    "number followed by K, M or G)", k->key, value);
		return -1;
	}
	if (neg || u > (unsigned long long)k->max / units[i].mul ||
	    u * units[i].mul < (unsigned long long)k->min) {
		snprintf(msg, msglen, "%s: %s is out of range (%lld to %lld "
		    "bytes)", k->key, value, k->min, k->max);
		return -1;
	}
	*(size_t *)field = (size_t)(u * units[i].mul);
	return 0;
}

int
config_parse_bool(const struct config_key *k, void *field, const char *value,
    char *msg, size_t msglen)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(value, yes[i]) == 0) {
			*(int *)field = 1;
			return 0;
		}
		if (strcasecmp(value, no[i]) == 0) {
			*(int *)field = 0;
			return 0;
		}
	}
	snprintf(msg, msglen, "%s: \"%s\" is not yes or no", k->key, value);
	return -1;
}

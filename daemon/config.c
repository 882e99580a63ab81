/*
 * Configuration file.  libinih splits the file into (section, key, value);
 * config_handler looks the pair up in config_keys, a table sorted by section
 * and key, whose parser checks the value and stores it at the field's offset.
 * The line reader (config-file.c: a regular file of at most 1 MiB) counts
 * lines, so every message is "path:line: message", and strips leading
 * blanks so that inih never treats an indented line as the continuation of
 * the previous value.  The first error wins; parsing goes on only to let
 * inih finish the file.
 *
 * Each key is marked live when the running daemon can apply a new value
 * (SIGHUP: config_diff, config_keep_restart_keys; a new model is loaded
 * by daemon/reload.c); the others (the socket, the threads, the
 * precision, the microphone) take effect at the next start.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "config.h"
#include "config-file.h"
#include "listen-addr.h"

#define CONFIG_MSG_MAX		256
#define CONFIG_KIB		((size_t)1024)
#define CONFIG_MIB		(CONFIG_KIB * 1024)
#define CONFIG_GIB		(CONFIG_MIB * 1024)

/* Copy a string into a char array field, truncating. */
#define CONFIG_SET(field, s)	snprintf((field), sizeof(field), "%s", (s))

struct config_key;
typedef int config_parse_fn(const struct config_key *, void *, const char *,
    char *, size_t);

enum config_type {
	CONFIG_STRING,
	CONFIG_INT,
	CONFIG_SIZE,
	CONFIG_BOOL,
	CONFIG_MODE,
};

struct config_key {
	const char		*section;
	const char		*key;
	config_parse_fn		*parse;
	enum config_type	 type;
	size_t			 offset;
	size_t			 size;		/* of a string field */
	long long		 min;		/* integer and size limits */
	long long		 max;
	int			 live;		/* applied on SIGHUP */
};

/* Per-load state, passed to inih as its user pointer. */
struct config_ctx {
	struct config	*cfg;
	const char	*path;
	struct config_file file;
	int		 line;
	int		 err_line;
	char		 err[CONFIG_MSG_MAX];
	int		 seen[64];	/* line of each key in config_keys */
};

static config_parse_fn config_parse_string;
static config_parse_fn config_parse_int;
static config_parse_fn config_parse_size;
static config_parse_fn config_parse_bool;
static config_parse_fn config_parse_precision;
static config_parse_fn config_parse_language;
static config_parse_fn config_parse_log_level;
static config_parse_fn config_parse_vad;
static config_parse_fn config_parse_mode;
static config_parse_fn config_parse_listen;
static config_parse_fn config_parse_token;

#define LIVE	1
#define RESTART	0
#define S(sec, k, fn, field, live) \
	{ sec, k, fn, CONFIG_STRING, offsetof(struct config, field), \
	    sizeof(((struct config *)0)->field), 0, 0, live }
#define I(sec, k, field, lo, hi, live) \
	{ sec, k, config_parse_int, CONFIG_INT, \
	    offsetof(struct config, field), sizeof(int), lo, hi, live }
#define Z(sec, k, field, lo, hi, live) \
	{ sec, k, config_parse_size, CONFIG_SIZE, \
	    offsetof(struct config, field), sizeof(size_t), lo, hi, live }
#define B(sec, k, field, live) \
	{ sec, k, config_parse_bool, CONFIG_BOOL, \
	    offsetof(struct config, field), sizeof(int), 0, 1, live }
#define M(sec, k, field, live) \
	{ sec, k, config_parse_mode, CONFIG_MODE, \
	    offsetof(struct config, field), sizeof(int), 0, 0777, live }

/*
 * Sorted by section, then key: config_find uses bsearch.  LIVE keys are
 * applied by a SIGHUP (engine keys to sessions opened after it).
 */
static const struct config_key config_keys[] = {
	I("engine", "beam_size", beam_size, 1, 16, LIVE),
	S("engine", "language", config_parse_language, language, LIVE),
	S("engine", "model", config_parse_string, model, LIVE),
	S("engine", "precision", config_parse_precision, precision, RESTART),
	I("engine", "step_ms", step_ms, 100, 30000, LIVE),
	I("engine", "threads", threads, 0, 1024, RESTART),
	S("engine", "vad", config_parse_vad, vad, LIVE),
	S("engine", "vad_model", config_parse_string, vad_model, RESTART),
	I("http", "beam_size", http_beam_size, 1, 16, LIVE),
	S("http", "listen", config_parse_listen, http_listen, RESTART),
	Z("http", "max_request_bytes", http_max_request_bytes,
	    64 * 1024, 1024LL * 1024 * 1024, RESTART),
	I("http", "request_timeout_seconds", http_timeout_s, 1, 3600,
	    RESTART),
	S("http", "token", config_parse_token, http_token, RESTART),
	I("mic", "channels", mic_channels, 1, 32, RESTART),
	S("mic", "device", config_parse_string, mic_device, RESTART),
	B("mic", "enabled", mic_enabled, RESTART),
	S("mic", "language", config_parse_language, mic_language, RESTART),
	I("mic", "rate", mic_rate, 8000, 192000, RESTART),
	I("server", "handshake_timeout_seconds", handshake_timeout_s, 1, 3600,
	    LIVE),
	I("server", "idle_timeout_seconds", idle_timeout_s, 0, 86400, LIVE),
	S("server", "log_level", config_parse_log_level, log_level, LIVE),
	Z("server", "max_client_buffer_bytes", max_client_buffer_bytes,
	    4 * 1024, 1024LL * 1024 * 1024, LIVE),
	I("server", "max_connections", max_connections, 1, 65536, LIVE),
	I("server", "max_connections_per_uid", max_connections_per_uid,
	    1, 4096, LIVE),
	Z("server", "max_frame_bytes", max_frame_bytes,
	    4096, 64LL * 1024 * 1024, LIVE),
	I("server", "max_sessions", max_sessions, 1, 1024, LIVE),
	I("server", "reconnect_grace_seconds", reconnect_grace_s, 0, 3600,
	    LIVE),
	I("server", "shutdown_grace_seconds", shutdown_grace_s, 0, 3600, LIVE),
	S("server", "socket", config_parse_string, socket_path, RESTART),
	M("server", "socket_mode", socket_mode, LIVE),
	I("wyoming", "beam_size", wyoming_beam_size, 1, 16, LIVE),
	S("wyoming", "listen", config_parse_listen, wyoming_listen, RESTART),
	Z("wyoming", "max_event_bytes", wyoming_max_event_bytes,
	    4096, 64LL * 1024 * 1024, LIVE),
	I("wyoming", "max_utterance_seconds", wyoming_max_utterance_s, 1,
	    3600, LIVE),
};
#define CONFIG_NKEYS	(sizeof(config_keys) / sizeof(config_keys[0]))
_Static_assert(CONFIG_NKEYS <= 64, "struct config_ctx seen[] too small");
_Static_assert(CONFIG_NKEYS <= sizeof(((struct config_lines *)0)->line) /
    sizeof(int), "struct config_lines line[] too small");

/* Sections in the order config_dump prints them. */
static const char *const config_sections[] = { "server", "engine", "mic",
    "http", "wyoming" };

void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	CONFIG_SET(cfg->socket_path, "/run/sotto/sottod.sock");
	cfg->max_sessions = 16;
	cfg->max_frame_bytes = CONFIG_MIB;
	cfg->max_client_buffer_bytes = 4 * CONFIG_MIB;
	cfg->reconnect_grace_s = 30;
	cfg->max_connections = 256;
	cfg->max_connections_per_uid = 32;
	cfg->handshake_timeout_s = 10;
	cfg->idle_timeout_s = 120;
	cfg->shutdown_grace_s = 20;
	cfg->socket_mode = 0666;
	CONFIG_SET(cfg->log_level, "info");
	CONFIG_SET(cfg->model, "tiny.en");
	cfg->threads = 0;
	CONFIG_SET(cfg->precision, "auto");
	cfg->step_ms = 1000;
	cfg->beam_size = 1;
	CONFIG_SET(cfg->language, "en");
	CONFIG_SET(cfg->vad, "live");
	CONFIG_SET(cfg->vad_model, "silero-vad");
	cfg->mic_enabled = 0;
	CONFIG_SET(cfg->mic_device, "default");
	cfg->mic_rate = 16000;
	cfg->mic_channels = 1;
	CONFIG_SET(cfg->mic_language, cfg->language);
	cfg->http_beam_size = 5;
	cfg->http_max_request_bytes = 25 * CONFIG_MIB;
	cfg->http_timeout_s = 60;
	cfg->wyoming_max_event_bytes = CONFIG_MIB;
	cfg->wyoming_max_utterance_s = 120;
	cfg->wyoming_beam_size = 5;
}

/* A non-empty string that fits its field. */
static int
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

static int
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
static int
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

static int
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
static int
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
static int
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
static int
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

/* File permission bits in octal: 0660, 666 (at most 0777). */
static int
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

static int
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
static int
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

static int
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

static int
config_key_cmp(const void *a, const void *b)
{
	const struct config_key *x = a, *y = b;
	int r;

	if ((r = strcmp(x->section, y->section)) != 0)
		return r;
	return strcmp(x->key, y->key);
}

static const struct config_key *
config_find(const char *section, const char *key)
{
	struct config_key want = { .section = section, .key = key };

	return bsearch(&want, config_keys, CONFIG_NKEYS, sizeof(want),
	    config_key_cmp);
}

int
config_line(const struct config_lines *lines, const char *section,
    const char *key)
{
	const struct config_key *k = config_find(section, key);

	return k == NULL ? 0 : lines->line[k - config_keys];
}

static int
config_section_known(const char *section)
{
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		if (strcmp(config_keys[i].section, section) == 0)
			return 1;
	}
	return 0;
}

/* Keep the first error, with the line it was found on. */
static int
config_error(struct config_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
config_error(struct config_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->err_line != 0 && ctx->err_line <= ctx->line)
		return 0;
	ctx->err_line = ctx->line;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	return 0;
}

/* inih callback: returns nonzero when the pair was accepted. */
static int
config_handler(void *user, const char *section, const char *key,
    const char *value)
{
	struct config_ctx *ctx = user;
	const struct config_key *k;
	char msg[CONFIG_MSG_MAX];
	size_t i;

	if (*section == '\0')
		return config_error(ctx, "\"%s\" is outside a section "
		    "([server], [engine] or [mic])", key);
	if ((k = config_find(section, key)) == NULL) {
		if (!config_section_known(section))
			return config_error(ctx, "unknown section [%s]",
			    section);
		return config_error(ctx, "unknown key \"%s\" in [%s]", key,
		    section);
	}
	i = (size_t)(k - config_keys);
	if (ctx->seen[i] != 0)
		return config_error(ctx, "%s: given twice in [%s] (first on "
		    "line %d)", key, section, ctx->seen[i]);
	ctx->seen[i] = ctx->line;
	/*
	 * inih keeps ";x" in "key =;x" (no blank before the ';') but reads
	 * "key = ;x" as a comment, so such a value would not survive
	 * --check-config's "key = value" (found by tests/fuzz/fuzz-config).
	 */
	if (*value == ';')
		return config_error(ctx, "%s: a value cannot start with ';' "
		    "(\" ;\" starts a comment)", key);
	if (k->parse(k, (char *)ctx->cfg + k->offset, value, msg,
	    sizeof(msg)) == -1)
		return config_error(ctx, "%s", msg);
	return 1;
}

/* inih reader: the next line, with what the line reader found wrong. */
static char *
config_reader(char *buf, int size, void *user)
{
	struct config_ctx *ctx = user;

	if (config_file_line(&ctx->file, buf, size) == NULL)
		return NULL;
	ctx->line = ctx->file.line;
	if (ctx->file.problem[0] != '\0')
		config_error(ctx, "%s", ctx->file.problem);
	return buf;
}

int
config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
	return config_load_lines(cfg, path, NULL, err, errlen);
}

int
config_load_lines(struct config *cfg, const char *path,
    struct config_lines *lines, char *err, size_t errlen)
{
	struct config_ctx ctx;
	int line, mic_language_set;

	memset(&ctx, 0, sizeof(ctx));
	ctx.cfg = cfg;
	ctx.path = path;
	if (config_file_open(&ctx.file, path, err, errlen) != 0)
		return -1;
	line = ini_parse_stream(config_reader, &ctx, config_handler, &ctx);
	if (config_file_close(&ctx.file, ctx.err_line == 0, err, errlen) != 0)
		return -1;
	if (line > 0 && (ctx.err_line == 0 || line < ctx.err_line)) {
		ctx.err_line = line;
		snprintf(ctx.err, sizeof(ctx.err), "syntax error (expected "
		    "[section], key = value or a # comment)");
	}
	if (ctx.err_line != 0 || line < 0) {
		snprintf(err, errlen, "%s:%d: %s", path, ctx.err_line,
		    line < 0 ? "out of memory" : ctx.err);
		return -1;
	}
	if (lines != NULL)
		memcpy(lines->line, ctx.seen, sizeof(lines->line));
	mic_language_set = ctx.seen[config_find("mic", "language") -
	    config_keys] != 0;
	if (!mic_language_set)
		CONFIG_SET(cfg->mic_language, cfg->language);
	return 0;
}

static void
config_format_size(char *buf, size_t len, size_t v)
{
	if (v != 0 && v % CONFIG_GIB == 0)
		snprintf(buf, len, "%zuG", v / CONFIG_GIB);
	else if (v != 0 && v % CONFIG_MIB == 0)
		snprintf(buf, len, "%zuM", v / CONFIG_MIB);
	else if (v != 0 && v % CONFIG_KIB == 0)
		snprintf(buf, len, "%zuK", v / CONFIG_KIB);
	else
		snprintf(buf, len, "%zu", v);
}

/* The value of key k in cfg as the file would give it. */
static void
config_format(const struct config *cfg, const struct config_key *k,
    char *buf, size_t len)
{
	const void *field = (const char *)cfg + k->offset;

	switch (k->type) {
	case CONFIG_STRING:
		snprintf(buf, len, "%s", (const char *)field);
		break;
	case CONFIG_INT:
		snprintf(buf, len, "%d", *(const int *)field);
		break;
	case CONFIG_SIZE:
		config_format_size(buf, len, *(const size_t *)field);
		break;
	case CONFIG_BOOL:
		snprintf(buf, len, "%s", *(const int *)field ? "yes" : "no");
		break;
	case CONFIG_MODE:
		snprintf(buf, len, "%04o", *(const int *)field);
		break;
	}
}

void
config_dump(const struct config *cfg, FILE *fp)
{
	char value[CONFIG_MSG_MAX];
	size_t s, i;

	for (s = 0; s < sizeof(config_sections) / sizeof(config_sections[0]);
	    s++) {
		fprintf(fp, "%s[%s]\n", s > 0 ? "\n" : "", config_sections[s]);
		for (i = 0; i < CONFIG_NKEYS; i++) {
			if (strcmp(config_keys[i].section,
			    config_sections[s]) != 0)
				continue;
			config_format(cfg, &config_keys[i], value,
			    sizeof(value));
			fprintf(fp, "%s = %s\n", config_keys[i].key, value);
		}
	}
}

static int
config_key_differs(const struct config *a, const struct config *b,
    const struct config_key *k)
{
	const char *x = (const char *)a + k->offset;
	const char *y = (const char *)b + k->offset;

	if (k->type == CONFIG_STRING)
		return strcmp(x, y) != 0;
	return memcmp(x, y, k->size) != 0;
}

int
config_diff(const struct config *old, const struct config *new,
    config_diff_fn *fn, void *arg)
{
	char a[CONFIG_MSG_MAX], b[CONFIG_MSG_MAX];
	size_t i;
	int n = 0;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		if (!config_key_differs(old, new, &config_keys[i]))
			continue;
		config_format(old, &config_keys[i], a, sizeof(a));
		config_format(new, &config_keys[i], b, sizeof(b));
		fn(config_keys[i].section, config_keys[i].key, a, b,
		    config_keys[i].live, arg);
		n++;
	}
	return n;
}

void
config_keep_restart_keys(struct config *cfg, const struct config *old)
{
	const struct config_key *k;
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		k = &config_keys[i];
		if (!k->live)
			memcpy((char *)cfg + k->offset,
			    (const char *)old + k->offset, k->size);
	}
}

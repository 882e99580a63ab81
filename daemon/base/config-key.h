/*
 * The table config.c reads a file with: what a key is (section, name,
 * parser, field, limits, whether a SIGHUP applies it) and the value
 * parsers (config-value.c). Internal to daemon/config*.c.
 */
#ifndef SOTTOD_CONFIG_KEY_H
#define SOTTOD_CONFIG_KEY_H

#include <stddef.h>
#include <stdio.h>

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

/*
 * A value parser: checks value for key k and stores it in field (the
 * key's field of struct config). Returns 0, or -1 with a message naming
 * the key in msg.
 */
config_parse_fn config_parse_string;
config_parse_fn config_parse_int;
config_parse_fn config_parse_size;
config_parse_fn config_parse_bool;
config_parse_fn config_parse_precision;
config_parse_fn config_parse_language;
config_parse_fn config_parse_log_level;
config_parse_fn config_parse_vad;
config_parse_fn config_parse_answer;
config_parse_fn config_parse_mode;
config_parse_fn config_parse_listen;
config_parse_fn config_parse_token;

#endif

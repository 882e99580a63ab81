/*
 * Error messages inside libsotto.
 *
 * Every function that can fail returns 0 or a negative SOTTO_E* code and,
 * when the caller passes a buffer, writes a message a user can act on into
 * it (at most SOTTO_ERR_MAX bytes including the NUL).
 */
#ifndef SOTTO_ERR_H
#define SOTTO_ERR_H

#include "sotto.h"

/* Format a message into err (may be NULL); returns code for tail calls. */
int	err_set(char *err, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/*
 * The command that fetches and converts models, for messages that say
 * what to run: "sotto-fetch-model" installed, "scripts/fetch-model" when
 * this libsotto is the one in its build tree.
 */
const char *err_fetch_command(void);

#endif

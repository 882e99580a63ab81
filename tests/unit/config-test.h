/*
 * What the config tests share (config-test.c): a scratch directory with
 * a config file to write, and loads that fail the test on a surprise.
 */
#ifndef SOTTO_CONFIG_TEST_H
#define SOTTO_CONFIG_TEST_H

#include <stddef.h>

#include "config.h"

#define TEST_ERR_MAX	1024

extern char test_dir[256];
extern char test_file[300];	/* the config file */
extern char test_other[300];	/* a FIFO, a link, a directory */

/* A config file with most keys set to a value not their default. */
extern const char test_every_key[];

/* Write text (or len bytes, NUL bytes too) to test_file; its path. */
const char *test_write(const char *text);
const char *test_write_bytes(const char *bytes, size_t len);
/* Load path, expect exactly the error message want. */
void	test_load_path_bad(const char *path, const char *want);
/* Load text over the defaults; fail the test on an error. */
void	test_load_ok(const char *text, struct config *cfg);
/* Load text, expect an error that is exactly "file:line: message". */
void	test_load_bad(const char *text, int line, const char *message);
/* cmocka group setup and teardown: the scratch directory. */
int	test_setup(void **state);
int	test_teardown(void **state);

#endif

/*
 * Reading sottod's config file for config.c: only a regular file of at
 * most CONFIG_MAX_BYTES, line by line in the shape libinih's reader
 * takes, with what is wrong with each line (a NUL byte, too long).
 */
#ifndef SOTTOD_CONFIG_FILE_H
#define SOTTOD_CONFIG_FILE_H

#include <stddef.h>
#include <stdio.h>

/* The shipped file is 4 KB; the bound also bounds the line count. */
#define CONFIG_MAX_BYTES	((size_t)1024 * 1024)
#define CONFIG_PROBLEM_MAX	96

/* One open config file; owns fp, borrows path. */
struct config_file {
	const char	*path;
	FILE		*fp;
	size_t		 bytes;		/* read so far */
	int		 line;		/* lines returned so far */
	int		 too_big;	/* it grew past CONFIG_MAX_BYTES */
	char		 problem[CONFIG_PROBLEM_MAX]; /* of the last line, or "" */
};

/*
 * Open path if it is a regular file (or a link to one) of at most
 * CONFIG_MAX_BYTES; 0, or -1 with "path: message" in err.  Nothing else
 * is opened for reading: a FIFO would block until a writer came and
 * /dev/zero never ends, and sottod reads the file on its event loop.
 */
int	config_file_open(struct config_file *, const char *path, char *err,
	    size_t errlen);

/*
 * The next line into buf (at most size - 1 bytes, as fgets), leading
 * blanks removed; NULL at the end.  problem says what is wrong with it.
 */
char	*config_file_line(struct config_file *, char *buf, int size);

/*
 * Close; -1 with a message in err if the file grew past the bound, or
 * (when read_errors) if reading failed.
 */
int	config_file_close(struct config_file *, int read_errors, char *err,
	    size_t errlen);

#endif /* SOTTOD_CONFIG_FILE_H */

/*
 * The config file as lines, for libinih (see config-file.h).
 *
 * Why not fopen and fgets: SIGHUP reads the file on the event loop, and
 * a config "file" that is a FIFO (the open waits for a writer) or a link
 * to /dev/zero (fgets returns NUL-filled lines for ever, and the line
 * counter overflows) stopped the daemon.  So only a regular file is
 * opened, O_NONBLOCK so that not even the open of a FIFO can wait, and
 * reading stops at CONFIG_MAX_BYTES.  A line is read byte by byte so
 * that a NUL byte in it is reported as what it is.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config-file.h"

/* What a file that is not a regular file is, for the message. */
static const char *
config_file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a file";
}

int
config_file_open(struct config_file *f, const char *path, char *err,
    size_t errlen)
{
	struct stat st;
	int fd;

	memset(f, 0, sizeof(*f));
	f->path = path;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY |
	    O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(err, errlen, "%s: not a regular file (%s)", path,
		    config_file_kind(st.st_mode));
	else if ((unsigned long long)st.st_size > CONFIG_MAX_BYTES)
		snprintf(err, errlen, "%s: %lld bytes, larger than a config "
		    "file can be (%zu)", path, (long long)st.st_size,
		    CONFIG_MAX_BYTES);
	else if ((f->fp = fdopen(fd, "r")) == NULL)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	else
		return 0;
	close(fd);
	return -1;
}

/* The next byte, or EOF; EOF also past CONFIG_MAX_BYTES (a growing file). */
static int
config_file_getc(struct config_file *f)
{
	int c;

	if (f->too_big || (c = getc(f->fp)) == EOF)
		return EOF;
	if (++f->bytes > CONFIG_MAX_BYTES) {
		f->too_big = 1;
		return EOF;
	}
	return c;
}

char *
config_file_line(struct config_file *f, char *buf, int size)
{
	size_t len = 0, skip, nul = 0;
	int c = EOF;

	f->problem[0] = '\0';
	while (len + 1 < (size_t)size && (c = config_file_getc(f)) != EOF) {
		if (c == '\0' && nul == 0)
			nul = len + 1;
		buf[len++] = (char)c;
		if (c == '\n')
			break;
	}
	if (len == 0)
		return NULL;
	buf[len] = '\0';
	f->line++;
	if (nul != 0)
		snprintf(f->problem, sizeof(f->problem), "NUL byte at column "
		    "%zu (a config file is text)", nul);
	if (c != '\n' && c != EOF && (c = config_file_getc(f)) != EOF) {
		if (nul == 0)
			snprintf(f->problem, sizeof(f->problem), "line longer "
			    "than %d characters", size - 3);
		while (c != EOF && c != '\n')
			c = config_file_getc(f);
	}
	skip = strspn(buf, " \t");
	memmove(buf, buf + skip, strlen(buf + skip) + 1);
	return buf;
}

int
config_file_close(struct config_file *f, int read_errors, char *err,
    size_t errlen)
{
	int rc = 0;

	if (f->too_big) {
		snprintf(err, errlen, "%s: grew past %zu bytes while it was "
		    "read", f->path, CONFIG_MAX_BYTES);
		rc = -1;
	} else if (read_errors && ferror(f->fp)) {
		snprintf(err, errlen, "%s:%d: read error", f->path, f->line);
		rc = -1;
	}
	fclose(f->fp);
	f->fp = NULL;
	return rc;
}

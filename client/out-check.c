/*
 * Write errors on the transcript's way out. stdio keeps what it could not
 * write in its buffer and says so only when asked (fflush, ferror), so a
 * full disk or /dev/full would otherwise lose the transcript and exit 0.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

static int stdout_reported;

int
out_report(FILE *f, const char *prog, const char *name, int err)
{
	if (f == stdout) {
		if (stdout_reported)
			return -1;
		stdout_reported = 1;
	}
	fprintf(stderr, "%s: %s: %s\n", prog, name, strerror(err != 0 ?
	    err : EIO));
	return -1;
}

int
out_flush(FILE *f, const char *prog, const char *name)
{
	int before = errno;

	/* a failed flush drops the buffer: the next one succeeds, and
	 * only ferror() and the errno of the write that failed remain */
	errno = 0;
	if (fflush(f) == 0 && !ferror(f))
		return 0;
	return out_report(f, prog, name, errno != 0 ? errno : before);
}

int
out_stdout_reported(void)
{
	return stdout_reported;
}

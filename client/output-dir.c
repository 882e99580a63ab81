/*
 * sotto transcribe --output-dir: one transcript file per input, named
 * after it (DIR/NAME.srt for NAME.wav), checked before any decoding.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

/* The input's name without its directory and its last extension. */
static size_t
stem(const char *file, const char **ret)
{
	const char *base = strrchr(file, '/'), *dot;

	base = base != NULL ? base + 1 : file;
	dot = strrchr(base, '.');
	*ret = base;
	return dot != NULL && dot != base ? (size_t)(dot - base) :
	    strlen(base);
}

int
output_dir_path(const char *dir, const char *file, enum output_format fmt,
    char *buf, size_t len)
{
	const char *s;
	size_t n = stem(file, &s);
	int w;

	if (n == 0)
		return -1;
	w = snprintf(buf, len, "%s/%.*s.%s", dir, (int)n, s,
	    output_format_name(fmt));
	return w < 0 || (size_t)w >= len ? -1 : 0;
}

/* Can a file be created in dir? (Tried: root ignores modes, not a
 * read-only file system.) errno tells why not. */
static int
writable(const char *dir)
{
	char probe[PATH_MAX];
	int fd, w;

	w = snprintf(probe, sizeof(probe), "%s/.sotto-probe-XXXXXX", dir);
	if (w < 0 || (size_t)w >= sizeof(probe)) {
		errno = ENAMETOOLONG;
		return 0;
	}
	if ((fd = mkstemp(probe)) < 0)
		return 0;
	close(fd);
	unlink(probe);
	return 1;
}

int
output_dir_check(const char *dir, char *const *files, int n_files,
    enum output_format fmt, char *err, size_t errlen)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat sb;
	int i, j;

	if (stat(dir, &sb) != 0) {
		snprintf(err, errlen, "--output-dir %s: %s%s", dir,
		    strerror(errno), errno == ENOENT ?
		    " (create the directory first)" : "");
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "--output-dir %s: not a directory", dir);
		return -1;
	}
	if (!writable(dir)) {
		snprintf(err, errlen, "--output-dir %s: cannot create a file "
		    "there: %s", dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < n_files; i++) {
		if (output_dir_path(dir, files[i], fmt, a, sizeof(a)) != 0) {
			snprintf(err, errlen, "--output-dir: no output name "
			    "for '%s'", files[i]);
			return -1;
		}
		for (j = 0; j < i; j++) {
			output_dir_path(dir, files[j], fmt, b, sizeof(b));
			if (strcmp(a, b) == 0) {
				snprintf(err, errlen, "--output-dir: %s and "
				    "%s would both be written to %s", files[j],
				    files[i], a);
				return -1;
			}
		}
	}
	return 0;
}

int
output_tmp_open(struct output_tmp *t, const char *path, char *err,
    size_t errlen)
{
	const char *base = strrchr(path, '/');
	mode_t mask;
	int fd, w;

	memset(t, 0, sizeof(*t));
	base = base != NULL ? base + 1 : path;
	w = snprintf(t->tmp, sizeof(t->tmp), "%.*s.%s.XXXXXX",
	    (int)(base - path), path, base);
	if (w < 0 || (size_t)w >= sizeof(t->tmp) ||
	    snprintf(t->path, sizeof(t->path), "%s", path) >=
	    (int)sizeof(t->path)) {
		snprintf(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
		return -1;
	}
	if ((fd = mkstemp(t->tmp)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* mkstemp makes it 0600: give it the mode fopen() would */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) != 0 ||
	    (t->f = fdopen(fd, "w")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		unlink(t->tmp);
		return -1;
	}
	return 0;
}

int
output_tmp_commit(struct output_tmp *t, char *err, size_t errlen)
{
	int before = errno, e = 0;

	errno = 0;
	if (fflush(t->f) != 0 || ferror(t->f))
		e = errno != 0 ? errno : before != 0 ? before : EIO;
	if (fclose(t->f) != 0 && e == 0)
		e = errno;
	t->f = NULL;
	if (e == 0 && rename(t->tmp, t->path) != 0)
		e = errno;
	if (e == 0)
		return 0;
	unlink(t->tmp);
	snprintf(err, errlen, "%s: %s", t->path, strerror(e));
	return -1;
}

void
output_tmp_abort(struct output_tmp *t)
{
	if (t->f == NULL)
		return;
	fclose(t->f);
	t->f = NULL;
	unlink(t->tmp);
}

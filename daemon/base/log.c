/*
 * Logging to stderr.  Each message is formatted into one buffer and written
 * with a single write(2), so lines from worker threads never interleave.
 * Under systemd, stderr is a journal stream and "<N>" prefixes (sd-daemon(3))
 * carry the priority; on a terminal the line starts with the program name.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	1024

static const char	*log_progname = "sottod";
static enum log_level	 log_level = LOG_LEVEL_INFO;
static int		 log_journal;

/* Is stderr the journal stream systemd set up for us?  JOURNAL_STREAM is
 * "device:inode" of that stream; compare it with fd 2 (systemd.exec(5)). */
static int
log_stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (env == NULL || sscanf(env, "%llu:%llu", &dev, &ino) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) == -1)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_init(const char *progname, int debug)
{
	if (progname != NULL && *progname != '\0')
		log_progname = progname;
	log_setdebug(debug);
	log_journal = log_stderr_is_journal();
}

void
log_setlevel(enum log_level level)
{
	log_level = level;
}

int
log_level_parse(const char *s)
{
	if (strcmp(s, "warning") == 0)
		return LOG_LEVEL_WARNING;
	if (strcmp(s, "info") == 0)
		return LOG_LEVEL_INFO;
	if (strcmp(s, "debug") == 0)
		return LOG_LEVEL_DEBUG;
	return -1;
}

void
log_setdebug(int debug)
{
	log_level = debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
}

int
log_getdebug(void)
{
	return log_level >= LOG_LEVEL_DEBUG;
}

/* Format one line at priority pri, with ": cause" when cause is non-NULL. */
static void
log_vwrite(int pri, const char *cause, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	size_t len;
	int n;

	if (log_journal)
		n = snprintf(line, sizeof(line), "<%d>", pri);
	else
		n = snprintf(line, sizeof(line), "%s: ", log_progname);
	len = n > 0 ? (size_t)n : 0;
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	if (n > 0)
		len += (size_t)n;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	if (cause != NULL) {
		n = snprintf(line + len, sizeof(line) - len, ": %s", cause);
		if (n > 0)
			len += (size_t)n;
		if (len > sizeof(line) - 2)
			len = sizeof(line) - 2;
	}
	line[len++] = '\n';
	/* Nothing useful can be done if stderr is gone. */
	if (write(STDERR_FILENO, line, len) == -1)
		return;
}

void
log_warn(const char *fmt, ...)
{
	char buf[128];
	const char *cause = strerror_r(errno, buf, sizeof(buf));
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, cause, fmt, ap);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, NULL, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_level < LOG_LEVEL_INFO)
		return;
	va_start(ap, fmt);
	log_vwrite(LOG_INFO, NULL, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_level < LOG_LEVEL_DEBUG)
		return;
	va_start(ap, fmt);
	log_vwrite(LOG_DEBUG, NULL, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	char buf[128];
	const char *cause = strerror_r(errno, buf, sizeof(buf));
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, cause, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

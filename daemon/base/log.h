/*
 * sottod logging: one line per message on stderr.  When stderr is the
 * journal (JOURNAL_STREAM names it), each line starts with an sd-daemon
 * "<N>" priority prefix; otherwise it starts with "progname: ".
 */
#ifndef SOTTOD_LOG_H
#define SOTTOD_LOG_H

#include <stdarg.h>

#define LOG_FORMAT	__attribute__((format(printf, 1, 2)))

enum log_level {
	LOG_LEVEL_WARNING,	/* warnings and errors only */
	LOG_LEVEL_INFO,		/* and what sottod does: the default */
	LOG_LEVEL_DEBUG,	/* and every connection and frame */
};

void	log_init(const char *progname, int debug);
void	log_setlevel(enum log_level);
/* "warning", "info" or "debug"; -1 for anything else. */
int	log_level_parse(const char *);
/* log_setdebug(1) is log_setlevel(LOG_LEVEL_DEBUG), 0 LOG_LEVEL_INFO. */
void	log_setdebug(int debug);
int	log_getdebug(void);

/* log_warn and fatal append ": strerror(errno)". */
void	log_warn(const char *fmt, ...) LOG_FORMAT;
void	log_warnx(const char *fmt, ...) LOG_FORMAT;
void	log_info(const char *fmt, ...) LOG_FORMAT;
void	log_debug(const char *fmt, ...) LOG_FORMAT;

/* Log and exit(1); only during startup, before READY=1. */
__attribute__((noreturn)) void	fatal(const char *fmt, ...) LOG_FORMAT;
__attribute__((noreturn)) void	fatalx(const char *fmt, ...) LOG_FORMAT;

#endif /* SOTTOD_LOG_H */

/*
 * sottod logging: one line per message on stderr.  When stderr is the
 * journal (JOURNAL_STREAM names it), each line starts with an sd-daemon
 * "<N>" priority prefix; otherwise it starts with "progname: ".
 */
#ifndef SOTTOD_LOG_H
#define SOTTOD_LOG_H

#include <stdarg.h>

#define LOG_FORMAT	__attribute__((format(printf, 1, 2)))

void	log_init(const char *progname, int debug);
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

#include <stdarg.h>
#include <stdio.h>

#include "err.h"

int
err_set(char *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		va_start(ap, fmt);
		vsnprintf(err, SOTTO_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return code;
}

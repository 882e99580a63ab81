/*
 * Number arguments of the sotto commands: the whole string must be a
 * number within [lo, hi], so "12abc" and "banana" are usage errors.
 */
#include <stdlib.h>

#include "client.h"

int
args_int(const char *s, int lo, int hi, int *ret)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		return -1;
	*ret = (int)v;
	return 0;
}

int
args_float(const char *s, float lo, float hi, float *ret)
{
	char *end;
	float v = strtof(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi))
		return -1;
	*ret = v;
	return 0;
}

/*
 * OpenMP's idle-thread policy, set before libgomp starts: the compute
 * threads of sotto, sottod and sotto-bench call this first in main().
 *
 * Why passive (idle threads sleep at once): libgomp's default (spin for
 * several milliseconds, then sleep) stalled some decoder steps for over
 * half a second on 2 cores. A short spin does not pay either on these
 * machines: with GOMP_SPINCOUNT=2000 or 20000 a decoder step of tiny.en
 * inside `sotto transcribe` took as long or longer (8.5 ms against 6.4
 * at 20000) -- the spinning thread takes from the one doing the work.
 * Waking a sleeping thread costs about 25 us per parallel region, so
 * the kernels split only work that is larger than that.
 *
 * libgomp reads its environment when it loads, before main(), so set it
 * and re-exec. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
 */
#include <stdlib.h>
#include <unistd.h>

#include "omp-env.h"

void
omp_env_reexec(char **argv)
{
	if (getenv("OMP_WAIT_POLICY") != NULL ||
	    getenv("GOMP_SPINCOUNT") != NULL)
		return;
	setenv("OMP_WAIT_POLICY", "passive", 1);
	execv("/proc/self/exe", argv);
	/* on failure, run on with libgomp's defaults */
}

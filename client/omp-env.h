/* omp-env.c: OpenMP's idle-thread policy, set before libgomp starts. */
#ifndef SOTTO_OMP_ENV_H
#define SOTTO_OMP_ENV_H

/*
 * Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, set OMP_WAIT_POLICY and
 * re-exec argv; returns (without changes) if the re-exec fails. Call it
 * first in main(), before any thread starts.
 */
void	omp_env_reexec(char **argv);

#endif

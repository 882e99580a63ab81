/*
 * The element-wise loops are built for each x86 level and picked at load
 * (target_clones). A build with -Dmax_isa=avx2 leaves out the AVX-512
 * clone, so that an AVX-512 machine runs what an AVX2-only one runs
 * (bench/run --tools sotto-avx2; gemm-dnnl.c holds oneDNN, and so the
 * hand kernels, to AVX2 in such a build).
 */
#ifndef SOTTO_CLONES_H
#define SOTTO_CLONES_H

#ifdef SOTTO_MAX_ISA_AVX2
#define CLONES	__attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES	__attribute__((target_clones("arch=x86-64-v4", \
	"arch=x86-64-v3", "default")))
#endif

#endif

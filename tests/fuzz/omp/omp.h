// The OpenMP runtime calls Tandem makes, declared for the fuzz build (tests/fuzz/CMakeLists.txt).
// Debian's clang-19 ships no libomp and GCC's omp.h uses GCC-only attributes, so the fuzz build
// compiles without -fopenmp (pragmas are ignored: kernels run on one thread, which keeps every
// execution deterministic) and links these from libgomp, which oneDNN loads anyway.
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
void omp_set_num_threads(int);
int omp_get_num_threads(void);
int omp_get_max_threads(void);
int omp_get_thread_num(void);
#ifdef __cplusplus
}
#endif

/* STREAM copy/scale/add/triad (McCalpin's kernels) over double arrays; best-of-N GB/s.
   Built by bench/stream.py at run time: cc -O3 -march=native -fopenmp stream.c -o stream */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double best_gbps(double bytes, double seconds[], int reps) {
  double best = seconds[0];
  for (int i = 1; i < reps; i++)
    if (seconds[i] < best) best = seconds[i];
  return bytes / best / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: stream ELEMENTS REPS\n");
    return 2;
  }
  long n = atol(argv[1]);
  int reps = atoi(argv[2]);
  if (n <= 0 || reps <= 0 || reps > 100) {
    fprintf(stderr, "stream: ELEMENTS must be > 0 and REPS in 1..100\n");
    return 2;
  }
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)),
         *c = malloc(n * sizeof(double));
  if (!a || !b || !c) {
    fprintf(stderr, "stream: cannot allocate 3 x %ld doubles\n", n);
    return 1;
  }
  /* First touch in parallel, so pages land where the threads that use them run. */
#pragma omp parallel for
  for (long i = 0; i < n; i++) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.0;
  }
  double t[4][100];
  const double s = 3.0;
  for (int r = 0; r < reps; r++) {
    double t0 = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < n; i++) c[i] = a[i];
    double t1 = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < n; i++) b[i] = s * c[i];
    double t2 = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
    double t3 = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    double t4 = omp_get_wtime();
    t[0][r] = t1 - t0;
    t[1][r] = t2 - t1;
    t[2][r] = t3 - t2;
    t[3][r] = t4 - t3;
  }
  /* Reading a result keeps the compiler from dropping the loops. */
  double check = a[n / 2] + b[n / 3] + c[n - 1];
  double w = sizeof(double) * (double)n;
  printf("{\"copy\": %.3f, \"scale\": %.3f, \"add\": %.3f, \"triad\": %.3f, \"threads\": %d, "
         "\"elements\": %ld, \"check\": %.1f}\n",
         best_gbps(2 * w, t[0], reps), best_gbps(2 * w, t[1], reps), best_gbps(3 * w, t[2], reps),
         best_gbps(3 * w, t[3], reps), omp_get_max_threads(), n, check);
  free(a);
  free(b);
  free(c);
  return 0;
}

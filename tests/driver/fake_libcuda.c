/* A stand-in for NVIDIA's driver library (libcuda.so.1) with the three calls hpctrain's
 * device count makes: FAKE_CUDA_DRIVER_VERSION (e.g. 13000) and FAKE_CUDA_DEVICES say what
 * it reports, FAKE_CUDA_INIT_LOG where it records being initialised. For
 * tests/driver/device_count.sh only. */
#include <stdio.h>
#include <stdlib.h>

static int from_env(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : 0;
}

/* FAKE_CUDA_INIT_LOG: a file that each cuInit appends a line to (whether a run asked). */
int cuInit(unsigned flags) {
  const char* log = getenv("FAKE_CUDA_INIT_LOG");
  if (log) {
    FILE* f = fopen(log, "a");
    if (f) {
      fputs("cuInit\n", f);
      fclose(f);
    }
  }
  return flags == 0 ? 0 : 1;
}

int cuDriverGetVersion(int* version) {
  *version = from_env("FAKE_CUDA_DRIVER_VERSION");
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = from_env("FAKE_CUDA_DEVICES");
  return 0;
}

/* A stand-in for NVIDIA's management library (libnvidia-ml.so.1) with the calls of
 * hpctrain's energy sampler (src/train/energy.cpp), for tests on machines without a GPU.
 * FAKE_NVML_MJ_PER_READ (default "3000,600") lists the GPUs and how many millijoules each
 * one's counter advances at every reading; GPU i is at PCI address 0000:(0x10 + i):00.0. */
#include <stdlib.h>
#include <string.h>

enum { kMaxGpus = 8 };
static unsigned long long counters[kMaxGpus];

static int gpus(unsigned long long* step) {
  const char* v = getenv("FAKE_NVML_MJ_PER_READ");
  char list[256];
  strncpy(list, v ? v : "3000,600", sizeof list - 1);
  list[sizeof list - 1] = 0;
  int n = 0;
  for (char* t = strtok(list, ","); t && n < kMaxGpus; t = strtok(NULL, ",")) {
    if (step) step[n] = strtoull(t, NULL, 10);
    ++n;
  }
  return n;
}

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = (unsigned)gpus(NULL);
  return 0;
}

/* A device is its index + 1. */
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if ((int)index >= gpus(NULL)) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = (void*)(size_t)(index + 1);
  return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* millijoules) {
  unsigned long long step[kMaxGpus];
  const int n = gpus(step);
  const size_t i = (size_t)device - 1;
  if ((int)i >= n) return 2;
  counters[i] += step[i];
  *millijoules = counters[i];
  return 0;
}

/* nvmlPciInfo_t */
struct pci_info {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

int nvmlDeviceGetPciInfo_v3(void* device, struct pci_info* info) {
  const unsigned i = (unsigned)((size_t)device - 1);
  memset(info, 0, sizeof *info);
  info->bus = 0x10 + i;
  return 0;
}

// The device side of Backend::phase_mark: one thread stamps the GPU's global timer
// (nanoseconds) when the stream reaches the mark and adds the time since the previous
// mark to that phase's sum, so timing a step needs no host synchronisation.
#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"

namespace hpctrain::kernels {
namespace {

// stamps[0..marks-1]: each mark's last time; stamps[marks]: nonzero once a mark was taken
// (until then mark 0 closes no phase).
__global__ void phase_mark_kernel(unsigned long long* stamps, double* sums, int i, int marks) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  const int prev = i == 0 ? marks - 1 : i - 1;
  if (i > 0 || stamps[marks] != 0) sums[prev] += static_cast<double>(t - stamps[prev]) * 1e-9;
  stamps[i] = t;
  stamps[marks] = 1;
}

}  // namespace

void phase_mark(unsigned long long* stamps, double* sums, int i, int marks, cudaStream_t stream) {
  phase_mark_kernel<<<1, 1, 0, stream>>>(stamps, sums, i, marks);
  check_launch("phase_mark");
}

}  // namespace hpctrain::kernels

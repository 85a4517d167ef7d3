// The CUDA backend's face towards the trainer and the tests (cuda_backend.hpp): whether it
// is built, the devices visible, and the checked factory.
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace cuda {
std::unique_ptr<Backend> new_backend(const CudaBackendOptions& options);  // cuda_backend.cpp
}  // namespace cuda

bool cuda_built() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  const int count = cuda_device_count();
  if (count == 0) {
    throw UsageError("device: cuda was requested, but no CUDA device is visible to this process");
  }
  if (options.device < 0 || options.device >= count) {
    throw UsageError("CUDA device " + std::to_string(options.device) + " does not exist (" +
                     std::to_string(count) + " visible)");
  }
  if (options.tf32 && options.act_type != DType::kF32) {
    throw UsageError(std::string("tf32 applies to float32 activations, not ") +
                     to_string(options.act_type));
  }
  if (options.channels_last && options.act_type == DType::kF32) {
    throw UsageError("the channels-last layout applies to 16-bit activations, not float32");
  }
  return cuda::new_backend(options);
}

}  // namespace hpctrain

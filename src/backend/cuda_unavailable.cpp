// The CUDA backend entry points of a build without CUDA (no nvcc found at configure time,
// or -DHPCTRAIN_WITH_CUDA=OFF): no devices, and a clear refusal.
#include "backend/cuda_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {

bool cuda_built() { return false; }

int cuda_device_count() { return 0; }

std::string cuda_backend_description() { return "not built"; }

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& /*options*/) {
  throw UsageError(
      "device: cuda was requested, but this build of hpctrain has no CUDA backend (configure "
      "with the CUDA toolkit, cuDNN and NCCL installed; see README)");
}

}  // namespace hpctrain

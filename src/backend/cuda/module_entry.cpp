// The CUDA backend module's entry points (libhpctrain_cuda.so, loaded by
// backend/cuda_module.cpp only when a rank uses a GPU): the backend factory and the versions
// of the libraries it was loaded with. Options are checked by the loader.
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda_backend.hpp"

namespace hpctrain::cuda {
std::unique_ptr<Backend> new_backend(const CudaBackendOptions& options);  // cuda_backend.cpp
}  // namespace hpctrain::cuda

namespace {

// "13.0" from CUDA's 13000; cuDNN's 91400 is "9.14.0", NCCL's 22807 "2.28.7".
std::string major_minor(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
std::string three_parts(int v, int major_unit, int minor_unit) {
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / minor_unit) + "." +
         std::to_string(v % minor_unit);
}

}  // namespace

extern "C" {

// A backend the caller owns (the loader wraps it in a unique_ptr); throws as new_backend does.
hpctrain::Backend* hpctrain_cuda_new_backend(const hpctrain::CudaBackendOptions* options) {
  return hpctrain::cuda::new_backend(*options).release();
}

// "CUDA runtime 13.0, cuDNN 9.14.0, NCCL 2.28.7": what this module runs on.
const char* hpctrain_cuda_versions() {
  static const std::string text = [] {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::string s = "CUDA runtime " + major_minor(runtime) + ", cuDNN " +
                    three_parts(static_cast<int>(cudnnGetVersion()), 10000, 100);
#ifdef HT_HAVE_NCCL
    int nccl = 0;
    if (ncclGetVersion(&nccl) == ncclSuccess) s += ", NCCL " + three_parts(nccl, 10000, 100);
#else
    s += ", no NCCL";
#endif
    return s;
  }();
  return text.c_str();
}

}  // extern "C"

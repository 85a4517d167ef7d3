// The CUDA backend entry points of a build with CUDA. The backend itself is a module,
// lib/hpctrain/libhpctrain_cuda.so beside the programs or in the prefix above them, loaded
// only when a rank makes a CUDA backend: cuBLAS, cuDNN and NCCL take about half a second and
// 200 MB per process to load (cuBLASLt's initialisers), which CPU ranks, the subcommands
// that use no GPU and a node without NVIDIA's libraries never pay. Devices are counted through the
// driver (libcuda.so.1), which loads none of them.
#include <dlfcn.h>

#include <string>

#include "backend/cuda_backend.hpp"
#include "core/error.hpp"
#include "core/installation.hpp"

namespace hpctrain {
namespace {

constexpr const char* kModule = "lib/hpctrain/libhpctrain_cuda.so";

struct Module {
  Backend* (*new_backend)(const CudaBackendOptions*) = nullptr;
  const char* (*versions)() = nullptr;
  std::string path;
  std::string error;  // why it could not be loaded; empty once loaded
};

// Loaded once per process and never unloaded (CUDA's libraries do not support it).
const Module& module() {
  static const Module m = [] {
    Module r;
    try {
      r.path = (installed_prefix(kModule) / kModule).string();
    } catch (const UsageError& e) {
      r.error = e.what();
      return r;
    }
    void* handle = dlopen(r.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      r.error = "cannot load " + r.path + ": " + dlerror() +
                " (NVIDIA's libraries: the CUDA runtime, cuBLAS, cuDNN 9 and NCCL 2 are looked "
                "for in the build's run path, then LD_LIBRARY_PATH)";
      return r;
    }
    r.new_backend = reinterpret_cast<Backend* (*)(const CudaBackendOptions*)>(
        dlsym(handle, "hpctrain_cuda_new_backend"));
    r.versions = reinterpret_cast<const char* (*)()>(dlsym(handle, "hpctrain_cuda_versions"));
    if (r.new_backend == nullptr || r.versions == nullptr) {
      r.error = r.path + " is not hpctrain's CUDA backend (no entry points): reinstall hpctrain";
    }
    return r;
  }();
  return m;
}

}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  static const int count = [] {
    // What cudaGetDeviceCount says, through the driver API: CUDA_VISIBLE_DEVICES applies to
    // both, and no driver, no device or a driver older than the CUDA major version the
    // backend was built with (the runtime's "insufficient driver") is 0.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr) return 0;
    using Int = int (*)(int*);
    const auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(driver, "cuInit"));
    const auto version = reinterpret_cast<Int>(dlsym(driver, "cuDriverGetVersion"));
    const auto get_count = reinterpret_cast<Int>(dlsym(driver, "cuDeviceGetCount"));
    int supported = 0, n = 0;
    if (init == nullptr || version == nullptr || get_count == nullptr || init(0) != 0 ||
        version(&supported) != 0 || supported / 1000 < HT_CUDA_MAJOR || get_count(&n) != 0) {
      return 0;
    }
    return n;
  }();
  return count;
}

std::string cuda_backend_description() {
  const Module& m = module();
  return m.error.empty() ? m.path + " (" + m.versions() + ")" : m.error;
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
  const Module& m = module();
  if (!m.error.empty()) throw UsageError("the CUDA backend: " + m.error);
  return std::unique_ptr<Backend>(m.new_backend(&options));
}

}  // namespace hpctrain

// The CUDA backend's module (backend/cuda_module.cpp) where no GPU is visible, as in CI: it
// loads into a program that exports hpctrain's symbols, and an error it throws reaches the
// caller as hpctrain::Error. Where a GPU is visible, the gpu suite makes every backend
// through it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backend/cuda_backend.hpp"
#include "core/error.hpp"
#include "core/installation.hpp"

namespace hpctrain {
namespace {

TEST(CudaModule, LoadsAndItsErrorsReachTheCaller) {
  if (!cuda_built()) GTEST_SKIP() << "this build has no CUDA backend";
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: the gpu suite covers this";
  const std::string description = cuda_backend_description();
  ASSERT_NE(description.find("cuDNN"), std::string::npos) << description;

  const std::string name = "lib/hpctrain/libhpctrain_cuda.so";
  std::filesystem::path path;
  ASSERT_NO_THROW(path = installed_prefix(name) / name);
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(module, nullptr) << dlerror();
  const auto make = reinterpret_cast<Backend* (*)(const CudaBackendOptions*)>(
      dlsym(module, "hpctrain_cuda_new_backend"));
  ASSERT_NE(make, nullptr);
  const CudaBackendOptions options;
  try {
    delete make(&options);
    FAIL() << "a CUDA backend was made without a device";
  } catch (const Error& e) {  // thrown in the module, caught here by its type
    EXPECT_NE(std::string(e.what()).find("cudaSetDevice"), std::string::npos) << e.what();
  }
  // The program's own entry point refuses before it loads anything.
  EXPECT_THROW(make_cuda_backend(options), UsageError);
}

}  // namespace
}  // namespace hpctrain

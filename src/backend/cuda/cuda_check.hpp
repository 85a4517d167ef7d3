// Checked CUDA, cuBLAS and cuDNN calls: a failure throws hpctrain::Error naming the call,
// the library's message and the source line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#ifdef HT_HAVE_NCCL
#include <nccl.h>
#endif

#include <cstddef>
#include <new>
#include <string>

#include "core/error.hpp"

namespace hpctrain::cuda {

[[noreturn]] inline void fail(const char* call, const std::string& why, const char* file,
                              int line) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + why);
}

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) fail(call, cudaGetErrorString(e), file, line);
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusString(s), file, line);
}
inline void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) fail(call, cudnnGetErrorString(s), file, line);
}
#ifdef HT_HAVE_NCCL
inline void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) fail(call, ncclGetErrorString(r), file, line);
}
#endif

// cudaMalloc of `bytes`, whose running out of memory is std::bad_alloc, as on the CPU
// backend (a model's builder turns it into exit 2 naming the buffer); other errors throw as
// HT_CUDA does. That error is not sticky: taking it leaves none for the next call.
inline void* device_malloc(size_t bytes, const char* file, int line) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  check(e, "cudaMalloc", file, line);
  return p;
}

// With sync_each_call (CudaBackendOptions): waits for `stream` and reports an error of
// the operation just enqueued by the operation's name, so that an asynchronous error
// points at its call.
inline void check_done(bool sync_each_call, cudaStream_t stream, const char* op) {
  if (!sync_each_call) return;
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) fail(op, cudaGetErrorString(e), __FILE__, __LINE__);
}

}  // namespace hpctrain::cuda

#define HT_CUDA(call) ::hpctrain::cuda::check((call), #call, __FILE__, __LINE__)

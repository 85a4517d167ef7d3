// Small owners shared by the CUDA backend's files: cuDNN descriptors (RAII, one type per
// descriptor kind) and scratch device memory.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

#include "backend/cuda/cuda_check.hpp"
#include "core/dtype.hpp"

namespace hpctrain::cuda {

template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { HT_CUDA(Create(&d_)); }
  ~Descriptor() { Destroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }

 private:
  T d_{};
};
using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                            cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                            cudnnDestroyPoolingDescriptor>;
using RnnDesc =
    Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                               cudnnDestroyRNNDataDescriptor>;
using DropoutDesc = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                               cudnnDestroyDropoutDescriptor>;

// cuDNN's name for the element type t.
inline cudnnDataType_t cudnn_type(DType t) {
  return t == DType::kF32    ? CUDNN_DATA_FLOAT
         : t == DType::kBF16 ? CUDNN_DATA_BFLOAT16
                             : CUDNN_DATA_HALF;
}

// Tensors and filters in NCHW (KCRS) order, or NHWC (KRSC) with nhwc.
inline cudnnTensorFormat_t cudnn_format(bool nhwc) {
  return nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}
inline void set_tensor(const TensorDesc& d, cudnnDataType_t type, int n, int c, int h, int w,
                       bool nhwc) {
  HT_CUDA(cudnnSetTensor4dDescriptor(d.get(), cudnn_format(nhwc), type, n, c, h, w));
}

// Device memory for set-up work (algorithm timing, warm-up), freed at the end of the
// scope. Given a stream, it is filled there with 0x3c bytes, finite in every activation
// type (0.0115 as float32 or bfloat16, 1.06 as float16): timing on zeros can flatter an
// algorithm.
struct Scratch {
  Scratch(size_t bytes, cudaStream_t fill_on) {
    if (bytes == 0) return;
    p = device_malloc(bytes, __FILE__, __LINE__);  // out of memory: std::bad_alloc
    if (fill_on != nullptr) HT_CUDA(cudaMemsetAsync(p, 0x3c, bytes, fill_on));
  }
  ~Scratch() { cudaFree(p); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* p = nullptr;
};

}  // namespace hpctrain::cuda

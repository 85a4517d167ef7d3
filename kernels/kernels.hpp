// CUDA kernels for what cuBLAS and cuDNN do not provide, launched on a caller's stream.
// Each mirrors one CpuBackend operation with the same semantics (backend.hpp documents
// them); the GPU tests compare the two on random inputs. Reductions run in a fixed order
// (no atomics), so results repeat bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace hpctrain {

struct LossStats;
struct SgdParams;
struct Pool2dShape;

namespace kernels {

// Element-wise (elementwise.cu).
void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream);
void add_channel_bias(float* y, const float* bias, int n, int c, int hw, cudaStream_t stream);
void add(const float* a, const float* b, float* y, size_t n, cudaStream_t stream);
void multiply(const float* a, const float* b, float* y, size_t n, cudaStream_t stream);
void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream);
void relu_backward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream);
void scale(float* x, size_t n, float alpha, cudaStream_t stream);
void dropout_forward(const float* x, float* y, float* mask, size_t n, float p, uint64_t seed,
                     cudaStream_t stream);
// Input decoding (Backend::decode_input): out[i] = in[i] * scale for uint8, the exact
// float of each IEEE half for float16.
void decode_u8(const uint8_t* in, size_t n, float scale, float* out, cudaStream_t stream);
void decode_f16(const uint16_t* in, size_t n, float* out, cudaStream_t stream);
void sgd_update(float* params, const float* grads, float* velocity, size_t n, const SgdParams& sgd,
                cudaStream_t stream);

// Reductions (reduce.cu).
void sum_rows(const float* dy, float* dbias, int rows, int cols, cudaStream_t stream);
void sum_channels(const float* dy, float* dbias, int n, int c, int hw, cudaStream_t stream);
// dgamma and dbeta of batch normalisation (the part of its backward that needs no dx).
void batchnorm_param_grads(const float* x, const float* dy, float* dgamma, float* dbeta, int n,
                           int c, int hw, const float* save_mean, const float* save_invstd,
                           cudaStream_t stream);
void softmax_xent(const float* logits, const int32_t* labels, int rows, int cols, float grad_scale,
                  float* dlogits, LossStats* stats, cudaStream_t stream);

// Phase clock (clock.cu): stamps[marks + 1] and sums[marks] as Backend::phase_mark uses
// them (zeroed to start).
void phase_mark(unsigned long long* stamps, double* sums, int i, int marks, cudaStream_t stream);

// Average pooling (pool.cu): the window clipped to the input, divided by kh * kw.
void avgpool2d_forward(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream);
void avgpool2d_backward(const Pool2dShape& s, const float* dy, float* dx, cudaStream_t stream);

}  // namespace kernels
}  // namespace hpctrain

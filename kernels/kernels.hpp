// CUDA kernels for what cuBLAS and cuDNN do not provide, launched on a caller's stream.
// Each mirrors one CpuBackend operation with the same semantics (backend.hpp documents
// them); the GPU tests compare the two on random inputs. Reductions run in a fixed order
// (no atomics), so results repeat bit for bit.
//
// Activations (`void*`) are of the type `t` names (the backend's act_type()): kernels
// widen them to float, compute in float and round what they store to nearest even.
// Parameters, gradients, biases and statistics are float32 (`float*`).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace hpctrain {

struct LossStats;
struct InputNorm;
struct SgdParams;
struct AdamParams;
struct Pool2dShape;

namespace kernels {

// Conversions (elementwise.cu): dst = src rounded to t (the weights' compute copy), and
// activations widened to float32 (exact).
void convert(DType t, const float* src, void* dst, size_t n, cudaStream_t stream);
void convert_to_float(DType t, const void* src, float* dst, size_t n, cudaStream_t stream);

// Channels-last layout (layout.cu): [n][a][b] -> [n][b][a]. Activations to activations
// (NCHW <-> NHWC: a, b = c, h * w or the reverse); float32 to type t, rounded (a KCRS
// filter's compute copy in KRSC); type t to float32 (a KRSC filter gradient into KCRS).
void transpose(DType t, const void* src, void* dst, int n, int a, int b, cudaStream_t stream);
void convert_transposed(DType t, const float* src, void* dst, int n, int a, int b,
                        cudaStream_t stream);
void convert_to_float_transposed(DType t, const void* src, float* dst, int n, int a, int b,
                                 cudaStream_t stream);

// Recurrent layers (rnn.cu): Backend::swap_leading and the LSTM and GRU steps.
void swap_leading(DType t, const void* src, void* dst, int a, int b, int inner,
                  cudaStream_t stream);
void lstm_forward_step(DType t, const void* gx, const void* gh, const float* b_ih,
                       const float* b_hh, const float* c_prev, float* gates, float* c, void* h,
                       int batch, int hidden, cudaStream_t stream);
void lstm_backward_step(DType t, const float* gates, const float* c, const float* c_prev,
                        const void* dh, float* dc, void* dz, int batch, int hidden,
                        cudaStream_t stream);
void gru_forward_step(DType t, const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                      const void* h_prev, float* gates, float* hn, void* h, int batch, int hidden,
                      cudaStream_t stream);
void gru_backward_step(DType t, const float* gates, const float* hn, const void* h_prev,
                       const void* dh, void* dgx, void* dgh, void* dh_prev, int batch, int hidden,
                       cudaStream_t stream);

// Embedding (embedding.cu): Backend::embedding_forward and embedding_backward; ids that
// are not integers in [0, vocab) give zero rows forward and are skipped backward.
void embedding_forward(DType t, const void* ids, const void* table, void* out, int rows, int vocab,
                       int dim, cudaStream_t stream);
void embedding_backward(DType t, const void* ids, const void* dy, float* dtable, int rows,
                        int vocab, int dim, cudaStream_t stream);

// Gradient clipping (reduce.cu): Backend::sum_squares and Backend::clip_by_norm.
// sum_squares takes kSumSquaresBlocks doubles of device memory (its blocks' partial sums).
constexpr int kSumSquaresBlocks = 256;
void sum_squares(const float* x, size_t n, float* acc, double* partials, cudaStream_t stream);
void clip_by_norm(float* x, size_t n, const float* acc, float max_norm, cudaStream_t stream);

// Element-wise (elementwise.cu).
void add_bias(DType t, void* y, const float* bias, int rows, int cols, cudaStream_t stream);
void add_channel_bias(DType t, void* y, const float* bias, int n, int c, int hw,
                      cudaStream_t stream);
void add(DType t, const void* a, const void* b, void* y, size_t n, cudaStream_t stream);
void multiply(DType t, const void* a, const void* b, void* y, size_t n, cudaStream_t stream);
void relu_forward(DType t, const void* x, void* y, size_t n, cudaStream_t stream);
void relu_backward(DType t, const void* y, const void* dy, void* dx, size_t n, cudaStream_t stream);
void scale(float* x, size_t n, float alpha, cudaStream_t stream);
void accumulate(float* sum, const float* x, size_t n, cudaStream_t stream);
void dropout_forward(DType t, const void* x, void* y, void* mask, size_t n, float p, uint64_t seed,
                     cudaStream_t stream);
// Input decoding (Backend::decode_input): out[i] = in[i] * scale for uint8, the exact
// float of each IEEE half for float16, float32 as is, the value of each token id, then
// normalised where `norm` says (InputNorm), each rounded to t once.
void decode_u8(DType t, const uint8_t* in, size_t n, float scale, const InputNorm& norm, void* out,
               cudaStream_t stream);
void decode_f16(DType t, const uint16_t* in, size_t n, const InputNorm& norm, void* out,
                cudaStream_t stream);
void decode_f32(DType t, const float* in, size_t n, const InputNorm& norm, void* out,
                cudaStream_t stream);
void decode_i32(DType t, const int32_t* in, size_t n, void* out, cudaStream_t stream);
// Does nothing when skip is not null and *skip != 0 (read on the device).
void sgd_update(float* params, const float* grads, float* velocity, size_t n, const SgdParams& sgd,
                const float* skip, cudaStream_t stream);
// Backend::adam_update and Backend::count_step; `step` and `skip` are device memory.
void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                 const AdamParams& adam, const float* step, const float* skip, cudaStream_t stream);
void count_step(float* counter, const float* skip, cudaStream_t stream);
// Dynamic loss scaling on its device state (LossScaleState in backend/backend.hpp).
void unscale_grads(float* grads, size_t n, float* state, cudaStream_t stream);
void update_loss_scale(float* state, float growth, float backoff, int interval,
                       cudaStream_t stream);
// Backend::merge_loss_stats (one thread).
void merge_loss_stats(LossStats* into, LossStats* step, const float* skip, cudaStream_t stream);

// Reductions (reduce.cu); the sums are float32.
void sum_rows(DType t, const void* dy, float* dbias, int rows, int cols, cudaStream_t stream);
void sum_channels(DType t, const void* dy, float* dbias, int n, int c, int hw, cudaStream_t stream);
// dgamma and dbeta of batch normalisation (the part of its backward that needs no dx).
void batchnorm_param_grads(DType t, const void* x, const void* dy, float* dgamma, float* dbeta,
                           int n, int c, int hw, const float* save_mean, const float* save_invstd,
                           cudaStream_t stream);
// loss_scale: device memory, or null for 1.
void softmax_xent(DType t, const void* logits, const int32_t* labels, int rows, int cols,
                  float grad_scale, const float* loss_scale, void* dlogits, LossStats* stats,
                  cudaStream_t stream);

// Channels-last batch normalisation (batchnorm.cu) of data [m, c] (m = samples x
// positions), with CpuBackend's semantics: biased batch variance, running statistics with
// the unbiased one. Statistics are merged in float per thread and in double across threads,
// in a fixed order. `scratch` is device memory of scratch_floats >=
// batchnorm_nhwc_min_scratch(c) floats.
size_t batchnorm_nhwc_min_scratch(int c);
// y = bn(x), then + z when z is not null, then relu when `relu`; each step rounded to t as
// the separate operations round it. Training uses and saves the batch's statistics and
// updates the running ones; evaluation reads the running ones.
void batchnorm_nhwc_forward(DType t, bool training, const void* x, const void* z, bool relu,
                            const float* gamma, const float* beta, void* y, int m, int c, float eps,
                            float momentum, float* running_mean, float* running_var,
                            float* save_mean, float* save_invstd, float* scratch,
                            size_t scratch_floats, cudaStream_t stream);
// Gradients of a training forward from g: g = dy when y is null, else g = dy where y > 0
// (else 0), written to `g` (which may be dy). dx is written when not null.
void batchnorm_nhwc_backward(DType t, const void* x, const void* y, const void* dy, void* g,
                             const float* gamma, void* dx, float* dgamma, float* dbeta, int m,
                             int c, const float* save_mean, const float* save_invstd,
                             float* scratch, size_t scratch_floats, cudaStream_t stream);

// Phase clock (clock.cu): stamps[marks + 1] and sums[marks] as Backend::phase_mark uses
// them (zeroed to start).
void phase_mark(unsigned long long* stamps, double* sums, int i, int marks, cudaStream_t stream);

// Max pooling of NHWC data (pool.cu), the CPU backend's semantics: the window clipped to
// the input; its gradient goes to the first maximum in row-major order.
void maxpool2d_nhwc_forward(DType t, const Pool2dShape& s, const void* x, void* y,
                            cudaStream_t stream);
void maxpool2d_nhwc_backward(DType t, const Pool2dShape& s, const void* x, const void* y,
                             const void* dy, void* dx, cudaStream_t stream);
// Average pooling (pool.cu): the window clipped to the input, divided by kh * kw; data
// in NCHW order, or NHWC with nhwc.
void avgpool2d_forward(DType t, const Pool2dShape& s, bool nhwc, const void* x, void* y,
                       cudaStream_t stream);
void avgpool2d_backward(DType t, const Pool2dShape& s, bool nhwc, const void* dy, void* dx,
                        cudaStream_t stream);

}  // namespace kernels
}  // namespace hpctrain

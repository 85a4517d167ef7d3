// The CUDA backend: cuBLAS for GEMM, kernels/ for the element-wise operations, the loss
// and the optimizer, NCCL for collectives, and cuda::CudnnLayers for convolution, pooling,
// batch normalisation and recurrent stacks, all on one stream (input uploads on a second one,
// NCCL's gradient buckets on a third; step graphs recorded from and replayed on the first).
// Nothing in an operation synchronises with the host except the copies to host memory and
// synchronize(); with sync_each_call every operation is followed by a checked
// synchronisation, so an asynchronous error names its operation (and nothing is recorded).
// Activations are of options.act_type: cuBLAS and cuDNN read and write 16-bit data with
// float32 arithmetic, while parameters, gradients and normalisation statistics stay
// float32. With options.channels_last activations are NHWC (see cudnn_layers.hpp).
#include "backend/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cudnn_layers.hpp"
#include "backend/cuda/cudnn_util.hpp"
#include "backend/cuda/step_graphs.hpp"
#include "core/sample_type.hpp"
#include "kernels/kernels.hpp"

namespace hpctrain {
namespace {

using cuda::Scratch;

// cuBLAS's name for the element type t.
cudaDataType_t cublas_type(DType t) {
  return t == DType::kF32 ? CUDA_R_32F : t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o) : options_(o) {
    const char* env = std::getenv("HPCTRAIN_CUDA_SYNC");
    if (env != nullptr && std::strcmp(env, "1") == 0) options_.sync_each_call = true;
    HT_CUDA(cudaSetDevice(o.device));
    HT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HT_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    HT_CUDA(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    for (cudaEvent_t& e : slot_free_) HT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    HT_CUDA(cudaMalloc(&phase_stamps_, (kPhaseMarks + 1) * sizeof(unsigned long long)));
    HT_CUDA(cudaMalloc(&phase_sums_, kPhaseMarks * sizeof(double)));
    HT_CUDA(cudaMalloc(&sum_partials_, kernels::kSumSquaresBlocks * sizeof(double)));
    reset_phases();
    HT_CUDA(cublasCreate(&cublas_));
    HT_CUDA(cublasSetStream(cublas_, stream_));
    // fp32 means fp32: no TF32 tensor-core rounding unless precision tf32 asks for it.
    // 16-bit operands take tensor cores by default; the flag keeps their products' sums in
    // float32 also where cuBLAS splits a sum, which it may otherwise add up in the 16-bit
    // output type.
    cublasMath_t math = o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (options_.act_type != DType::kF32) {
      math = static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    }
    HT_CUDA(cublasSetMathMode(cublas_, math));
    layers_ = std::make_unique<cuda::CudnnLayers>(options_, stream_, [this] { warm_up(); });
  }
  ~CudaBackend() override {
    graphs_.drop();
#ifdef HT_HAVE_NCCL
    if (nccl_ != nullptr) {
      ncclCommDestroy(nccl_);
      cudaEventDestroy(comm_done_);
      cudaEventDestroy(comm_ready_);
      cudaStreamDestroy(comm_stream_);
    }
#endif
    if (watch_host_ != nullptr) {
      cudaFreeHost(watch_host_);
      cudaEventDestroy(watched_);
    }
    layers_.reset();
    cublasDestroy(cublas_);
    cudaFree(phase_sums_);
    cudaFree(sum_partials_);
    cudaFree(phase_stamps_);
    for (cudaEvent_t e : slot_free_) cudaEventDestroy(e);
    cudaEventDestroy(copied_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }
  bool loss_nonfinite(const LossStats* stats) override {
    if (watch_host_ == nullptr) {
      HT_CUDA(cudaMallocHost(&watch_host_, sizeof(double)));
      *watch_host_ = 0.0;
      HT_CUDA(cudaEventCreateWithFlags(&watched_, cudaEventDisableTiming));
    } else if (cudaEventQuery(watched_) != cudaSuccess) {
      return !std::isfinite(watch_seen_);  // the last copy is still on its way
    }
    watch_seen_ = *watch_host_;
    HT_CUDA(cudaMemcpyAsync(watch_host_, &stats->loss_sum, sizeof(double), cudaMemcpyDeviceToHost,
                            stream_));
    HT_CUDA(cudaEventRecord(watched_, stream_));
    return !std::isfinite(watch_seen_);
  }
  const char* name() const override { return "cuda"; }
  bool host_accessible() const override { return false; }
  int64_t device_free_bytes() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
    return static_cast<int64_t>(free);
  }
  DType act_type() const override { return options_.act_type; }
  bool channels_last() const override { return options_.channels_last; }
  std::string device_id() const override {
    char bus[32] = {};
    HT_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), options_.device));
    return bus;
  }

  void* alloc_bytes(size_t bytes) override {
    void* p = cuda::device_malloc(bytes == 0 ? 1 : bytes, __FILE__, __LINE__);
    HT_CUDA(cudaMemsetAsync(p, 0, bytes, stream_));
    HT_CUDA(cudaStreamSynchronize(stream_));
    return p;
  }
  void free_bytes(void* p) override { cudaFree(p); }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    HT_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    HT_CUDA(cudaStreamSynchronize(stream_));  // the caller may reuse host_src at once
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    HT_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    HT_CUDA(cudaStreamSynchronize(stream_));
  }
  void fill_zero(float* x, size_t n) override {
    if (n > 0) HT_CUDA(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
    done("fill_zero");
  }
  void copy(const void* src, void* dst, size_t bytes) override {
    if (bytes > 0) HT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    done("copy");
  }
  void convert(const float* src, void* dst, size_t n) override {
    to_act(src, dst, n);
    done("convert");
  }
  void transpose(const void* src, void* dst, int n, int a, int b) override {
    HT_REQUIRE(options_.channels_last, "transpose: the backend is not channels-last");
    kernels::transpose(options_.act_type, src, dst, n, a, b, stream_);
    done("transpose");
  }
  void convert_filter(const float* kcrs, void* krsc, int k, int c, int rs) override {
    HT_REQUIRE(options_.channels_last, "convert_filter: the backend is not channels-last");
    kernels::convert_transposed(options_.act_type, kcrs, krsc, k, c, rs, stream_);
    done("convert_filter");
  }
  void synchronize() override { HT_CUDA(cudaStreamSynchronize(stream_)); }
  bool can_capture() const override { return !options_.sync_each_call; }
  void begin_capture() override { graphs_.begin(stream_); }
  int end_capture() override { return graphs_.end(stream_); }
  void abort_capture() override { graphs_.abort(stream_); }
  void replay(int id) override {
    graphs_.launch(id, stream_);
    done("replay");
  }
  void drop_graphs() override { graphs_.drop(); }
  // A profiler that cannot start is no reason to stop: its error is read (so that no
  // later check takes it for its own) and dropped.
  void profiler_start() override {
    if (cudaProfilerStart() != cudaSuccess) (void)cudaGetLastError();
  }
  void profiler_stop() override {
    if (cudaProfilerStop() != cudaSuccess) (void)cudaGetLastError();
  }

  // Input on copy_stream_: batch k+1 moves while batch k computes (see Backend).
  void pin_host(void* p, size_t bytes) override {
    HT_CUDA(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
  }
  void unpin_host(void* p) override { cudaHostUnregister(p); }
  void upload(int slot, void* dst, const void* host_src, size_t bytes) override {
    if (slot_busy_[slot]) {
      HT_CUDA(cudaStreamWaitEvent(copy_stream_, slot_free_[slot], 0));
      slot_busy_[slot] = false;
    }
    if (bytes > 0) {
      HT_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, copy_stream_));
    }
    if (options_.sync_each_call) HT_CUDA(cudaStreamSynchronize(copy_stream_));
  }
  void uploads_ready() override {
    HT_CUDA(cudaEventRecord(copied_, copy_stream_));
    HT_CUDA(cudaStreamWaitEvent(stream_, copied_, 0));
    done("upload");
  }
  void input_consumed(int slot) override {
    HT_CUDA(cudaEventRecord(slot_free_[slot], stream_));
    slot_busy_[slot] = true;
  }
  void wait_uploads() override { HT_CUDA(cudaEventSynchronize(copied_)); }

  void decode_input(const void* raw, SampleType type, size_t n, const InputNorm& norm,
                    void* out) override {
    const DType t = options_.act_type;
    switch (type) {
      case SampleType::kU8:
        kernels::decode_u8(t, static_cast<const uint8_t*>(raw), n, kU8Scale, norm, out, stream_);
        break;
      case SampleType::kF16:
        kernels::decode_f16(t, static_cast<const uint16_t*>(raw), n, norm, out, stream_);
        break;
      case SampleType::kF32:
        if (norm.mean != nullptr) {
          kernels::decode_f32(t, static_cast<const float*>(raw), n, norm, out, stream_);
        } else {
          to_act(static_cast<const float*>(raw), out, n);
        }
        break;
      case SampleType::kToken:
        kernels::decode_i32(options_.act_type, static_cast<const int32_t*>(raw), n, out, stream_);
        break;
    }
    done("decode_input");
  }

  void phase_mark(int i) override {
    kernels::phase_mark(phase_stamps_, phase_sums_, i, kPhaseMarks, stream_);
    done("phase_mark");
  }
  PhaseSeconds take_phases() override {
    PhaseSeconds sums;
    copy_to_host(sums.data(), phase_sums_, sizeof(sums));
    reset_phases();
    return sums;
  }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
            const void* b, float beta, void* c) override {
    matmul(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, options_.act_type);
    done("gemm");
  }
  void gemm_f32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                    const void* b, float beta, float* c) override {
    matmul(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, DType::kF32);
    done("gemm_f32_out");
  }
  void add_bias(void* y, const float* bias, int rows, int cols) override {
    kernels::add_bias(options_.act_type, y, bias, rows, cols, stream_);
    done("add_bias");
  }
  void sum_rows(const void* dy, float* dbias, int rows, int cols) override {
    kernels::sum_rows(options_.act_type, dy, dbias, rows, cols, stream_);
    done("sum_rows");
  }
  // Channels last, [n * hw, c] is a matrix whose columns are the channels.
  void add_channel_bias(void* y, const float* bias, int n, int c, int hw) override {
    if (options_.channels_last) {
      kernels::add_bias(options_.act_type, y, bias, n * hw, c, stream_);
    } else {
      kernels::add_channel_bias(options_.act_type, y, bias, n, c, hw, stream_);
    }
    done("add_channel_bias");
  }
  void sum_channels(const void* dy, float* dbias, int n, int c, int hw) override {
    if (options_.channels_last) {
      kernels::sum_rows(options_.act_type, dy, dbias, n * hw, c, stream_);
    } else {
      kernels::sum_channels(options_.act_type, dy, dbias, n, c, hw, stream_);
    }
    done("sum_channels");
  }
  void add(const void* a, const void* b, void* y, size_t n) override {
    kernels::add(options_.act_type, a, b, y, n, stream_);
    done("add");
  }
  void multiply(const void* a, const void* b, void* y, size_t n) override {
    kernels::multiply(options_.act_type, a, b, y, n, stream_);
    done("multiply");
  }

  size_t conv2d_workspace_bytes(const Conv2dShape& s) override {
    return layers_->conv2d_workspace_bytes(s);
  }
  void conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                      void* workspace) override {
    layers_->conv2d_forward(s, x, w, y, workspace);
  }
  void conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                            void* workspace, bool accumulate) override {
    layers_->conv2d_backward_data(s, dy, w, dx, workspace, accumulate);
  }
  void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy, float* dw,
                              void* workspace) override {
    layers_->conv2d_backward_filter(s, x, dy, dw, workspace);
  }
  void maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) override {
    layers_->maxpool2d_forward(s, x, y);
  }
  void maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y, const void* dy,
                          void* dx) override {
    layers_->maxpool2d_backward(s, x, y, dy, dx);
  }
  void avgpool2d_forward(const Pool2dShape& s, const void* x, void* y) override {
    kernels::avgpool2d_forward(options_.act_type, s, options_.channels_last, x, y, stream_);
    done("avgpool2d_forward");
  }
  void avgpool2d_backward(const Pool2dShape& s, const void* dy, void* dx) override {
    kernels::avgpool2d_backward(options_.act_type, s, options_.channels_last, dy, dx, stream_);
    done("avgpool2d_backward");
  }

  void relu_forward(const void* x, void* y, size_t n) override {
    kernels::relu_forward(options_.act_type, x, y, n, stream_);
    done("relu_forward");
  }
  void relu_backward(const void* y, const void* dy, void* dx, size_t n) override {
    kernels::relu_backward(options_.act_type, y, dy, dx, n, stream_);
    done("relu_backward");
  }

  void batchnorm_forward_training(const void* x, const float* gamma, const float* beta, void* y,
                                  int n, int c, int hw, float eps, float momentum,
                                  float* running_mean, float* running_var, float* save_mean,
                                  float* save_invstd) override {
    layers_->batchnorm_forward_training(x, gamma, beta, y, n, c, hw, eps, momentum, running_mean,
                                        running_var, save_mean, save_invstd);
  }
  void batchnorm_forward_inference(const void* x, const float* gamma, const float* beta, void* y,
                                   int n, int c, int hw, float eps, const float* running_mean,
                                   const float* running_var) override {
    layers_->batchnorm_forward_inference(x, gamma, beta, y, n, c, hw, eps, running_mean,
                                         running_var);
  }
  void batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                          float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                          const float* save_mean, const float* save_invstd) override {
    layers_->batchnorm_backward(x, dy, gamma, dx, dgamma, dbeta, n, c, hw, eps, save_mean,
                                save_invstd);
  }
  // Fused in one pass over the data channels last; else the separate operations.
  void batchnorm_add_relu_forward(bool training, const void* x, const void* z, const float* gamma,
                                  const float* beta, void* y, int n, int c, int hw, float eps,
                                  float momentum, float* running_mean, float* running_var,
                                  float* save_mean, float* save_invstd) override {
    if (options_.channels_last) {
      layers_->batchnorm_nhwc_forward(training, x, z, true, gamma, beta, y, n * hw, c, eps,
                                      momentum, running_mean, running_var, save_mean, save_invstd);
    } else {
      Backend::batchnorm_add_relu_forward(training, x, z, gamma, beta, y, n, c, hw, eps, momentum,
                                          running_mean, running_var, save_mean, save_invstd);
    }
  }
  void batchnorm_add_relu_backward(const void* x, const void* y, const void* dy, void* dz,
                                   const float* gamma, void* dx, float* dgamma, float* dbeta, int n,
                                   int c, int hw, float eps, const float* save_mean,
                                   const float* save_invstd) override {
    if (options_.channels_last) {
      layers_->batchnorm_nhwc_backward(x, y, dy, dz, gamma, dx, dgamma, dbeta, n * hw, c, save_mean,
                                       save_invstd);
    } else {
      Backend::batchnorm_add_relu_backward(x, y, dy, dz, gamma, dx, dgamma, dbeta, n, c, hw, eps,
                                           save_mean, save_invstd);
    }
  }
  std::unique_ptr<RnnPlan> plan_rnn(const RnnShape& s) override { return layers_->plan_rnn(s); }
  void swap_leading(const void* src, void* dst, int a, int b, int inner) override {
    kernels::swap_leading(options_.act_type, src, dst, a, b, inner, stream_);
    done("swap_leading");
  }
  void lstm_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                         const float* c_prev, float* gates, float* c, void* h, int batch,
                         int hidden) override {
    kernels::lstm_forward_step(options_.act_type, gx, gh, b_ih, b_hh, c_prev, gates, c, h, batch,
                               hidden, stream_);
    done("lstm_forward_step");
  }
  void lstm_backward_step(const float* gates, const float* c, const float* c_prev, const void* dh,
                          float* dc, void* dz, int batch, int hidden) override {
    kernels::lstm_backward_step(options_.act_type, gates, c, c_prev, dh, dc, dz, batch, hidden,
                                stream_);
    done("lstm_backward_step");
  }
  void sum_squares(const float* x, size_t n, float* acc) override {
    kernels::sum_squares(x, n, acc, sum_partials_, stream_);
    done("sum_squares");
  }
  void clip_by_norm(float* x, size_t n, const float* acc, float max_norm) override {
    kernels::clip_by_norm(x, n, acc, max_norm, stream_);
    done("clip_by_norm");
  }
  void gru_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                        const void* h_prev, float* gates, float* hn, void* h, int batch,
                        int hidden) override {
    kernels::gru_forward_step(options_.act_type, gx, gh, b_ih, b_hh, h_prev, gates, hn, h, batch,
                              hidden, stream_);
    done("gru_forward_step");
  }
  void gru_backward_step(const float* gates, const float* hn, const void* h_prev, const void* dh,
                         void* dgx, void* dgh, void* dh_prev, int batch, int hidden) override {
    kernels::gru_backward_step(options_.act_type, gates, hn, h_prev, dh, dgx, dgh, dh_prev, batch,
                               hidden, stream_);
    done("gru_backward_step");
  }
  void embedding_forward(const void* ids, const void* table, void* out, int rows, int vocab,
                         int dim) override {
    kernels::embedding_forward(options_.act_type, ids, table, out, rows, vocab, dim, stream_);
    done("embedding_forward");
  }
  void embedding_backward(const void* ids, const void* dy, float* dtable, int rows, int vocab,
                          int dim) override {
    kernels::embedding_backward(options_.act_type, ids, dy, dtable, rows, vocab, dim, stream_);
    done("embedding_backward");
  }

  void dropout_forward(const void* x, void* y, void* mask, size_t n, float p,
                       uint64_t seed) override {
    HT_REQUIRE(p >= 0.0f && p < 1.0f, "dropout: p must be in [0, 1)");
    kernels::dropout_forward(options_.act_type, x, y, mask, n, p, seed, stream_);
    done("dropout_forward");
  }

  void softmax_xent(const void* logits, const int32_t* labels, int rows, int cols, float grad_scale,
                    const float* loss_scale, void* dlogits, LossStats* stats) override {
    kernels::softmax_xent(options_.act_type, logits, labels, rows, cols, grad_scale, loss_scale,
                          dlogits, stats, stream_);
    done("softmax_xent");
  }
#ifdef HT_HAVE_NCCL
  // NCCL on the backend's stream: in order with the kernels before and after, no host wait.
  bool has_device_collectives() const override { return true; }
  std::vector<std::byte> new_collective_id() override {
    static_assert(sizeof(ncclUniqueId) == kCollectiveIdBytes);
    ncclUniqueId id;
    HT_CUDA(ncclGetUniqueId(&id));
    const auto* p = reinterpret_cast<const std::byte*>(&id);
    return {p, p + sizeof(id)};
  }
  void join_collectives(const std::vector<std::byte>& id, int rank, int size) override {
    HT_REQUIRE(id.size() == sizeof(ncclUniqueId), "NCCL: malformed unique id");
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof(uid));
    HT_CUDA(ncclCommInitRank(&nccl_, size, uid, rank));
    HT_CUDA(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    HT_CUDA(cudaEventCreateWithFlags(&comm_ready_, cudaEventDisableTiming));
    HT_CUDA(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
  }
  // On comm_stream_, after the computation issued so far (the gradients it sums).
  void allreduce_sum_async(float* x, size_t n) override {
    HT_REQUIRE(nccl_ != nullptr, "NCCL: join_collectives() first");
    HT_CUDA(cudaEventRecord(comm_ready_, stream_));
    HT_CUDA(cudaStreamWaitEvent(comm_stream_, comm_ready_, 0));
    HT_CUDA(ncclAllReduce(x, x, n, ncclFloat, ncclSum, nccl_, comm_stream_));
    comm_pending_ = true;
    if (options_.sync_each_call) HT_CUDA(cudaStreamSynchronize(comm_stream_));
  }
  void wait_collectives() override {
    if (!comm_pending_) return;
    HT_CUDA(cudaEventRecord(comm_done_, comm_stream_));
    HT_CUDA(cudaStreamWaitEvent(stream_, comm_done_, 0));
    comm_pending_ = false;
  }
  void allreduce_sum(float* x, size_t n) override {
    HT_REQUIRE(nccl_ != nullptr, "NCCL: join_collectives() first");
    HT_CUDA(ncclAllReduce(x, x, n, ncclFloat, ncclSum, nccl_, stream_));
    done("allreduce_sum");
  }
  void broadcast(float* x, size_t n, int root) override {
    HT_REQUIRE(nccl_ != nullptr, "NCCL: join_collectives() first");
    HT_CUDA(ncclBroadcast(x, x, n, ncclFloat, root, nccl_, stream_));
    done("broadcast");
  }
#endif

  void sgd_update(float* params, const float* grads, float* velocity, size_t n,
                  const SgdParams& sgd, const float* skip) override {
    kernels::sgd_update(params, grads, velocity, n, sgd, skip, stream_);
    done("sgd_update");
  }
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                   const AdamParams& adam, const float* step, const float* skip) override {
    kernels::adam_update(params, grads, m, v, n, adam, step, skip, stream_);
    done("adam_update");
  }
  void count_step(float* counter, const float* skip) override {
    kernels::count_step(counter, skip, stream_);
    done("count_step");
  }
  void unscale_grads(float* grads, size_t n, float* state) override {
    kernels::unscale_grads(grads, n, state, stream_);
    done("unscale_grads");
  }
  void update_loss_scale(float* state, float growth, float backoff, int interval) override {
    kernels::update_loss_scale(state, growth, backoff, interval, stream_);
    done("update_loss_scale");
  }
  void merge_loss_stats(LossStats* into, LossStats* step, const float* skip) override {
    kernels::merge_loss_stats(into, step, skip, stream_);
    done("merge_loss_stats");
  }
  void scale(float* x, size_t n, float alpha) override {
    kernels::scale(x, n, alpha, stream_);
    done("scale");
  }
  void accumulate(float* sum, const float* x, size_t n) override {
    kernels::accumulate(sum, x, n, stream_);
    done("accumulate");
  }

 private:
  void reset_phases() {
    HT_CUDA(
        cudaMemsetAsync(phase_stamps_, 0, (kPhaseMarks + 1) * sizeof(unsigned long long), stream_));
    HT_CUDA(cudaMemsetAsync(phase_sums_, 0, kPhaseMarks * sizeof(double), stream_));
  }

  // dst = src rounded to the activation type: a copy for float32.
  void to_act(const float* src, void* dst, size_t n) {
    if (options_.act_type != DType::kF32) {
      kernels::convert(options_.act_type, src, dst, n, stream_);
    } else if (n > 0) {
      HT_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    }
  }

  // Row-major C[m x n] = alpha * op(A) op(B) + beta * C with A and B activations and C of
  // type c_type. Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
  // operands.
  void matmul(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
              const void* b, float beta, void* c, DType c_type) {
    const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (options_.act_type == DType::kF32) {  // then C is float32 too
      HT_CUDA(cublasSgemm(cublas_, op_b, op_a, n, m, k, &alpha, static_cast<const float*>(b), ldb,
                          static_cast<const float*>(a), lda, &beta, static_cast<float*>(c), n));
      return;
    }
    const cudaDataType_t ab = cublas_type(options_.act_type);
    HT_CUDA(cublasGemmEx(cublas_, op_b, op_a, n, m, k, &alpha, b, ab, ldb, a, ab, lda, &beta, c,
                         cublas_type(c_type), n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  void done(const char* op) const { cuda::check_done(options_.sync_each_call, stream_, op); }

  // Before the first algorithm timing (ConvPlanner): about a quarter second of matrix products, so
  // that an idle GPU's clocks have ramped up and the first shapes are not timed slow.
  void warm_up() {
    constexpr int kN = 4096;
    constexpr size_t kBytes = size_t{kN} * kN * sizeof(float);
    Scratch a(kBytes, stream_), c(kBytes, stream_);
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < 100; ++i) {
      HT_CUDA(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &one,
                          static_cast<const float*>(a.p), kN, static_cast<const float*>(a.p), kN,
                          &zero, static_cast<float*>(c.p), kN));
    }
    HT_CUDA(cudaStreamSynchronize(stream_));
  }

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;          // input uploads
  cudaEvent_t copied_ = nullptr;                // the uploads enqueued so far
  cudaEvent_t slot_free_[2] = {};               // the computation is done with an input slot
  bool slot_busy_[2] = {};                      // slot_free_ recorded and not yet waited for
  unsigned long long* phase_stamps_ = nullptr;  // kernels::phase_mark's state
  double* phase_sums_ = nullptr;
  double* sum_partials_ = nullptr;  // sum_squares' blocks' partial sums
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<cuda::CudnnLayers> layers_;
  cuda::StepGraphs graphs_;
  double* watch_host_ = nullptr;  // loss_nonfinite: pinned copy of the running loss sum
  double watch_seen_ = 0.0;       // the newest copy that landed
  cudaEvent_t watched_ = nullptr;
#ifdef HT_HAVE_NCCL
  ncclComm_t nccl_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;  // gradient buckets (allreduce_sum_async)
  cudaEvent_t comm_ready_ = nullptr, comm_done_ = nullptr;
  bool comm_pending_ = false;  // collectives started since the last wait_collectives()
#endif
};

}  // namespace

namespace cuda {
std::unique_ptr<Backend> new_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}
}  // namespace cuda

}  // namespace hpctrain

// CPU backend: OpenBLAS for GEMM, plain vectorisable loops for the rest, all spread over the
// rank's own thread team (core/thread_pool.hpp): convolutions split the batch, GEMMs the
// rows or columns of the result, the other operations their channels or elements. BLAS
// itself runs single-threaded inside each part (its own threads would spin between calls).
// Results depend on the thread count (how partial sums are split), never on timing.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "core/sample_type.hpp"
#include "core/thread_pool.hpp"

namespace hpctrain {

class CpuBackend final : public Backend {
 public:
  // Convolutions lower a chunk of samples at a time to one GEMM (im2col); the chunk is as
  // many samples as fit in this many bytes of workspace, at least one. Half a typical L2:
  // larger chunks measured slower (the col buffer falls out of cache), while small late
  // feature maps (7x7) still get a GEMM several samples wide.
  static constexpr size_t kDefaultConvChunkBytes = size_t{512} << 10;

  // threads: BLAS threads for this rank (>= 1). conv_chunk_bytes: see above (tests set it
  // small or huge to take the one-sample and the many-sample paths). stage_as_device: report
  // host_accessible() false, so that the trainer stages data as for a GPU (tests of that
  // path on machines without one). act_type: the activations' type (Backend).
  explicit CpuBackend(int threads, size_t conv_chunk_bytes = kDefaultConvChunkBytes,
                      bool stage_as_device = false, DType act_type = DType::kF32);
  ~CpuBackend() override;
  const char* name() const override { return "cpu"; }
  bool host_accessible() const override { return !stage_as_device_; }
  DType act_type() const override { return act_type_; }

  void* alloc_bytes(size_t bytes) override;
  void free_bytes(void* p) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(float* x, size_t n) override;
  void copy(const void* src, void* dst, size_t bytes) override;
  void synchronize() override {}

  void convert(const float* src, void* dst, size_t n) override;
  void decode_input(const void* raw, SampleType type, size_t n, const InputNorm& norm,
                    void* out) override;

  // The operations on activations (cpu_mixed.cpp): with float32 activations they are the
  // float32 code below; with 16-bit ones, that code on float copies (see widen()).
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
            const void* b, float beta, void* c) override;
  void gemm_f32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                    const void* b, float beta, float* c) override;
  void add_bias(void* y, const float* bias, int rows, int cols) override;
  void sum_rows(const void* dy, float* dbias, int rows, int cols) override;
  void add_channel_bias(void* y, const float* bias, int n, int c, int hw) override;
  void sum_channels(const void* dy, float* dbias, int n, int c, int hw) override;
  void add(const void* a, const void* b, void* y, size_t n) override;
  void multiply(const void* a, const void* b, void* y, size_t n) override;
  // The CPU runs no whole recurrent stacks: null, unless a test has given a planner.
  std::unique_ptr<RnnPlan> plan_rnn(const RnnShape& shape) override {
    return rnn_planner_ ? rnn_planner_(shape) : nullptr;
  }
  // Tests only: plan_rnn answers with `planner` (the layer's path for a backend's own plans,
  // on machines without a GPU).
  void set_rnn_planner(std::function<std::unique_ptr<RnnPlan>(const RnnShape&)> planner) {
    rnn_planner_ = std::move(planner);
  }
  void swap_leading(const void* src, void* dst, int a, int b, int inner) override;
  void lstm_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                         const float* c_prev, float* gates, float* c, void* h, int batch,
                         int hidden) override;
  void lstm_backward_step(const float* gates, const float* c, const float* c_prev, const void* dh,
                          float* dc, void* dz, int batch, int hidden) override;
  void gru_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                        const void* h_prev, float* gates, float* hn, void* h, int batch,
                        int hidden) override;
  void gru_backward_step(const float* gates, const float* hn, const void* h_prev, const void* dh,
                         void* dgx, void* dgh, void* dh_prev, int batch, int hidden) override;
  void embedding_forward(const void* ids, const void* table, void* out, int rows, int vocab,
                         int dim) override;
  void embedding_backward(const void* ids, const void* dy, float* dtable, int rows, int vocab,
                          int dim) override;
  size_t conv2d_workspace_bytes(const Conv2dShape& s) override;
  void conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                      void* workspace) override;
  void conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                            void* workspace, bool accumulate) override;
  void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy, float* dw,
                              void* workspace) override;
  void maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) override;
  void maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y, const void* dy,
                          void* dx) override;
  void avgpool2d_forward(const Pool2dShape& s, const void* x, void* y) override;
  void avgpool2d_backward(const Pool2dShape& s, const void* dy, void* dx) override;
  void relu_forward(const void* x, void* y, size_t n) override;
  void relu_backward(const void* y, const void* dy, void* dx, size_t n) override;
  void batchnorm_forward_training(const void* x, const float* gamma, const float* beta, void* y,
                                  int n, int c, int hw, float eps, float momentum,
                                  float* running_mean, float* running_var, float* save_mean,
                                  float* save_invstd) override;
  void batchnorm_forward_inference(const void* x, const float* gamma, const float* beta, void* y,
                                   int n, int c, int hw, float eps, const float* running_mean,
                                   const float* running_var) override;
  void batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                          float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                          const float* save_mean, const float* save_invstd) override;
  void dropout_forward(const void* x, void* y, void* mask, size_t n, float p,
                       uint64_t seed) override;
  void softmax_xent(const void* logits, const int32_t* labels, int rows, int cols, float grad_scale,
                    const float* loss_scale, void* dlogits, LossStats* stats) override;

  void sgd_update(float* params, const float* grads, float* velocity, size_t n,
                  const SgdParams& sgd, const float* skip) override;
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                   const AdamParams& adam, const float* step, const float* skip) override;
  void count_step(float* counter, const float* skip) override;
  void unscale_grads(float* grads, size_t n, float* state) override;
  void update_loss_scale(float* state, float growth, float backoff, int interval) override;
  void merge_loss_stats(LossStats* into, LossStats* step, const float* skip) override;
  void sum_squares(const float* x, size_t n, float* acc) override;
  void clip_by_norm(float* x, size_t n, const float* acc, float max_norm) override;
  void scale(float* x, size_t n, float alpha) override;
  void accumulate(float* sum, const float* x, size_t n) override;

  int threads() const { return threads_; }

 private:
  std::function<std::unique_ptr<RnnPlan>(const RnnShape&)> rnn_planner_;
  // Samples per im2col chunk for this shape: fills conv_chunk_bytes_, at least 1, at most n.
  int conv_chunk(const Conv2dShape& s) const;
  // Floats of one thread's convolution scratch (col plus staging) for chunks of g.
  size_t conv_thread_floats(const Conv2dShape& s, int g) const;
  // Threads a convolution over s.n samples uses: no more than there are samples.
  int conv_threads(const Conv2dShape& s) const;
  // Elements per part below which a loop is not split (handing work to another thread
  // costs microseconds).
  static constexpr size_t kElementGrain = 32768;
  // Multiply-adds below which a GEMM runs on one thread.
  static constexpr double kParallelGemmWork = 1 << 18;
  // The grain, in items of item_elems elements, that gives parts of kElementGrain elements.
  static size_t grain_for(size_t item_elems) {
    return std::max<size_t>(1, kElementGrain / std::max<size_t>(1, item_elems));
  }
  // Calls fn(begin, end) over [0, n) split across the threads, in parts of at least grain.
  template <typename F>
  void parallel(size_t n, size_t grain, F&& fn) {
    pool_->parallel_for(n, grain, std::forward<F>(fn));
  }

  // The float32 operations (cpu_backend.cpp, cpu_conv.cpp, cpu_pool.cpp, cpu_norm.cpp).
  void gemm_f32(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                const float* b, float beta, float* c);
  void add_bias_f32(float* y, const float* bias, int rows, int cols);
  void sum_rows_f32(const float* dy, float* dbias, int rows, int cols);
  void add_channel_bias_f32(float* y, const float* bias, int n, int c, int hw);
  void sum_channels_f32(const float* dy, float* dbias, int n, int c, int hw);
  void add_f32(const float* a, const float* b, float* y, size_t n);
  void multiply_f32(const float* a, const float* b, float* y, size_t n);
  void lstm_forward_step_f32(const float* gx, const float* gh, const float* b_ih, const float* b_hh,
                             const float* c_prev, float* gates, float* c, float* h, int batch,
                             int hidden);
  void lstm_backward_step_f32(const float* gates, const float* c, const float* c_prev,
                              const float* dh, float* dc, float* dz, int batch, int hidden);
  void gru_forward_step_f32(const float* gx, const float* gh, const float* b_ih, const float* b_hh,
                            const float* h_prev, float* gates, float* hn, float* h, int batch,
                            int hidden);
  void gru_backward_step_f32(const float* gates, const float* hn, const float* h_prev,
                             const float* dh, float* dgx, float* dgh, float* dh_prev, int batch,
                             int hidden);
  void conv2d_forward_f32(const Conv2dShape& s, const float* x, const float* w, float* y,
                          void* workspace);
  void conv2d_backward_data_f32(const Conv2dShape& s, const float* dy, const float* w, float* dx,
                                void* workspace, bool accumulate);
  void conv2d_backward_filter_f32(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                                  void* workspace);
  void maxpool2d_forward_f32(const Pool2dShape& s, const float* x, float* y);
  void maxpool2d_backward_f32(const Pool2dShape& s, const float* x, const float* dy, float* dx);
  void avgpool2d_forward_f32(const Pool2dShape& s, const float* x, float* y);
  void avgpool2d_backward_f32(const Pool2dShape& s, const float* dy, float* dx);
  void relu_forward_f32(const float* x, float* y, size_t n);
  void relu_backward_f32(const float* y, const float* dy, float* dx, size_t n);
  void batchnorm_forward_training_f32(const float* x, const float* gamma, const float* beta,
                                      float* y, int n, int c, int hw, float eps, float momentum,
                                      float* running_mean, float* running_var, float* save_mean,
                                      float* save_invstd);
  void batchnorm_forward_inference_f32(const float* x, const float* gamma, const float* beta,
                                       float* y, int n, int c, int hw, float eps,
                                       const float* running_mean, const float* running_var);
  void batchnorm_backward_f32(const float* x, const float* dy, const float* gamma, float* dx,
                              float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                              const float* save_mean, const float* save_invstd);
  // Token ids as floats (widened into `slot`), each checked to be an integer in [0, vocab).
  const float* token_ids(int slot, const void* ids, int rows, int vocab);
  void dropout_mask_f32(float* mask, size_t n, float p, uint64_t seed);
  void softmax_xent_f32(const float* logits, const int32_t* labels, int rows, int cols,
                        float grad_scale, float* dlogits, LossStats* stats);

  // Float views of activations for the float32 code. With float32 activations these are
  // the pointers themselves; with 16-bit ones, scratch buffers (one per slot, grown on
  // first use and then reused, so only a model's first steps allocate): widen() copies n
  // values in as floats, out() gives room for n results, narrow() rounds a slot's n
  // results into p. Correct rather than fast: a CPU step in 16 bits costs the float32 one
  // plus the conversions.
  static constexpr int kSlots = 5;
  const float* widen(int slot, const void* p, size_t n);
  float* widen_inout(int slot, void* p, size_t n) { return const_cast<float*>(widen(slot, p, n)); }
  float* out(int slot, void* p, size_t n);
  void narrow(int slot, void* p, size_t n);
  bool f32() const { return act_type_ == DType::kF32; }

  DType act_type_;
  std::vector<float> scratch_[kSlots];
  std::vector<double> block_sums_;  // sum_squares: one partial sum per block
  int threads_;
  size_t conv_chunk_bytes_;
  bool stage_as_device_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace hpctrain

// RecordingBackend: step graphs recorded as lists of calls (recording_backend.hpp).
#include "backend/recording_backend.hpp"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace hpctrain {
namespace {

using Calls = std::vector<std::function<void()>>;

// Runs a call, or keeps it while recording.
class Recorder {
 public:
  explicit Recorder(int refuse_at) : refuse_at_(refuse_at) {}
  template <typename F>
  void run(F&& f) {
    if (recording_) {
      if (++recorded_ == refuse_at_) {
        throw Error("operation " + std::to_string(refuse_at_) +
                    " of the recording refused (HPCTRAIN_RECORD_CPU_REFUSE)");
      }
      current_.emplace_back(std::forward<F>(f));
    } else {
      f();
    }
  }
  // What a CUDA capture cannot hold fails the recording.
  void refuse(const char* op) const {
    if (recording_) throw Error(std::string(op) + " cannot be recorded in a step graph");
  }
  void begin() {
    HT_REQUIRE(!recording_, "a step graph is already being recorded");
    recording_ = true;
    recorded_ = 0;
    current_.clear();
  }
  int end() {
    HT_REQUIRE(recording_, "no step graph is being recorded");
    recording_ = false;
    graphs_.push_back(std::move(current_));
    current_.clear();
    return static_cast<int>(graphs_.size()) - 1;
  }
  void abort() {
    recording_ = false;
    current_.clear();
  }
  void replay(int id) const {
    refuse("replaying a step graph");
    HT_REQUIRE(id >= 0 && static_cast<size_t>(id) < graphs_.size(), "no step graph of that id");
    for (const auto& call : graphs_[static_cast<size_t>(id)]) call();
  }
  void drop() { graphs_.clear(); }

 private:
  int refuse_at_;     // the operation of each recording to refuse (0: none)
  int recorded_ = 0;  // operations of the current recording
  bool recording_ = false;
  Calls current_;
  std::vector<Calls> graphs_;
};

// The inner backend's own recurrent plan, its passes recorded like the other operations.
class RecordingRnnPlan final : public RnnPlan {
 public:
  RecordingRnnPlan(std::unique_ptr<RnnPlan> inner, Recorder& rec)
      : inner_(std::move(inner)), rec_(rec) {}
  void forward(const void* weights, const void* x, void* y, int batch, bool training) override {
    RnnPlan* in = inner_.get();
    rec_.run([=] { in->forward(weights, x, y, batch, training); });
  }
  void backward(const void* x, const void* y, const void* dy, void* dx, float* grads,
                int batch) override {
    RnnPlan* in = inner_.get();
    rec_.run([=] { in->backward(x, y, dy, dx, grads, batch); });
  }

 private:
  std::unique_ptr<RnnPlan> inner_;
  Recorder& rec_;
};

class RecordingBackend final : public Backend {
 public:
  RecordingBackend(std::unique_ptr<Backend> inner, int refuse_at)
      : inner_(std::move(inner)), rec_(refuse_at) {}

  // Questions about the backend: answered at once, recording or not.
  const char* name() const override { return inner_->name(); }
  bool host_accessible() const override { return inner_->host_accessible(); }
  int64_t device_free_bytes() const override { return inner_->device_free_bytes(); }
  DType act_type() const override { return inner_->act_type(); }
  bool channels_last() const override { return inner_->channels_last(); }
  size_t conv2d_workspace_bytes(const Conv2dShape& s) override {
    return inner_->conv2d_workspace_bytes(s);
  }
  bool has_device_collectives() const override { return inner_->has_device_collectives(); }
  std::string device_id() const override { return inner_->device_id(); }
  std::unique_ptr<RnnPlan> plan_rnn(const RnnShape& shape) override {
    rec_.refuse("planning a recurrent stack");
    std::unique_ptr<RnnPlan> plan = inner_->plan_rnn(shape);
    if (plan == nullptr) return nullptr;
    return std::make_unique<RecordingRnnPlan>(std::move(plan), rec_);
  }

  // Step graphs.
  bool can_capture() const override { return true; }
  void begin_capture() override { rec_.begin(); }
  int end_capture() override { return rec_.end(); }
  void abort_capture() override { rec_.abort(); }
  void replay(int id) override { rec_.replay(id); }
  void drop_graphs() override { rec_.drop(); }

  // What a CUDA graph cannot hold: allocations, host memory, waits, uploads.
  void* alloc_bytes(size_t bytes) override {
    rec_.refuse("alloc_bytes");
    return inner_->alloc_bytes(bytes);
  }
  void free_bytes(void* p) override {
    rec_.refuse("free_bytes");
    inner_->free_bytes(p);
  }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    rec_.refuse("copy_to_device");
    inner_->copy_to_device(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    rec_.refuse("copy_to_host");
    inner_->copy_to_host(host_dst, src, bytes);
  }
  void synchronize() override {
    rec_.refuse("synchronize");
    inner_->synchronize();
  }
  void pin_host(void* p, size_t bytes) override {
    rec_.refuse("pin_host");
    inner_->pin_host(p, bytes);
  }
  void unpin_host(void* p) override {
    rec_.refuse("unpin_host");
    inner_->unpin_host(p);
  }
  void upload(int slot, void* dst, const void* host_src, size_t bytes) override {
    rec_.refuse("upload");
    inner_->upload(slot, dst, host_src, bytes);
  }
  void uploads_ready() override {
    rec_.refuse("uploads_ready");
    inner_->uploads_ready();
  }
  void input_consumed(int slot) override {
    rec_.refuse("input_consumed");
    inner_->input_consumed(slot);
  }
  void wait_uploads() override {
    rec_.refuse("wait_uploads");
    inner_->wait_uploads();
  }
  PhaseSeconds take_phases() override {
    rec_.refuse("take_phases");
    return inner_->take_phases();
  }
  bool loss_nonfinite(const LossStats* stats) override {
    rec_.refuse("loss_nonfinite");
    return inner_->loss_nonfinite(stats);
  }
  std::vector<std::byte> new_collective_id() override {
    rec_.refuse("new_collective_id");
    return inner_->new_collective_id();
  }
  void join_collectives(const std::vector<std::byte>& id, int rank, int size) override {
    rec_.refuse("join_collectives");
    inner_->join_collectives(id, rank, size);
  }
  void profiler_start() override { inner_->profiler_start(); }
  void profiler_stop() override { inner_->profiler_stop(); }

  // Work on backend memory: recorded while recording, else run.
  void fill_zero(float* x, size_t n) override {
    rec_.run([in = in(), x, n] { in->fill_zero(x, n); });
  }
  void copy(const void* src, void* dst, size_t bytes) override {
    rec_.run([in = in(), src, dst, bytes] { in->copy(src, dst, bytes); });
  }
  void convert(const float* src, void* dst, size_t n) override {
    rec_.run([in = in(), src, dst, n] { in->convert(src, dst, n); });
  }
  void transpose(const void* src, void* dst, int n, int a, int b) override {
    rec_.run([=, in = in()] { in->transpose(src, dst, n, a, b); });
  }
  void convert_filter(const float* kcrs, void* krsc, int k, int c, int rs) override {
    rec_.run([=, in = in()] { in->convert_filter(kcrs, krsc, k, c, rs); });
  }
  void decode_input(const void* raw, SampleType type, size_t n, const InputNorm& norm,
                    void* out) override {
    rec_.run([=, in = in()] { in->decode_input(raw, type, n, norm, out); });
  }
  void phase_mark(int i) override {
    rec_.run([in = in(), i] { in->phase_mark(i); });
  }
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
            const void* b, float beta, void* c) override {
    rec_.run([=, in = in()] { in->gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c); });
  }
  void gemm_f32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                    const void* b, float beta, float* c) override {
    rec_.run([=, in = in()] { in->gemm_f32_out(trans_a, trans_b, m, n, k, alpha, a, b, beta, c); });
  }
  void add_bias(void* y, const float* bias, int rows, int cols) override {
    rec_.run([=, in = in()] { in->add_bias(y, bias, rows, cols); });
  }
  void sum_rows(const void* dy, float* dbias, int rows, int cols) override {
    rec_.run([=, in = in()] { in->sum_rows(dy, dbias, rows, cols); });
  }
  void add_channel_bias(void* y, const float* bias, int n, int c, int hw) override {
    rec_.run([=, in = in()] { in->add_channel_bias(y, bias, n, c, hw); });
  }
  void sum_channels(const void* dy, float* dbias, int n, int c, int hw) override {
    rec_.run([=, in = in()] { in->sum_channels(dy, dbias, n, c, hw); });
  }
  void add(const void* a, const void* b, void* y, size_t n) override {
    rec_.run([=, in = in()] { in->add(a, b, y, n); });
  }
  void multiply(const void* a, const void* b, void* y, size_t n) override {
    rec_.run([=, in = in()] { in->multiply(a, b, y, n); });
  }
  void conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                      void* workspace) override {
    rec_.run([=, in = in()] { in->conv2d_forward(s, x, w, y, workspace); });
  }
  void conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                            void* workspace, bool accumulate) override {
    rec_.run([=, in = in()] { in->conv2d_backward_data(s, dy, w, dx, workspace, accumulate); });
  }
  void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy, float* dw,
                              void* workspace) override {
    rec_.run([=, in = in()] { in->conv2d_backward_filter(s, x, dy, dw, workspace); });
  }
  void maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) override {
    rec_.run([=, in = in()] { in->maxpool2d_forward(s, x, y); });
  }
  void maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y, const void* dy,
                          void* dx) override {
    rec_.run([=, in = in()] { in->maxpool2d_backward(s, x, y, dy, dx); });
  }
  void avgpool2d_forward(const Pool2dShape& s, const void* x, void* y) override {
    rec_.run([=, in = in()] { in->avgpool2d_forward(s, x, y); });
  }
  void avgpool2d_backward(const Pool2dShape& s, const void* dy, void* dx) override {
    rec_.run([=, in = in()] { in->avgpool2d_backward(s, dy, dx); });
  }
  void relu_forward(const void* x, void* y, size_t n) override {
    rec_.run([=, in = in()] { in->relu_forward(x, y, n); });
  }
  void relu_backward(const void* y, const void* dy, void* dx, size_t n) override {
    rec_.run([=, in = in()] { in->relu_backward(y, dy, dx, n); });
  }
  void batchnorm_forward_training(const void* x, const float* gamma, const float* beta, void* y,
                                  int n, int c, int hw, float eps, float momentum,
                                  float* running_mean, float* running_var, float* save_mean,
                                  float* save_invstd) override {
    rec_.run([=, in = in()] {
      in->batchnorm_forward_training(x, gamma, beta, y, n, c, hw, eps, momentum, running_mean,
                                     running_var, save_mean, save_invstd);
    });
  }
  void batchnorm_forward_inference(const void* x, const float* gamma, const float* beta, void* y,
                                   int n, int c, int hw, float eps, const float* running_mean,
                                   const float* running_var) override {
    rec_.run([=, in = in()] {
      in->batchnorm_forward_inference(x, gamma, beta, y, n, c, hw, eps, running_mean, running_var);
    });
  }
  void batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                          float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                          const float* save_mean, const float* save_invstd) override {
    rec_.run([=, in = in()] {
      in->batchnorm_backward(x, dy, gamma, dx, dgamma, dbeta, n, c, hw, eps, save_mean,
                             save_invstd);
    });
  }
  void batchnorm_add_relu_forward(bool training, const void* x, const void* z, const float* gamma,
                                  const float* beta, void* y, int n, int c, int hw, float eps,
                                  float momentum, float* running_mean, float* running_var,
                                  float* save_mean, float* save_invstd) override {
    rec_.run([=, in = in()] {
      in->batchnorm_add_relu_forward(training, x, z, gamma, beta, y, n, c, hw, eps, momentum,
                                     running_mean, running_var, save_mean, save_invstd);
    });
  }
  void batchnorm_add_relu_backward(const void* x, const void* y, const void* dy, void* dz,
                                   const float* gamma, void* dx, float* dgamma, float* dbeta, int n,
                                   int c, int hw, float eps, const float* save_mean,
                                   const float* save_invstd) override {
    rec_.run([=, in = in()] {
      in->batchnorm_add_relu_backward(x, y, dy, dz, gamma, dx, dgamma, dbeta, n, c, hw, eps,
                                      save_mean, save_invstd);
    });
  }
  void dropout_forward(const void* x, void* y, void* mask, size_t n, float p,
                       uint64_t seed) override {
    rec_.run([=, in = in()] { in->dropout_forward(x, y, mask, n, p, seed); });
  }
  void swap_leading(const void* src, void* dst, int a, int b, int inner) override {
    rec_.run([=, in = in()] { in->swap_leading(src, dst, a, b, inner); });
  }
  void lstm_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                         const float* c_prev, float* gates, float* c, void* h, int batch,
                         int hidden) override {
    rec_.run([=, in = in()] {
      in->lstm_forward_step(gx, gh, b_ih, b_hh, c_prev, gates, c, h, batch, hidden);
    });
  }
  void lstm_backward_step(const float* gates, const float* c, const float* c_prev, const void* dh,
                          float* dc, void* dz, int batch, int hidden) override {
    rec_.run(
        [=, in = in()] { in->lstm_backward_step(gates, c, c_prev, dh, dc, dz, batch, hidden); });
  }
  void gru_forward_step(const void* gx, const void* gh, const float* b_ih, const float* b_hh,
                        const void* h_prev, float* gates, float* hn, void* h, int batch,
                        int hidden) override {
    rec_.run([=, in = in()] {
      in->gru_forward_step(gx, gh, b_ih, b_hh, h_prev, gates, hn, h, batch, hidden);
    });
  }
  void gru_backward_step(const float* gates, const float* hn, const void* h_prev, const void* dh,
                         void* dgx, void* dgh, void* dh_prev, int batch, int hidden) override {
    rec_.run([=, in = in()] {
      in->gru_backward_step(gates, hn, h_prev, dh, dgx, dgh, dh_prev, batch, hidden);
    });
  }
  void embedding_forward(const void* ids, const void* table, void* out, int rows, int vocab,
                         int dim) override {
    rec_.run([=, in = in()] { in->embedding_forward(ids, table, out, rows, vocab, dim); });
  }
  void embedding_backward(const void* ids, const void* dy, float* dtable, int rows, int vocab,
                          int dim) override {
    rec_.run([=, in = in()] { in->embedding_backward(ids, dy, dtable, rows, vocab, dim); });
  }
  void softmax_xent(const void* logits, const int32_t* labels, int rows, int cols, float grad_scale,
                    const float* loss_scale, void* dlogits, LossStats* stats) override {
    rec_.run([=, in = in()] {
      in->softmax_xent(logits, labels, rows, cols, grad_scale, loss_scale, dlogits, stats);
    });
  }
  void merge_loss_stats(LossStats* into, LossStats* step, const float* skip) override {
    rec_.run([=, in = in()] { in->merge_loss_stats(into, step, skip); });
  }
  void allreduce_sum(float* x, size_t n) override {
    rec_.run([=, in = in()] { in->allreduce_sum(x, n); });
  }
  void broadcast(float* x, size_t n, int root) override {
    rec_.run([=, in = in()] { in->broadcast(x, n, root); });
  }
  void allreduce_sum_async(float* x, size_t n) override {
    rec_.run([=, in = in()] { in->allreduce_sum_async(x, n); });
  }
  void wait_collectives() override {
    rec_.run([in = in()] { in->wait_collectives(); });
  }
  void sgd_update(float* params, const float* grads, float* velocity, size_t n,
                  const SgdParams& sgd, const float* skip) override {
    rec_.run([=, in = in()] { in->sgd_update(params, grads, velocity, n, sgd, skip); });
  }
  void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                   const AdamParams& adam, const float* step, const float* skip) override {
    rec_.run([=, in = in()] { in->adam_update(params, grads, m, v, n, adam, step, skip); });
  }
  void count_step(float* counter, const float* skip) override {
    rec_.run([=, in = in()] { in->count_step(counter, skip); });
  }
  void unscale_grads(float* grads, size_t n, float* state) override {
    rec_.run([=, in = in()] { in->unscale_grads(grads, n, state); });
  }
  void update_loss_scale(float* state, float growth, float backoff, int interval) override {
    rec_.run([=, in = in()] { in->update_loss_scale(state, growth, backoff, interval); });
  }
  void sum_squares(const float* x, size_t n, float* acc) override {
    rec_.run([=, in = in()] { in->sum_squares(x, n, acc); });
  }
  void clip_by_norm(float* x, size_t n, const float* acc, float max_norm) override {
    rec_.run([=, in = in()] { in->clip_by_norm(x, n, acc, max_norm); });
  }
  void scale(float* x, size_t n, float alpha) override {
    rec_.run([=, in = in()] { in->scale(x, n, alpha); });
  }
  void accumulate(float* sum, const float* x, size_t n) override {
    rec_.run([=, in = in()] { in->accumulate(sum, x, n); });
  }

 private:
  Backend* in() const { return inner_.get(); }

  std::unique_ptr<Backend> inner_;
  Recorder rec_;
};

}  // namespace

std::unique_ptr<Backend> make_recording_backend(std::unique_ptr<Backend> inner, int refuse_at) {
  return std::make_unique<RecordingBackend>(std::move(inner), refuse_at);
}

}  // namespace hpctrain

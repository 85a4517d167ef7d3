// The Backend interface: every operation layers and optimizers need, written once
// against device pointers. cpu_backend.cpp implements it with BLAS and loops; a
// CUDA backend implements the same calls with cuBLAS/cuDNN and kernels/.
// A Backend is used from the training thread only (not thread-safe).
//
// Types: a backend computes in one activation type, act_type() (float32, or bfloat16 /
// float16 for mixed precision). Activations (layer inputs and outputs, their gradients,
// dropout masks, logits) and the compute copy of the weights that matrix products and
// convolutions read are of that type: `void*` in the signatures below. Parameters,
// gradients, biases, normalisation parameters and statistics, model state and optimizer
// state are float32 always (`float*`): mixed precision keeps float32 master weights.
// Arithmetic is float32 throughout (16-bit values are widened, results rounded to
// nearest even when stored).
//
// Layout: activations with channels ([n, c, h, w] per the shapes below) are stored NCHW,
// or NHWC (channels last) where channels_last() says so; shapes and parameters are the
// same either way. Filters' float32 values and gradients are KCRS always; a channels-last
// backend's convolutions read a KRSC compute copy (convert_filter). The model moves data
// between the layouts where it enters and leaves the spatial layers (transpose).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/conv_shape.hpp"
#include "core/dtype.hpp"
#include "core/op_params.hpp"

namespace hpctrain {

// Size of a device collective group's identifier (an NCCL unique id).
inline constexpr size_t kCollectiveIdBytes = 128;

// Marks per step of the phase clock (Backend::phase_mark).
inline constexpr int kPhaseMarks = 5;
using PhaseSeconds = std::array<double, kPhaseMarks>;

enum class SampleType;  // core/sample_type.hpp (kernels/ compiles as C++17, without it)

// A stack of LSTM or GRU layers that a backend runs whole, one library call per pass
// (Backend::plan_rnn: cuDNN's RNN API on a GPU). Sequences are time-major, of the
// activation type: x [steps][batch][input] and y [steps][batch][units], the top layer's h
// at every step. `weights` is the compute copy of the stack's parameters in
// nn/recurrent.hpp's order (per layer weight_ih, weight_hh, bias_ih, bias_hh; PyTorch's
// gates), `grads` their float32 gradients in the same order.
struct RnnShape {
  bool lstm = true;  // else GRU
  int input = 0, units = 0, layers = 1, steps = 0, max_batch = 0;
};
class RnnPlan {
 public:
  virtual ~RnnPlan() = default;
  virtual void forward(const void* weights, const void* x, void* y, int batch, bool training) = 0;
  // After the training forward of the same x and weights: given dy, the gradient reaching
  // y, overwrites grads and writes dx, the gradient reaching x.
  virtual void backward(const void* x, const void* y, const void* dy, void* dx, float* grads,
                        int batch) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // True when the backend's memory is host memory (the CPU): collectives, checkpoint
  // snapshots and input batches then use it in place; otherwise they are staged through
  // host buffers with copy_to_host / copy_to_device.
  virtual bool host_accessible() const = 0;
  // Free memory of the device this backend computes on, in bytes (a GPU's, as
  // cudaMemGetInfo reports it now); -1 for a backend on host memory.
  virtual int64_t device_free_bytes() const { return -1; }
  // The type of activations and of the weights' compute copy (see above).
  virtual DType act_type() const = 0;
  // Activations with channels are stored NHWC (see above).
  virtual bool channels_last() const { return false; }

  // Memory. Allocations happen at set-up, never inside the step loop.
  virtual void* alloc_bytes(size_t bytes) = 0;  // zero-filled
  virtual void free_bytes(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(float* x, size_t n) = 0;
  // Device-to-device copy of `bytes` bytes (non-overlapping).
  virtual void copy(const void* src, void* dst, size_t bytes) = 0;
  // dst = src rounded to act_type() (n values; the weights' compute copy).
  virtual void convert(const float* src, void* dst, size_t n) = 0;
  // Channels-last backends only. transpose: activations [n][a][b] -> [n][b][a] (NCHW to
  // NHWC with a, b = c, h * w; back with a, b = h * w, c). convert_filter: a float32 KCRS
  // filter [k][c][rs] rounded into its KRSC compute copy [k][rs][c].
  virtual void transpose(const void* src, void* dst, int n, int a, int b);
  virtual void convert_filter(const float* kcrs, void* krsc, int k, int c, int rs);
  // Waits for all work issued so far (no-op on the CPU).
  virtual void synchronize() = 0;
  // Brackets work for a profiler attached to the process that records only between the
  // two (the CUDA backend: cudaProfilerStart/Stop, for `ncu --profile-from-start off`);
  // cheap no-ops otherwise.
  virtual void profiler_start() {}
  virtual void profiler_stop() {}

  // Step graphs (CUDA graphs): between begin_capture() and end_capture() the device work of
  // the operations called is recorded, not run; end_capture() returns the recording's id,
  // and replay(id) runs that work again, with the same pointers and arguments, in order
  // with the rest. An operation that cannot be recorded (one that waits for the device)
  // throws; abort_capture() then drops the recording. drop_graphs() frees them all.
  // Backends without graphs answer false to can_capture() and are never asked the rest.
  virtual bool can_capture() const { return false; }
  virtual void begin_capture();
  virtual int end_capture();
  virtual void abort_capture() {}
  virtual void replay(int id);
  virtual void drop_graphs() {}

  // Input batches of a device backend, copied beside the computation. The caller keeps
  // two input slots in device memory and, per batch:
  //   upload(slot, dst, src, bytes)...  copies from host memory (pinned by pin_host) once
  //                                     the computation has finished with `slot`'s last
  //                                     batch (see input_consumed);
  //   uploads_ready()                   computation issued later waits for those copies;
  //   input_consumed(slot)              after the last operation that reads the batch;
  //   wait_uploads()                    the host waits for the copies, after which it
  //                                     may reuse the host memory.
  // The defaults copy synchronously (copy_to_device) and wait for nothing.
  virtual void pin_host(void* /*p*/, size_t /*bytes*/) {}
  virtual void unpin_host(void* /*p*/) {}
  virtual void upload(int /*slot*/, void* dst, const void* host_src, size_t bytes) {
    copy_to_device(dst, host_src, bytes);
  }
  virtual void uploads_ready() {}
  virtual void input_consumed(int /*slot*/) {}
  virtual void wait_uploads() {}
  // Decodes n stored input values at `raw` (the backend's memory) into activations, as
  // decode_samples does on the host, normalised as `norm` says (its arrays in the backend's
  // memory; InputNorm{}: not), then rounded to act_type(): a device backend uploads the
  // stored bytes (a quarter of the floats' for uint8) and decodes them where the batch
  // lands.
  virtual void decode_input(const void* raw, SampleType type, size_t n, const InputNorm& norm,
                            void* out) = 0;

  // A clock for the phases of the step loop, read in the backend's order of execution
  // (a GPU stamps its own timer, so the loop never waits for the device to time it):
  // phase_mark(i) for i = 0 .. kPhaseMarks - 1, in order, once per step. take_phases()
  // returns the summed seconds from mark i to mark i + 1 and, last, from a step's final
  // mark to the next step's mark 0, and starts new sums. The default uses the host clock
  // (right for a backend whose operations finish before they return).
  virtual void phase_mark(int i);
  virtual PhaseSeconds take_phases();

  // Row-major C[m x n] = alpha * op(A) * op(B) + beta * C, op(A) is m x k; A, B and C
  // activations or weights (act_type()).
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                    const void* b, float beta, void* c) = 0;
  // The same with C in float32: a weight gradient from activations.
  virtual void gemm_f32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const void* a, const void* b, float beta, float* c) = 0;
  // y[r, :] += bias for each of `rows` rows of width `cols`.
  virtual void add_bias(void* y, const float* bias, int rows, int cols) = 0;
  // dbias = sum over rows of dy (overwrites).
  virtual void sum_rows(const void* dy, float* dbias, int rows, int cols) = 0;

  // NCHW per-channel bias: y[i, c, :] += bias[c] over n samples of c planes of hw.
  virtual void add_channel_bias(void* y, const float* bias, int n, int c, int hw) = 0;
  // dbias[c] = sum of dy[i, c, :] over all samples and positions (overwrites).
  virtual void sum_channels(const void* dy, float* dbias, int n, int c, int hw) = 0;
  // y = a + b element-wise; y may be a or b (residual connections).
  virtual void add(const void* a, const void* b, void* y, size_t n) = 0;
  // y = a * b element-wise; y may be a or b.
  virtual void multiply(const void* a, const void* b, void* y, size_t n) = 0;

  // 2-D convolution (cross-correlation, as in every DL framework), NCHW, filters
  // [c_out, c_in, kh, kw]. Each call takes a scratch `workspace` of at least
  // conv2d_workspace_bytes(shape) bytes that it may overwrite; the caller sizes it once for
  // its largest batch (the size never grows when shape.n shrinks) so the step allocates
  // nothing. Nothing is kept in the workspace between calls.
  virtual size_t conv2d_workspace_bytes(const Conv2dShape& s) = 0;
  // y = conv(x, w) (overwrites y; the bias is added separately with add_channel_bias).
  // w is the weights' compute copy (act_type()).
  virtual void conv2d_forward(const Conv2dShape& s, const void* x, const void* w, void* y,
                              void* workspace) = 0;
  // dx = d(loss)/dx given dy (overwrites dx), or with accumulate dx += d(loss)/dx (one
  // rounding of the float sum: a residual block's two branches meeting at its input).
  virtual void conv2d_backward_data(const Conv2dShape& s, const void* dy, const void* w, void* dx,
                                    void* workspace, bool accumulate) = 0;
  // dw = d(loss)/dw given x and dy, summed over the batch (overwrites dw, float32).
  virtual void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy,
                                      float* dw, void* workspace) = 0;

  // Pooling, NCHW; see Pool2dShape for padding. Backward overwrites dx.
  virtual void maxpool2d_forward(const Pool2dShape& s, const void* x, void* y) = 0;
  // The gradient goes to the first maximum of each window (row-major scan), found again
  // from x and y rather than stored, so forward keeps no state (cuDNN's interface).
  virtual void maxpool2d_backward(const Pool2dShape& s, const void* x, const void* y,
                                  const void* dy, void* dx) = 0;
  virtual void avgpool2d_forward(const Pool2dShape& s, const void* x, void* y) = 0;
  virtual void avgpool2d_backward(const Pool2dShape& s, const void* dy, void* dx) = 0;

  // y may be x (in place).
  virtual void relu_forward(const void* x, void* y, size_t n) = 0;
  // dx = dy where y > 0, else 0; dx may be dy.
  virtual void relu_backward(const void* y, const void* dy, void* dx, size_t n) = 0;

  // Batch normalisation per channel over n samples of c channels of hw positions (NCHW;
  // hw = 1 for feature vectors), as cuDNN's spatial mode and PyTorch's BatchNorm:
  //   y = gamma * (x - mean) / sqrt(var + eps) + beta.
  // Training uses the batch's mean and biased variance, saves the mean and 1/sqrt(var+eps)
  // per channel for backward, and moves the running statistics towards the batch's:
  //   running = (1 - momentum) * running + momentum * batch, with the unbiased variance.
  virtual void batchnorm_forward_training(const void* x, const float* gamma, const float* beta,
                                          void* y, int n, int c, int hw, float eps, float momentum,
                                          float* running_mean, float* running_var, float* save_mean,
                                          float* save_invstd) = 0;
  // Evaluation: the running statistics instead of the batch's.
  virtual void batchnorm_forward_inference(const void* x, const float* gamma, const float* beta,
                                           void* y, int n, int c, int hw, float eps,
                                           const float* running_mean, const float* running_var) = 0;
  // Gradients of the training forward (overwrites dx, dgamma, dbeta); dx may be null (a
  // first layer needs only dgamma and dbeta).
  virtual void batchnorm_backward(const void* x, const void* dy, const float* gamma, void* dx,
                                  float* dgamma, float* dbeta, int n, int c, int hw, float eps,
                                  const float* save_mean, const float* save_invstd) = 0;
  // Batch normalisation, then the residual z added when z is not null, then relu, as in a
  // ResNet block: y = relu(batchnorm(x) + z), each step rounded to act_type() as the
  // separate operations round it (training: the batch's statistics, saved and moved into
  // the running ones as batchnorm_forward_training does; else the running statistics).
  // y may not be x or z. The default runs the separate operations.
  virtual void batchnorm_add_relu_forward(bool training, const void* x, const void* z,
                                          const float* gamma, const float* beta, void* y, int n,
                                          int c, int hw, float eps, float momentum,
                                          float* running_mean, float* running_var, float* save_mean,
                                          float* save_invstd);
  // Backward of a training forward, from its output y: g = dy where y > 0, else 0 (the
  // gradient at the addition, relu_backward's result) is written to dz, which may be dy;
  // then batchnorm_backward of g (dx may be null).
  virtual void batchnorm_add_relu_backward(const void* x, const void* y, const void* dy, void* dz,
                                           const float* gamma, void* dx, float* dgamma,
                                           float* dbeta, int n, int c, int hw, float eps,
                                           const float* save_mean, const float* save_invstd);

  // Inverted dropout: mask[i] = counter_uniform(seed, i) >= p ? 1 / (1 - p) : 0 (see
  // core/random.hpp, so every backend draws the same mask; stored as act_type()),
  // y = x * mask. 0 <= p < 1. Backward is multiply(dy, mask, dx).
  virtual void dropout_forward(const void* x, void* y, void* mask, size_t n, float p,
                               uint64_t seed) = 0;

  // The backend's own runner of a recurrent stack (cuDNN's), or null: the layer then steps
  // through the sequence with the operations below (the CPU always does).
  virtual std::unique_ptr<RnnPlan> plan_rnn(const RnnShape& /*shape*/) { return nullptr; }
  // Recurrent layers (nn/recurrent.cpp) run time-major: activations [a][b][inner] become
  // [b][a][inner] (batch-major sequences to time-major and back); dst may not be src.
  virtual void swap_leading(const void* src, void* dst, int a, int b, int inner) = 0;
  // One LSTM time step for `batch` rows of `hidden` units, PyTorch's gates (i, f, g, o):
  //   z = gx + gh + b_ih + b_hh   (gx, gh: activations [batch][4 hidden]; gh null: h = 0)
  //   i, f, o = sigmoid(z_i, z_f, z_o), g = tanh(z_g)
  //   c = f * c_prev + i * g      (c_prev null: 0),   h = o * tanh(c)
  // Writes the activated gates (float32 [batch][4 hidden]) and c (float32 [batch][hidden])
  // for backward, and h (activations [batch][hidden]).
  virtual void lstm_forward_step(const void* gx, const void* gh, const float* b_ih,
                                 const float* b_hh, const float* c_prev, float* gates, float* c,
                                 void* h, int batch, int hidden) = 0;
  // Backward of that step. dh: the gradient reaching h (activations; null: 0). dc (float32
  // [batch][hidden]) holds the gradient reaching c from the next step (zeros after the
  // last) and is overwritten with the gradient for c_prev. Writes dz = dL/dz (activations
  // [batch][4 hidden]).
  virtual void lstm_backward_step(const float* gates, const float* c, const float* c_prev,
                                  const void* dh, float* dc, void* dz, int batch, int hidden) = 0;
  // One GRU time step, PyTorch's gates (r, z, n):
  //   r = sigmoid(gx_r + b_ir + gh_r + b_hr),  z = sigmoid(gx_z + b_iz + gh_z + b_hz)
  //   n = tanh(gx_n + b_in + r * (gh_n + b_hn)),  h = (1 - z) * n + z * h_prev
  // (gx, gh: activations [batch][3 hidden]; gh and h_prev null at the first step: h0 = 0).
  // Writes the gates (float32 [batch][3 hidden]) and hn = gh_n + b_hn (float32
  // [batch][hidden]) for backward, and h (activations [batch][hidden]).
  virtual void gru_forward_step(const void* gx, const void* gh, const float* b_ih,
                                const float* b_hh, const void* h_prev, float* gates, float* hn,
                                void* h, int batch, int hidden) = 0;
  // Backward of that step, given dh (activations; the gradient reaching h): writes the
  // gradients of the input projection dgx and of the recurrent projection dgh
  // (activations [batch][3 hidden]) and dh_prev = dh * z, the part of the gradient for
  // h_prev that does not pass through W_hh (activations [batch][hidden]; null at the
  // first step).
  virtual void gru_backward_step(const float* gates, const float* hn, const void* h_prev,
                                 const void* dh, void* dgx, void* dgh, void* dh_prev, int batch,
                                 int hidden) = 0;

  // Embedding lookup (nn/embedding.cpp) over `rows` token ids: activations [rows] holding
  // exact integers in [0, vocab) (3.0 is id 3). The table is [vocab][dim]; its compute copy
  // (act_type()) is read forward, so a row is copied as stored:
  //   out[r][:] = table[id[r]][:]   (out: activations [rows][dim])
  // An id outside [0, vocab) must not reach memory: the CPU fails (Error), a GPU writes
  // zeros for it.
  virtual void embedding_forward(const void* ids, const void* table, void* out, int rows, int vocab,
                                 int dim) = 0;
  // dtable (float32 [vocab][dim]) = 0, then dtable[id[r]][:] += dy[r][:] for r = 0, 1, ...
  // in that order (dy: activations [rows][dim]), so that every backend sums each entry in
  // the same order and repeats bit for bit; no atomics. Ids outside [0, vocab) as forward
  // (a GPU skips them).
  virtual void embedding_backward(const void* ids, const void* dy, float* dtable, int rows,
                                  int vocab, int dim) = 0;

  // Numerically stable softmax cross-entropy over `rows` samples of `cols` logits.
  // Adds the batch's loss sum, correct count and sample count to *stats (device
  // memory). If dlogits is not null, writes grad_scale * loss_scale * (softmax - onehot),
  // where loss_scale is *loss_scale (device memory; see LossScaleState) or 1 if null.
  virtual void softmax_xent(const void* logits, const int32_t* labels, int rows, int cols,
                            float grad_scale, const float* loss_scale, void* dlogits,
                            LossStats* stats) = 0;

  // Whether the running loss sum in *stats (device memory, as softmax_xent adds to it) has
  // become NaN or infinite: a step's loss was not finite. Called once per training step, so
  // it must not wait for the device: a host backend reads the sum; a device backend copies
  // it to pinned memory after the work enqueued so far and answers from the newest copy that
  // has landed (up to a few steps late; the epoch's end reads the sum itself).
  virtual bool loss_nonfinite(const LossStats* stats) { return !std::isfinite(stats->loss_sum); }
  // *into += *step unless `skip` (device memory) is non-zero; then *step = {}. A step's
  // loss statistics joining the epoch's only when the step was not skipped
  // (train.on_nonfinite: skip_step), decided on the device.
  virtual void merge_loss_stats(LossStats* into, LossStats* step, const float* skip) = 0;

  // Collectives on device memory across the ranks' backends (NCCL on the CUDA backend),
  // in stream order with the other operations. A backend without them (the CPU: its
  // memory is host memory, which MPI reaches directly) throws from these.
  virtual bool has_device_collectives() const { return false; }
  // Identifies the device (a GPU's PCI bus id; empty for the CPU), so that ranks can tell
  // whether they share one.
  virtual std::string device_id() const { return ""; }
  // Rank 0 makes the group's identifier; the caller shares it (over MPI) and every rank
  // joins with it. Collective over the ranks.
  // kCollectiveIdBytes bytes.
  virtual std::vector<std::byte> new_collective_id();
  virtual void join_collectives(const std::vector<std::byte>& id, int rank, int size);
  // In place: x = sum over ranks of x.
  virtual void allreduce_sum(float* x, size_t n);
  // x = root's x on every rank.
  virtual void broadcast(float* x, size_t n, int root);
  // allreduce_sum beside the computation: it starts once the work issued so far is done,
  // and runs while later work proceeds; wait_collectives() makes work issued after it
  // wait for every collective started so far. The defaults run allreduce_sum in order.
  virtual void allreduce_sum_async(float* x, size_t n) { allreduce_sum(x, n); }
  virtual void wait_collectives() {}

  // Fused SGD over n parameters (PyTorch semantics):
  //   g = grad + wd * p;  v = mu * v + g;  p -= lr * (nesterov ? g + mu * v : v)
  // Does nothing if `skip` (device memory, may be null) is non-zero: a loss-scaled step
  // whose gradients overflowed.
  virtual void sgd_update(float* params, const float* grads, float* velocity, size_t n,
                          const SgdParams& sgd, const float* skip) = 0;
  // Fused Adam over n parameters (PyTorch semantics) at step t = *step (backend memory: the
  // steps taken, this one included; see count_step):
  //   Adam: g = grad + wd * p.   AdamW: g = grad, p *= 1 - lr * wd.
  //   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
  //   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  // Does nothing if `skip` (may be null) is non-zero, as sgd_update.
  virtual void adam_update(float* params, const float* grads, float* m, float* v, size_t n,
                           const AdamParams& adam, const float* step, const float* skip) = 0;
  // *counter += 1, unless `skip` (may be null) is non-zero. One float in backend memory: it
  // counts exactly up to 2^24 and then stays there.
  virtual void count_step(float* counter, const float* skip) = 0;

  // Dynamic loss scaling (float16), with its state in device memory so that the step
  // loop never waits for the device: see LossScaleState.
  // grads *= 1 / state[kScale]; state[kFoundInf] = 1 if any of them is not finite.
  virtual void unscale_grads(float* grads, size_t n, float* state) = 0;
  // After a step's unscale_grads calls: on overflow the scale is multiplied by `backoff`
  // and the step counted as skipped, else after `interval` steps in a row without one it
  // is multiplied by `growth`; then kFoundInf is cleared.
  virtual void update_loss_scale(float* state, float growth, float backoff, int interval) = 0;
  // Gradient clipping by global norm, without the host waiting for the device:
  // sum_squares adds the sum of x[i]^2 (accumulated in double, in a fixed order) to *acc
  // (one float in backend memory); clip_by_norm then multiplies x by
  // min(1, max_norm / (sqrt(*acc) + 1e-6)), as torch.nn.utils.clip_grad_norm_.
  virtual void sum_squares(const float* x, size_t n, float* acc) = 0;
  virtual void clip_by_norm(float* x, size_t n, const float* acc, float max_norm) = 0;
  // x *= alpha
  virtual void scale(float* x, size_t n, float alpha) = 0;
  // sum += x, element by element (float32: gradients summed over micro-batches).
  virtual void accumulate(float* sum, const float* x, size_t n) = 0;

 private:
  PhaseSeconds phase_stamp_{}, phase_sums_{};  // the host-clock phase_mark
  bool phase_started_ = false;
};

// Owns one device allocation of `n` elements of T. Move-only; not thread-safe.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, size_t n)
      : backend_(&backend), data_(static_cast<T*>(backend.alloc_bytes(n * sizeof(T)))), size_(n) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    DeviceArray tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DeviceArray() {
    if (data_ != nullptr) backend_->free_bytes(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void swap(DeviceArray& o) noexcept {
    std::swap(backend_, o.backend_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hpctrain

// CudnnRnn: cuDNN's RNN API for a recurrent stack (cudnn_rnn.hpp).
#include "backend/cuda/cudnn_rnn.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cudnn_util.hpp"
#include "core/error.hpp"
#include "kernels/kernels.hpp"

namespace hpctrain::cuda {
namespace {

// cuDNN runs bfloat16 RNNs from this version on (PyTorch uses them from it too).
constexpr size_t kBf16RnnVersion = 91300;

// A run of `count` values at `src` in the stack's parameters and at `dst` in cuDNN's weight
// space (both in values).
struct Segment {
  size_t src, dst, count;
};

class CudnnRnn final : public RnnPlan {
 public:
  CudnnRnn(cudnnHandle_t handle, cudaStream_t stream, const CudaBackendOptions& o,
           const RnnShape& s)
      : handle_(handle),
        stream_(stream),
        options_(o),
        shape_(s),
        type_(cudnn_type(o.act_type)),
        elem_(dtype_size(o.act_type)) {
    HT_CUDA(cudnnSetDropoutDescriptor(dropout_.get(), handle_, 0.0f, nullptr, 0, 0));
    // As PyTorch sets them: tensor ops for float16; default math (tensor cores allowed) for
    // bfloat16 and tf32; FMA only for fp32.
    cudnnMathType_t math = o.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    if (o.act_type == DType::kF16) math = CUDNN_TENSOR_OP_MATH;
    if (o.act_type == DType::kBF16) math = CUDNN_DEFAULT_MATH;
    HT_CUDA(cudnnSetRNNDescriptor_v8(
        rnn_.get(), CUDNN_RNN_ALGO_STANDARD, s.lstm ? CUDNN_LSTM : CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
        CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type_, CUDNN_DATA_FLOAT, math, s.input, s.units,
        s.units, s.layers, dropout_.get(), CUDNN_RNN_PADDED_IO_ENABLED));
    HT_CUDA(cudnnGetRNNWeightSpaceSize(handle_, rnn_.get(), &weight_bytes_));
    weights_ = std::make_unique<Scratch>(weight_bytes_, nullptr);
    dweights_ = std::make_unique<Scratch>(weight_bytes_, nullptr);
    // On the plan's stream (a non-blocking one, unordered with the legacy default stream),
    // finished before the probe reads them.
    HT_CUDA(cudaMemsetAsync(weights_->p, 0, weight_bytes_, stream_));  // padding, if any
    map_weights();
    lengths_.assign(static_cast<size_t>(s.max_batch), s.steps);
    dev_lengths_ = std::make_unique<Scratch>(lengths_.size() * sizeof(int32_t), nullptr);
    HT_CUDA(cudaMemcpyAsync(dev_lengths_->p, lengths_.data(), lengths_.size() * sizeof(int32_t),
                            cudaMemcpyHostToDevice, stream_));
    HT_CUDA(cudaStreamSynchronize(stream_));
    // Room for every batch size up to the largest, allocated once: a step recorded in a
    // CUDA graph keeps these addresses, and nothing may be allocated while recording.
    size_t work = 0, reserve = 0;
    for (int b = 1; b <= s.max_batch; ++b) {
      const Spaces need = spaces(b);
      work = std::max(work, need.work);
      reserve = std::max(reserve, need.reserve);
    }
    work_ = std::make_unique<Scratch>(work, nullptr);
    reserve_ = std::make_unique<Scratch>(reserve, nullptr);
    work_bytes_ = work;
    reserve_bytes_ = reserve;
    set_batch(s.max_batch);
  }

  void forward(const void* weights, const void* x, void* y, int batch, bool training) override {
    const auto* from = static_cast<const std::byte*>(weights);
    auto* to = static_cast<std::byte*>(weights_->p);
    for (const Segment& g : segments_) {
      HT_CUDA(cudaMemcpyAsync(to + g.dst * elem_, from + g.src * elem_, g.count * elem_,
                              cudaMemcpyDeviceToDevice, stream_));
    }
    run_forward(x, y, batch, training);
  }

  // One training pass and one inference pass of the largest batch on scratch data, waited
  // for: what cuDNN cannot run on this device fails here, at set-up, not in a step or in
  // the first evaluation.
  void probe() {
    const size_t tb = static_cast<size_t>(shape_.steps) * static_cast<size_t>(shape_.max_batch);
    const size_t in = tb * static_cast<size_t>(shape_.input) * elem_;
    const size_t out = tb * static_cast<size_t>(shape_.units) * elem_;
    Scratch x(in, stream_), dx(in, stream_), y(out, stream_), dy(out, stream_);
    Scratch grads(weight_bytes_ / elem_ * sizeof(float), stream_);
    run_forward(x.p, y.p, shape_.max_batch, true);
    backward(x.p, y.p, dy.p, dx.p, static_cast<float*>(grads.p), shape_.max_batch);
    run_forward(x.p, y.p, shape_.max_batch, false);
    HT_CUDA(cudaStreamSynchronize(stream_));
  }

  // The weight space still holds what the forward copied in: the layer's weights change only
  // between steps.
  void backward(const void* x, const void* y, const void* dy, void* dx, float* grads,
                int batch) override {
    set_batch(batch);
    HT_CUDA(cudnnRNNBackwardData_v8(handle_, rnn_.get(), lengths(), y_.get(), y, dy, x_.get(), dx,
                                    h_.get(), nullptr, nullptr, nullptr, c_.get(), nullptr, nullptr,
                                    nullptr, weight_bytes_, weights_->p, work_bytes_, work(),
                                    reserve_bytes_, reserve()));
    // Weight gradients are only ever added to (CUDNN_WGRAD_MODE_ADD): from zero.
    HT_CUDA(cudaMemsetAsync(dweights_->p, 0, weight_bytes_, stream_));
    HT_CUDA(cudnnRNNBackwardWeights_v8(
        handle_, rnn_.get(), CUDNN_WGRAD_MODE_ADD, lengths(), x_.get(), x, h_.get(), nullptr,
        y_.get(), y, weight_bytes_, dweights_->p, work_bytes_, work(), reserve_bytes_, reserve()));
    const auto* from = static_cast<const std::byte*>(dweights_->p);
    for (const Segment& g : segments_) {
      if (options_.act_type == DType::kF32) {
        HT_CUDA(cudaMemcpyAsync(grads + g.src, from + g.dst * elem_, g.count * sizeof(float),
                                cudaMemcpyDeviceToDevice, stream_));
      } else {
        kernels::convert_to_float(options_.act_type, from + g.dst * elem_, grads + g.src, g.count,
                                  stream_);
      }
    }
    done("rnn_backward");
  }

 private:
  void run_forward(const void* x, void* y, int batch, bool training) {
    set_batch(batch);
    HT_CUDA(cudnnRNNForward(handle_, rnn_.get(),
                            training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                            lengths(), x_.get(), x, y_.get(), y, h_.get(), nullptr, nullptr,
                            c_.get(), nullptr, nullptr, weight_bytes_, weights_->p, work_bytes_,
                            work(), training ? reserve_bytes_ : 0, training ? reserve() : nullptr));
    done("rnn_forward");
  }

  // Where cuDNN keeps each gate's matrix and bias of each layer, as segments_ (sorted by
  // source, adjacent runs merged: one segment when the layouts agree).
  void map_weights() {
    const size_t g = shape_.lstm ? 4 : 3, u = static_cast<size_t>(shape_.units);
    TensorDesc m, b;
    size_t offset = 0;  // of the layer's parameters in the stack's
    for (int l = 0; l < shape_.layers; ++l) {
      const size_t in = l == 0 ? static_cast<size_t>(shape_.input) : u;
      for (size_t id = 0; id < 2 * g; ++id) {  // cuDNN's input gates, then its recurrent ones
        const bool rec = id >= g;
        const size_t k = id % g;  // the gate: cuDNN orders them as PyTorch does
        void *m_at = nullptr, *b_at = nullptr;
        HT_CUDA(cudnnGetRNNWeightParams(handle_, rnn_.get(), l, weight_bytes_, weights_->p,
                                        static_cast<int32_t>(id), m.get(), &m_at, b.get(), &b_at));
        add_segment(m, m_at, offset + (rec ? g * u * in + k * u * u : k * u * in),
                    rec ? u * u : u * in);
        add_segment(b, b_at, offset + g * u * (in + u) + (rec ? g * u : 0) + k * u, u);
      }
      offset += g * u * (in + u) + 2 * g * u;
    }
    std::sort(segments_.begin(), segments_.end(),
              [](const Segment& a, const Segment& c) { return a.src < c.src; });
    std::vector<Segment> merged;
    size_t total = 0;
    for (const Segment& s : segments_) {
      total += s.count;
      if (!merged.empty() && merged.back().src + merged.back().count == s.src &&
          merged.back().dst + merged.back().count == s.dst) {
        merged.back().count += s.count;
      } else {
        merged.push_back(s);
      }
    }
    HT_REQUIRE(total == offset && total * elem_ <= weight_bytes_,
               "cuDNN's RNN weight space does not hold the layer's parameters");
    segments_ = std::move(merged);
  }

  // One matrix or bias that cuDNN placed at `at`, described by `d`: count values at src.
  void add_segment(const TensorDesc& d, const void* at, size_t src, size_t count) {
    cudnnDataType_t type{};
    int dims = 0, size[3] = {}, stride[3] = {};
    HT_CUDA(cudnnGetTensorNdDescriptor(d.get(), 3, &type, &dims, size, stride));
    size_t elems = 1;
    for (int i = 0; i < dims; ++i) elems *= static_cast<size_t>(size[i]);
    const auto bytes = static_cast<const std::byte*>(at) - static_cast<std::byte*>(weights_->p);
    HT_REQUIRE(at != nullptr && type == type_ && elems == count && bytes >= 0 &&
                   static_cast<size_t>(bytes) % elem_ == 0,
               "cuDNN's RNN weight space holds a matrix or bias of another shape or type");
    segments_.push_back({src, static_cast<size_t>(bytes) / elem_, count});
  }

  // The descriptors of `batch` sequences (host calls only).
  void describe(int batch) {
    HT_CUDA(cudnnSetRNNDataDescriptor(x_.get(), type_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                      shape_.steps, batch, shape_.input, lengths_.data(), nullptr));
    HT_CUDA(cudnnSetRNNDataDescriptor(y_.get(), type_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                      shape_.steps, batch, shape_.units, lengths_.data(), nullptr));
    const int size[3] = {shape_.layers, batch, shape_.units};
    const int stride[3] = {batch * shape_.units, shape_.units, 1};
    HT_CUDA(cudnnSetTensorNdDescriptor(h_.get(), type_, 3, size, stride));
    HT_CUDA(cudnnSetTensorNdDescriptor(c_.get(), type_, 3, size, stride));
    batch_ = batch;
  }
  // What cuDNN asks for `batch` sequences: workspace (training or inference, the larger)
  // and reserve (training).
  struct Spaces {
    size_t work, reserve;
  };
  Spaces spaces(int batch) {
    describe(batch);
    size_t train_work = 0, reserve = 0, infer_work = 0, unused = 0;
    HT_CUDA(cudnnGetRNNTempSpaceSizes(handle_, rnn_.get(), CUDNN_FWD_MODE_TRAINING, x_.get(),
                                      &train_work, &reserve));
    HT_CUDA(cudnnGetRNNTempSpaceSizes(handle_, rnn_.get(), CUDNN_FWD_MODE_INFERENCE, x_.get(),
                                      &infer_work, &unused));
    return {std::max(train_work, infer_work), reserve};
  }
  void set_batch(int batch) {
    if (batch == batch_) return;
    HT_REQUIRE(batch > 0 && batch <= shape_.max_batch, "an RNN batch beyond the planned size");
    describe(batch);
  }

  const int32_t* lengths() const { return static_cast<const int32_t*>(dev_lengths_->p); }
  void* work() const { return work_->p; }
  void* reserve() const { return reserve_->p; }
  void done(const char* op) const { check_done(options_.sync_each_call, stream_, op); }

  cudnnHandle_t handle_;
  cudaStream_t stream_;
  CudaBackendOptions options_;
  RnnShape shape_;
  cudnnDataType_t type_;
  size_t elem_;  // bytes per value of the activation type
  DropoutDesc dropout_;
  RnnDesc rnn_;
  RnnDataDesc x_, y_;
  TensorDesc h_, c_;  // c_: the LSTM cell state; GRUs pass it too, and cuDNN ignores it
  size_t weight_bytes_ = 0, work_bytes_ = 0, reserve_bytes_ = 0;
  std::unique_ptr<Scratch> weights_, dweights_, work_, reserve_, dev_lengths_;
  std::vector<int> lengths_;  // steps of each sequence (all of them), host copy
  std::vector<Segment> segments_;
  int batch_ = 0;  // of the descriptors
};

}  // namespace

std::unique_ptr<RnnPlan> make_cudnn_rnn(cudnnHandle_t handle, cudaStream_t stream,
                                        const CudaBackendOptions& options, const RnnShape& shape,
                                        std::string& why) {
  const size_t version = cudnnGetVersion();
  if (options.act_type == DType::kBF16 && version < kBf16RnnVersion) {
    why = "cuDNN " + std::to_string(version) + " has no bfloat16 RNNs (" +
          std::to_string(kBf16RnnVersion) + " and later have)";
    return nullptr;
  }
  try {
    auto plan = std::make_unique<CudnnRnn>(handle, stream, options, shape);
    plan->probe();
    return plan;
  } catch (const std::exception& e) {  // Error, and the kernels' launch failures
    // A refusal leaves the device usable; a fault while running (an illegal address) does
    // not, and no fallback could run after it.
    if (cudaDeviceSynchronize() != cudaSuccess) throw;
    why = e.what();
    return nullptr;
  }
}

}  // namespace hpctrain::cuda

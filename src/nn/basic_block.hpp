// ResNet's basic block (He et al. 2016), one layer to the model:
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1 is 3x3 with the block's stride, conv2 3x3 stride 1, both without bias (BatchNorm
// follows). The shortcut is the identity when the shape is kept, else a 1x1 convolution
// with the stride and a BatchNorm (PyTorch's "option B"), so parameter counts match
// torchvision's ResNets. The block runs its sub-layers on its own activation buffers
// (kept from forward to backward); the gradients it passes between them live in the
// model's shared workspace, since only one layer's backward runs at a time. relu(bn1(.))
// and relu(bn2(.) + shortcut) are one backend call each (Backend::batchnorm_add_relu_*),
// and the two branches' input gradients meet in dx without an addition pass (the
// convolutions accumulate into it).
#pragma once

#include <memory>

#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/layer.hpp"

namespace hpctrain {

class BasicBlock final : public Layer {
 public:
  // Throws UsageError unless filters >= 1 and stride >= 1.
  BasicBlock(std::string name, int filters, int stride);
  ~BasicBlock() override;
  const char* type() const override { return "basic_block"; }
  bool any_layout() const override { return true; }

  // Throws UsageError unless the input is [c, h, w].
  Dims output_dims(const Dims& input) override;
  size_t param_count() const override;
  int64_t forward_macs() const override;
  std::string attributes() const override;
  size_t workspace_bytes(Backend& backend, int64_t max_batch) const override;
  void set_workspace(void* workspace) override;
  void allocate(Backend& backend, int64_t max_batch) override;
  void filters(size_t offset, std::vector<FilterSpec>& out) const override;
  void bind(const ParamSlice& p) override;
  void init_params(Rng& rng, float* host_params) override;
  size_t state_count() const override;
  void bind_state(float* state) override;
  void init_state(float* host_state) override;
  void forward(Backend& backend, const Tensor& x, Tensor& y, bool training) override;
  void backward(Backend& backend, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;

  // conv1, bn1, conv2, bn2[, shortcut conv, shortcut bn] (after output_dims()).
  std::vector<const Layer*> sublayers() const override { return {parts_.begin(), parts_.end()}; }
  void set_part_clock(StepClock* clock) override { part_clock_ = clock; }

 private:
  // Bytes of one gradient buffer, and of the block's own part of the workspace (three
  // of them), for activations of act_size bytes.
  size_t buffer_bytes(int64_t max_batch, size_t act_size) const;
  size_t scratch_bytes(int64_t max_batch, size_t act_size) const;
  // Sets the batch of every view (they are built once: a step allocates nothing).
  void set_batch(int64_t batch);
  // Runs f, told to the part clock as part `part` (an index into parts_) if one is set.
  template <typename F>
  void timed(size_t part, bool backward, F&& f);

  int filters_, stride_;
  Dims in_dims_, out_dims_;
  int64_t out_elems_ = 0;  // per sample
  int64_t max_batch_ = 0;
  size_t act_size_ = sizeof(float);  // bytes per activation (set by allocate())
  Conv2d conv1_, conv2_;
  BatchNorm bn1_, bn2_;
  std::unique_ptr<Conv2d> down_conv_;  // null: identity shortcut
  std::unique_ptr<BatchNorm> down_bn_;
  std::vector<Layer*> parts_;
  StepClock* part_clock_ = nullptr;
  // Forward activations: conv1 out, bn1+relu out, conv2 out, shortcut conv out, shortcut
  // bn out (the last two only with a projection shortcut).
  DeviceArray<std::byte> t1_, t2_, t4_, s1_, s2_;
  // Views of them, and of the gradient buffers in the workspace (ga, gb, gc, of the
  // output's shape).
  Tensor t1v_, t2v_, t4v_, s1v_, s2v_, ga_, gb_, gc_;
};

}  // namespace hpctrain

#include "nn/layer_profile.hpp"

#include <algorithm>
#include <cmath>

#include "core/convert.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "core/timer.hpp"
#include "nn/embedding.hpp"

namespace hpctrain {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Synchronises around each layer (this clock) and each part of a composite layer (parts(),
// filed under the layer running), and keeps every sample.
class SyncClock final : public StepClock {
 public:
  SyncClock(Backend& backend, const Model& model)
      : parts_(*this), backend_(backend), samples_(2 * model.layers().size()) {
    for (const auto& l : model.layers()) part_samples_.emplace_back(2 * l->sublayers().size());
  }
  void start(size_t layer, bool /*backward*/) override {
    layer_ = layer;
    t0_ = mark();
  }
  void stop(size_t layer, bool backward) override {
    samples_[2 * layer + (backward ? 1 : 0)].push_back(mark() - t0_);
  }
  StepClock& parts() { return parts_; }
  double median_of(size_t layer, bool backward) const {
    return median(samples_[2 * layer + (backward ? 1 : 0)]);
  }
  std::vector<double> part_medians(size_t layer, bool backward) const {
    std::vector<double> m;
    const auto& parts = part_samples_[layer];
    for (size_t p = backward ? 1 : 0; p < parts.size(); p += 2) m.push_back(median(parts[p]));
    return m;
  }

 private:
  class Parts final : public StepClock {
   public:
    explicit Parts(SyncClock& c) : c_(c) {}
    void start(size_t /*part*/, bool /*backward*/) override { t0_ = c_.mark(); }
    void stop(size_t part, bool backward) override {
      c_.part_samples_[c_.layer_][2 * part + (backward ? 1 : 0)].push_back(c_.mark() - t0_);
    }

   private:
    SyncClock& c_;
    double t0_ = 0;
  };

  // The time once the backend has finished what was issued.
  double mark() {
    backend_.synchronize();
    return now_seconds();
  }

  Parts parts_;
  Backend& backend_;
  size_t layer_ = 0;
  double t0_ = 0;
  std::vector<std::vector<double>> samples_;
  std::vector<std::vector<std::vector<double>>> part_samples_;  // [layer][2 * part + backward]
};

}  // namespace

LayerTimes time_layers(Model& model, int64_t batch, int num_classes, int warmup, int reps) {
  HT_REQUIRE(batch >= 1 && batch <= model.max_batch() && reps >= 1 && warmup >= 0,
             "time_layers: bad batch or repetitions");
  Backend& b = model.backend();
  const size_t n = static_cast<size_t>(batch * dims_elems(model.input_dims()));
  std::vector<float> host(n);
  Rng rng(7);
  // A model that starts with an embedding reads token ids: whole numbers below its vocab.
  const auto* embedding = dynamic_cast<const Embedding*>(model.layers().front().get());
  for (float& v : host) {
    v = static_cast<float>(rng.uniform());
    if (embedding != nullptr) v = std::floor(v * static_cast<float>(embedding->vocab()));
  }
  const DType act = b.act_type();
  std::vector<std::byte> host_input(n * dtype_size(act));
  from_float(act, host.data(), host_input.data(), n);
  // A classifier applied at every step predicts several rows per sample.
  const int64_t rows = batch * (dims_elems(model.output_dims()) / num_classes);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % num_classes);
  DeviceArray<std::byte> input(b, host_input.size());
  DeviceArray<int32_t> device_labels(b, labels.size());
  DeviceArray<LossStats> stats(b, 1);
  b.copy_to_device(input.data(), host_input.data(), host_input.size());
  b.copy_to_device(device_labels.data(), labels.data(), labels.size() * sizeof(int32_t));
  auto step = [&](int64_t i) {
    const Tensor& logits = model.forward(input.data(), batch, /*training=*/true, i);
    b.softmax_xent(logits.data, device_labels.data(), static_cast<int>(rows), num_classes,
                   1.0f / static_cast<float>(rows), nullptr, model.dlogits(), stats.data());
    model.backward();
  };
  for (int i = 0; i < warmup; ++i) step(i);
  b.synchronize();

  LayerTimes t;
  t.batch = batch;
  std::vector<double> steps;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    step(i);
    b.synchronize();
    steps.push_back(now_seconds() - t0);
  }
  t.step_s = median(steps);

  SyncClock clock(b, model);
  model.set_layer_clock(&clock, &clock.parts());
  for (int i = 0; i < reps; ++i) step(i);
  model.set_layer_clock(nullptr);
  // One more step at full speed for a profiler that records only between profiler_start
  // and profiler_stop (ncu --profile-from-start off; bench/gpu/device.sh, stage kernels):
  // the kernels of exactly one step.
  b.synchronize();
  b.profiler_start();
  step(reps);
  b.synchronize();
  b.profiler_stop();
  for (size_t l = 0; l < model.layers().size(); ++l) {
    t.forward_s.push_back(clock.median_of(l, false));
    t.backward_s.push_back(clock.median_of(l, true));
    t.part_forward_s.push_back(clock.part_medians(l, false));
    t.part_backward_s.push_back(clock.part_medians(l, true));
  }
  return t;
}

}  // namespace hpctrain

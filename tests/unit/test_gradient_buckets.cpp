// Gradient buckets: their layout over the trainable ranges, the order they are started
// in, and the promise Model::backward makes to a listener (gradients at or after the
// offset it names are final).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "gradient_check.hpp"
#include "nn/model.hpp"
#include "nn/presets.hpp"
#include "train/gradient_buckets.hpp"

namespace hpctrain {
namespace {

TEST(GradientBuckets, CutFromTheEndWithinEachRange) {
  GradientBuckets b({{0, 10}, {20, 5}}, 4, nullptr, nullptr);
  const std::vector<std::pair<size_t, size_t>> want = {{21, 4}, {20, 1}, {6, 4}, {2, 4}, {0, 2}};
  ASSERT_EQ(b.buckets().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(b.buckets()[i].offset, want[i].first) << i;
    EXPECT_EQ(b.buckets()[i].count, want[i].second) << i;
  }
}

TEST(GradientBuckets, StartEachBucketOnceItsGradientsAreFinal) {
  std::vector<float> grads(25);
  std::vector<std::pair<size_t, size_t>> started;  // (offset, count)
  size_t waited_after = 0;
  GradientBuckets b(
      {{0, 10}, {20, 5}}, 4, [&](float* g, size_t n) { started.emplace_back(g - grads.data(), n); },
      [&] { waited_after = started.size(); });
  for (int step = 0; step < 2; ++step) {
    started.clear();
    b.start(grads.data());
    b.grads_final_from(22);  // bucket [21, 25) still has a gradient to come
    EXPECT_TRUE(started.empty());
    b.grads_final_from(20);
    EXPECT_EQ(started, (std::vector<std::pair<size_t, size_t>>{{21, 4}, {20, 1}}));
    b.grads_final_from(5);
    EXPECT_EQ(started.size(), 3u);
    b.finish();
    EXPECT_EQ(started.size(), 5u);
    EXPECT_EQ(waited_after, 5u);  // the wait comes after every bucket started
  }
}

// A listener that, at every call, keeps a copy of the gradients it was told are final.
class Snapshots final : public GradientListener {
 public:
  explicit Snapshots(const Model& m, const float* grads) : model_(m), grads_(grads) {}
  void grads_final_from(size_t offset) override {
    taken.emplace_back(offset, std::vector<float>(grads_ + offset, grads_ + model_.param_count()));
  }
  std::vector<std::pair<size_t, std::vector<float>>> taken;

 private:
  const Model& model_;
  const float* grads_;
};

TEST(GradientBuckets, BackwardNamesOnlyFinalGradients) {
  CpuBackend cpu(1);
  ModelConfig mc;
  mc.preset = "resnet18";
  mc.hidden.clear();
  mc.width = 4;
  const Dims in{3, 16, 16};
  const int64_t batch = 3;
  Model m(cpu, build_layers(mc, 5, in), in, batch);
  m.init_params(7);
  auto x = gradcheck::random_vector(static_cast<size_t>(batch * dims_elems(in)), 3);
  std::vector<int32_t> labels = {0, 3, 4};
  LossStats stats;
  cpu.softmax_xent(m.forward(x.data(), batch, true, 1).data, labels.data(), batch, 5, 1.0f / batch,
                   nullptr, m.dlogits(), &stats);
  Snapshots s(m, m.grads());
  m.backward(&s);
  ASSERT_FALSE(s.taken.empty());
  EXPECT_EQ(s.taken.back().first, 0u);  // the first layer has parameters
  size_t previous = m.param_count();
  for (const auto& [offset, snapshot] : s.taken) {
    EXPECT_LT(offset, previous) << "offsets must decrease";
    previous = offset;
    for (size_t i = 0; i < snapshot.size(); ++i) {
      ASSERT_EQ(snapshot[i], m.grads()[offset + i])
          << "gradient " << offset + i << " changed after it was called final";
    }
  }
}

}  // namespace
}  // namespace hpctrain

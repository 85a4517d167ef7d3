// The LSTM and GRU layers: gradients against central differences (one and two layers, the
// last step or every step, odd sizes, an image's rows as steps), and forward and backward
// against PyTorch's nn.LSTM and nn.GRU from the same weights (rnn_reference.py made the
// figures), and the layer's path for a backend that runs the whole stack itself.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "config_test_helpers.hpp"
#include "core/error.hpp"
#include "gradient_check.hpp"
#include "nn/presets.hpp"
#include "nn/recurrent.hpp"

namespace hpctrain {
namespace {

using gradcheck::check_layer_gradients;
using gradcheck::GradCheckOptions;

GradCheckOptions lstm_options() {
  GradCheckOptions o;
  o.eps = 1e-2f;
  o.tol = 2e-3;
  return o;
}

TEST(GradientCheck, LstmLastStep) {
  Recurrent layer("l", Recurrent::Cell::kLstm, 5, 1, false);
  check_layer_gradients(layer, {4, 3}, 3, lstm_options());
}

TEST(GradientCheck, LstmSequencesTwoLayers) {
  Recurrent layer("l", Recurrent::Cell::kLstm, 6, 2, true);
  check_layer_gradients(layer, {5, 7}, 2, lstm_options());
}

TEST(GradientCheck, LstmImageRowsAsSteps) {
  Recurrent layer("l", Recurrent::Cell::kLstm, 3, 2, false);
  check_layer_gradients(layer, {1, 4, 5}, 3, lstm_options());
}

TEST(GradientCheck, GruLastStep) {
  Recurrent layer("g", Recurrent::Cell::kGru, 5, 1, false);
  check_layer_gradients(layer, {4, 3}, 3, lstm_options());
}

TEST(GradientCheck, GruSequencesTwoLayers) {
  Recurrent layer("g", Recurrent::Cell::kGru, 6, 2, true);
  check_layer_gradients(layer, {5, 7}, 2, lstm_options());
}

TEST(GradientCheck, GruImageRowsAsSteps) {
  Recurrent layer("g", Recurrent::Cell::kGru, 3, 2, false);
  check_layer_gradients(layer, {1, 4, 5}, 3, lstm_options());
}

TEST(Lstm, ShapesParamsAndRefusals) {
  Recurrent seq("l", Recurrent::Cell::kLstm, 8, 2, true);
  EXPECT_EQ(seq.output_dims({1, 28, 28}), (Dims{28, 8}));
  // Layer 0: 4*8*(28+8) + 2*4*8; layer 1: 4*8*(8+8) + 2*4*8.
  EXPECT_EQ(seq.param_count(), size_t{4 * 8 * 36 + 64 + 4 * 8 * 16 + 64});
  Recurrent last("l", Recurrent::Cell::kLstm, 8, 1, false);
  EXPECT_EQ(last.output_dims({10, 3}), (Dims{8}));
  EXPECT_THROW(last.output_dims({12}), UsageError);
}

// Stacked LSTM and GRU entries in a model (every step into the last step, through a dense
// layer applied per step), then the classifier:
// the model's backward through the loss against central differences.
TEST(Lstm, WholeModelGradients) {
  CpuBackend be(1);
  const ModelConfig mc = config_test::layer_list({
      {.type = "lstm",
       .values = {{"units", int64_t{5}}, {"layers", int64_t{2}}, {"return_sequences", true}}},
      {.type = "gru",
       .values = {{"units", int64_t{4}}, {"layers", int64_t{1}}, {"return_sequences", true}}},
      {.type = "dense", .values = {{"units", int64_t{3}}, {"per_step", true}}},
      {.type = "lstm",
       .values = {{"units", int64_t{4}}, {"layers", int64_t{1}}, {"return_sequences", false}}},
  });
  const int batch = 3, classes = 4;
  Model m(be, build_layers(mc, classes, {1, 3, 2}), {1, 3, 2}, batch);
  m.init_params(9);
  std::vector<float> x = gradcheck::random_vector(batch * 6, 31);
  gradcheck::check_model_gradients(m, x, {1, 3, 0}, classes, /*stride=*/1, 2e-3);
}

// A per_step dense layer reads an image [C, H, W] as lstm does, C x H steps of W features,
// and gives a sequence [steps, units], never an activation with channels (which a
// channels-last backend would have stored in another order: the model was refused there).
TEST(Lstm, PerStepDenseOnAnImageGivesASequence) {
  CpuBackend be(1);
  const ModelConfig mc = config_test::layer_list({
      {.type = "dense", .values = {{"units", int64_t{3}}, {"per_step", true}}},
      {.type = "lstm", .values = {{"units", int64_t{4}}, {"return_sequences", false}}},
  });
  const int batch = 2, classes = 3;
  Model m(be, build_layers(mc, classes, {2, 3, 5}), {2, 3, 5}, batch);
  EXPECT_EQ(m.layer_output_dims(0), (Dims{6, 3}));
  m.init_params(4);
  std::vector<float> x = gradcheck::random_vector(batch * 30, 17);
  gradcheck::check_model_gradients(m, x, {0, 2}, classes, /*stride=*/1, 2e-3);
}

#include "rnn_reference.inc"

// The weights, input and loss weights rnn_reference.py gives PyTorch; forward and backward
// on the CPU backend against its float64 figures, after a forward of a smaller batch.
void expect_matches_pytorch(Recurrent::Cell cell, int64_t batch, int64_t steps, int64_t features,
                            int64_t units, int64_t layers, bool sequences,
                            const std::vector<double>& want_y, const std::vector<double>& want_dx,
                            const std::vector<double>& want_dparams) {
  CpuBackend be(1);
  Recurrent layer("l", cell, units, layers, sequences);
  const Dims in{steps, features};
  const Dims out = layer.output_dims(in);
  std::vector<float> params(layer.param_count()), grads(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    params[i] = static_cast<float>(0.3 * std::sin(0.7 * i + 0.2));
  layer.bind(ParamSlice::f32(params.data(), grads.data()));
  layer.allocate(be, batch);
  std::vector<float> x(static_cast<size_t>(batch * steps * features));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.45 * i));
  std::vector<float> y(static_cast<size_t>(batch * dims_elems(out))), dy(y.size()), dx(x.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(std::sin(0.31 * i + 1.0));
  Tensor tx{x.data(), batch, in}, ty{y.data(), batch, out};
  if (batch > 1) {  // an evaluation's smaller last batch first: the step must not read it
    std::vector<float> xs(static_cast<size_t>((batch - 1) * steps * features), 2.5f);
    std::vector<float> ys(static_cast<size_t>((batch - 1) * dims_elems(out)));
    Tensor txs{xs.data(), batch - 1, in}, tys{ys.data(), batch - 1, out};
    layer.forward(be, txs, tys, false);
  }
  layer.forward(be, tx, ty, true);
  Tensor tdy{dy.data(), batch, out}, tdx{dx.data(), batch, in};
  layer.backward(be, tx, ty, tdy, &tdx);
  gradcheck::expect_close(y, want_y, 1e-5, "y");
  gradcheck::expect_close(dx, want_dx, 1e-5, "dx");
  gradcheck::expect_close(grads, want_dparams, 1e-5, "dparams");
}

template <size_t N>
std::vector<double> vec(const double (&a)[N]) {
  return {a, a + N};
}

TEST(Lstm, MatchesPytorchTwoLayersEveryStep) {
  expect_matches_pytorch(Recurrent::Cell::kLstm, 2, 3, 4, 5, 2, true, vec(kTwoLayersSequencesY),
                         vec(kTwoLayersSequencesDx), vec(kTwoLayersSequencesDparams));
}

TEST(Lstm, MatchesPytorchOneLayerLastStep) {
  expect_matches_pytorch(Recurrent::Cell::kLstm, 3, 4, 2, 3, 1, false, vec(kOneLayerLastStepY),
                         vec(kOneLayerLastStepDx), vec(kOneLayerLastStepDparams));
}

TEST(Gru, MatchesPytorchTwoLayersEveryStep) {
  expect_matches_pytorch(Recurrent::Cell::kGru, 2, 3, 4, 5, 2, true, vec(kGruTwoLayersSequencesY),
                         vec(kGruTwoLayersSequencesDx), vec(kGruTwoLayersSequencesDparams));
}

TEST(Gru, MatchesPytorchOneLayerLastStep) {
  expect_matches_pytorch(Recurrent::Cell::kGru, 3, 4, 2, 3, 1, false, vec(kGruOneLayerLastStepY),
                         vec(kGruOneLayerLastStepDx), vec(kGruOneLayerLastStepDparams));
}

// A whole-stack plan (Backend::plan_rnn; cuDNN's on a GPU) made of an inner layer's own
// steps on batch-major copies: the outer layer's plan path (time-major sequences, only the
// last step's gradient, batches smaller than planned, the pointers it hands over) must then
// give what its step path gives.
class StepsPlan final : public RnnPlan {
 public:
  StepsPlan(CpuBackend& be, Recurrent::Cell cell, const RnnShape& s, float* params, float* grads)
      : be_(be),
        s_(s),
        params_(params),
        grads_(grads),
        inner_("inner", cell, s.units, s.layers, true) {
    inner_.output_dims({s.steps, s.input});
    inner_.bind(ParamSlice::f32(params, grads));
    inner_.allocate(be, s.max_batch);
    const size_t n = static_cast<size_t>(s.steps * s.max_batch);
    xb_.resize(n * s.input);
    dxb_.resize(xb_.size());
    yb_.resize(n * s.units);
    dyb_.resize(yb_.size());
  }
  void forward(const void* weights, const void* x, void* y, int batch, bool training) override {
    EXPECT_EQ(weights, params_);
    be_.swap_leading(x, xb_.data(), s_.steps, batch, s_.input);
    Tensor tx = at(xb_, batch, s_.input), ty = at(yb_, batch, s_.units);
    inner_.forward(be_, tx, ty, training);
    be_.swap_leading(yb_.data(), y, batch, s_.steps, s_.units);
  }
  void backward(const void* x, const void* y, const void* dy, void* dx, float* grads,
                int batch) override {
    EXPECT_EQ(grads, grads_);
    be_.swap_leading(x, xb_.data(), s_.steps, batch, s_.input);  // as forward left them
    be_.swap_leading(y, yb_.data(), s_.steps, batch, s_.units);
    be_.swap_leading(dy, dyb_.data(), s_.steps, batch, s_.units);
    Tensor tdx = at(dxb_, batch, s_.input);
    inner_.backward(be_, at(xb_, batch, s_.input), at(yb_, batch, s_.units),
                    at(dyb_, batch, s_.units), &tdx);
    be_.swap_leading(dxb_.data(), dx, batch, s_.steps, s_.input);
  }

 private:
  Tensor at(std::vector<float>& v, int batch, int features) const {
    return Tensor{v.data(), batch, {s_.steps, features}};
  }
  CpuBackend& be_;
  RnnShape s_;
  const float* params_;
  const float* grads_;
  Recurrent inner_;
  std::vector<float> xb_, dxb_, yb_, dyb_;
};

void expect_plan_matches_steps(Recurrent::Cell cell, bool sequences) {
  SCOPED_TRACE(sequences ? "every step" : "last step");
  const int64_t steps = 4, features = 3, units = 5, layers = 2, max_batch = 4;
  CpuBackend be(1);
  Recurrent plain("p", cell, units, layers, sequences),
      planned("q", cell, units, layers, sequences);
  const Dims in{steps, features};
  const Dims out = plain.output_dims(in);
  planned.output_dims(in);
  std::vector<float> params(plain.param_count()), grads(params.size()), plan_grads(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i] = static_cast<float>(0.3 * std::sin(0.7 * i + 0.2));
  }
  plain.bind(ParamSlice::f32(params.data(), grads.data()));
  plain.allocate(be, max_batch);
  int plans = 0;
  be.set_rnn_planner([&](const RnnShape& s) -> std::unique_ptr<RnnPlan> {
    if (plans++ > 0) return nullptr;  // the inner layer steps
    EXPECT_EQ(s.lstm, cell == Recurrent::Cell::kLstm);
    EXPECT_EQ(s.input, features);
    EXPECT_EQ(s.steps, steps);
    return std::make_unique<StepsPlan>(be, cell, s, params.data(), plan_grads.data());
  });
  planned.bind(ParamSlice::f32(params.data(), plan_grads.data()));
  planned.allocate(be, max_batch);
  ASSERT_EQ(plans, 2);
  for (int64_t batch : {4, 3, 2, 4}) {
    SCOPED_TRACE(batch);
    std::vector<float> x(static_cast<size_t>(batch * steps * features));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.45 * i + batch));
    std::vector<float> dy(static_cast<size_t>(batch * dims_elems(out)));
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(std::sin(0.31 * i + 1.0));
    std::vector<float> y(dy.size()), plan_y(dy.size()), dx(x.size()), plan_dx(x.size());
    Tensor tx{x.data(), batch, in};
    Tensor ty{y.data(), batch, out}, plan_ty{plan_y.data(), batch, out};
    Tensor tdx{dx.data(), batch, in}, plan_tdx{plan_dx.data(), batch, in};
    std::vector<float> dy2 = dy;  // backward may overwrite its dy
    Tensor tdy{dy.data(), batch, out}, plan_tdy{dy2.data(), batch, out};
    plain.forward(be, tx, ty, true);
    plain.backward(be, tx, ty, tdy, &tdx);
    planned.forward(be, tx, plan_ty, true);
    planned.backward(be, tx, plan_ty, plan_tdy, &plan_tdx);
    gradcheck::expect_close(plan_y, y, 1e-6, "y");
    gradcheck::expect_close(plan_dx, dx, 1e-6, "dx");
    gradcheck::expect_close(plan_grads, grads, 1e-6, "dparams");
  }
}

TEST(Lstm, BackendPlanMatchesSteps) {
  expect_plan_matches_steps(Recurrent::Cell::kLstm, true);
  expect_plan_matches_steps(Recurrent::Cell::kLstm, false);
}

TEST(Gru, BackendPlanMatchesSteps) {
  expect_plan_matches_steps(Recurrent::Cell::kGru, true);
  expect_plan_matches_steps(Recurrent::Cell::kGru, false);
}

}  // namespace
}  // namespace hpctrain

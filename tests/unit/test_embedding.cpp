// The embedding layer on the CPU backend: forward picks the ids' rows, backward sums the
// rows of repeated ids in row order (the same bits on any thread count), the table's
// gradient through an LSTM and the classifier against central differences, fitting the
// vocabulary to the data's, and the vocabularies 16-bit activations refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "common/compare.hpp"
#include "core/convert.hpp"
#include "core/error.hpp"
#include "gradient_check.hpp"
#include "nn/dense.hpp"
#include "nn/embedding.hpp"
#include "nn/model.hpp"
#include "nn/recurrent.hpp"

namespace hpctrain {
namespace {

using gradcheck::random_vector;
using test::expect_same;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Ids with repeats within a sample and across samples, and the first and last id.
std::vector<float> token_ids(size_t n, int vocab) {
  std::vector<float> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<float>((i * 3 + i / 4) % vocab);
  ids[n - 1] = static_cast<float>(vocab - 1);
  return ids;
}

// A table bound to an embedding layer for batches of up to `batch`, filled with its init.
struct Bound {
  Bound(Backend& be, Embedding& layer, const Dims& in, int64_t batch) {
    out = layer.output_dims(in);
    params.resize(layer.param_count());
    grads.assign(params.size(), kNaN);  // backward overwrites
    layer.bind(ParamSlice::f32(params.data(), grads.data()));
    layer.allocate(be, batch);
    Rng rng(5);
    layer.init_params(rng, params.data());
  }
  Dims out;
  std::vector<float> params, grads;
};

TEST(Embedding, ForwardPicksTheIdsRows) {
  CpuBackend be(1);
  const int vocab = 7, dim = 5, steps = 4, batch = 3;
  Embedding layer("e", vocab, dim);
  Bound b(be, layer, {1, 1, steps}, batch);
  EXPECT_EQ(b.out, (Dims{steps, dim}));
  EXPECT_EQ(layer.param_count(), size_t{vocab * dim});
  EXPECT_EQ(layer.forward_macs(), 0);
  EXPECT_EQ(layer.vocab(), vocab);
  EXPECT_EQ(std::string(layer.type()), "embedding");
  std::vector<float> ids = token_ids(size_t(batch) * steps, vocab);
  std::vector<float> y(size_t(batch) * steps * dim, kNaN);
  Tensor tx{ids.data(), batch, {1, 1, steps}}, ty{y.data(), batch, b.out};
  layer.forward(be, tx, ty, true);
  for (size_t r = 0; r < ids.size(); ++r) {
    for (size_t j = 0; j < size_t(dim); ++j) {
      ASSERT_EQ(y[r * dim + j], b.params[static_cast<size_t>(ids[r]) * dim + j]) << r << "," << j;
    }
  }
  // Any dims whose product is T are T steps.
  Embedding flat("f", vocab, dim);
  EXPECT_EQ(flat.output_dims({2, 6}), (Dims{12, dim}));
  EXPECT_EQ(flat.output_dims({9}), (Dims{9, dim}));
}

// dtable = 0, then dy's rows added in row order: the reference below does exactly that in
// float32, so the backend's sums match it bit for bit, on one thread and on several (the
// columns split over the threads; the vocabulary large enough that they do split).
TEST(Embedding, BackwardSumsRepeatedIdsInRowOrder) {
  for (const int vocab : {7, 3001}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int dim = vocab > 100 ? 64 : 5, steps = 10, batch = 4;
    const size_t rows = size_t(batch) * steps;
    std::vector<float> ids = token_ids(rows, vocab);
    ids[7] = ids[3] = ids[30] = 2;  // one id three times, in two samples
    const std::vector<float> dy0 = random_vector(rows * dim, 8);
    std::vector<float> want(size_t(vocab) * dim, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t j = 0; j < size_t(dim); ++j) {
        want[static_cast<size_t>(ids[r]) * dim + j] += dy0[r * dim + j];
      }
    }
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      CpuBackend be(threads);
      Embedding layer("e", vocab, dim);
      Bound b(be, layer, {1, 1, steps}, batch);
      std::vector<float> y(rows * dim), dy = dy0, dx(rows, kNaN);
      Tensor tx{ids.data(), batch, {1, 1, steps}}, ty{y.data(), batch, b.out};
      Tensor tdy{dy.data(), batch, b.out}, tdx{dx.data(), batch, {1, 1, steps}};
      layer.forward(be, tx, ty, true);
      layer.backward(be, tx, ty, tdy, &tdx);
      expect_same(b.grads, want, "dtable");
      expect_same(dx, std::vector<float>(rows, 0.0f), "dx");  // no gradient for the ids
      // A smaller batch overwrites the gradient: only its rows count.
      layer.backward(be, Tensor{ids.data(), 1, {1, 1, steps}}, ty, tdy, nullptr);
      std::vector<float> one(size_t(vocab) * dim, 0.0f);
      for (size_t r = 0; r < size_t(steps); ++r) {
        for (size_t j = 0; j < size_t(dim); ++j) {
          one[static_cast<size_t>(ids[r]) * dim + j] += dy0[r * dim + j];
        }
      }
      expect_same(b.grads, one, "dtable of one sample");
    }
  }
}

TEST(Embedding, RefusesIdsOutsideTheTable) {
  CpuBackend be(1);
  Embedding layer("e", 7, 3);
  Bound b(be, layer, {1, 1, 2}, 1);
  std::vector<float> y(6);
  for (const float bad : {7.0f, -1.0f, 2.5f, kNaN}) {
    std::vector<float> ids = {1.0f, bad};
    Tensor tx{ids.data(), 1, {1, 1, 2}}, ty{y.data(), 1, b.out};
    EXPECT_THROW(layer.forward(be, tx, ty, true), Error) << bad;
    EXPECT_THROW(layer.backward(be, tx, ty, ty, nullptr), Error) << bad;
  }
}

// Embedding, an LSTM (every step, or the last) and the classifier: the model's backward
// through the loss against central differences, the table's entries included (ids
// repeated, so some table rows sum several steps' gradients and some get none).
void check_embedding_lstm(bool sequences) {
  SCOPED_TRACE(sequences ? "every step" : "last step");
  CpuBackend be(1);
  const int vocab = 7, dim = 5, steps = 4, batch = 3, classes = 4;
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>("e", vocab, dim));
  layers.push_back(std::make_unique<Recurrent>("l", Recurrent::Cell::kLstm, 6, 1, sequences));
  if (sequences) layers.push_back(std::make_unique<Dense>("p", 3, Dense::Init::kHe, true));
  layers.push_back(std::make_unique<Dense>("c", classes, Dense::Init::kGlorot));
  const Dims in{1, 1, steps};
  Model m(be, std::move(layers), in, batch);
  m.init_params(9);
  EXPECT_EQ(m.param_offset(1), size_t{vocab * dim});
  std::vector<float> x = token_ids(size_t(batch) * steps, vocab);
  x[5] = x[1];
  gradcheck::check_model_gradients(m, x, {1, 3, 0}, classes, /*stride=*/1, 2e-3);
  // The table's gradient is not all zero (the check above would pass on a dead table).
  double sum = 0;
  for (size_t i = 0; i < size_t(vocab * dim); ++i) sum += std::fabs(m.grads()[i]);
  EXPECT_GT(sum, 1e-3);
}

TEST(GradientCheck, EmbeddingLstmEveryStep) { check_embedding_lstm(true); }
TEST(GradientCheck, EmbeddingLstmLastStep) { check_embedding_lstm(false); }

TEST(Embedding, FitsTheDataVocabulary) {
  Embedding open("e", 0, 8);
  EXPECT_EQ(open.vocab(), 0);
  EXPECT_THROW(open.output_dims({1, 1, 5}), UsageError);  // nothing to size the table
  open.fit_vocab(65, DType::kF32);
  EXPECT_EQ(open.vocab(), 65);
  EXPECT_EQ(open.output_dims({1, 1, 5}), (Dims{5, 8}));
  EXPECT_EQ(open.param_count(), size_t{65 * 8});

  Embedding wide("w", 100, 8);
  wide.fit_vocab(65, DType::kF32);  // room for more ids than the data has
  EXPECT_EQ(wide.vocab(), 100);

  Embedding narrow("small", 50, 8);
  try {
    narrow.fit_vocab(65, DType::kF32);
    ADD_FAILURE() << "fit_vocab accepted a vocab below the data's";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "embedding 'small' has vocab 50 but the data's vocab_size is 65");
  }
}

// Ids are values of the activation type: bfloat16 holds the integers up to 256 exactly,
// float16 up to 2048; a larger vocabulary is refused when the layer is fitted to the data
// (where the model is built, which names the config key), before anything is allocated.
TEST(Embedding, SixteenBitActivationsLimitTheVocabulary) {
  struct Case {
    DType t;
    int64_t most;
    const char* name;
  };
  for (const Case c : {Case{DType::kBF16, 256, "bfloat16"}, Case{DType::kF16, 2048, "float16"}}) {
    SCOPED_TRACE(c.name);
    CpuBackend be(1, CpuBackend::kDefaultConvChunkBytes, false, c.t);
    Embedding fits("fits", c.most, 4);
    EXPECT_NO_THROW(fits.fit_vocab(c.most, c.t));
    fits.output_dims({1, 1, 3});
    EXPECT_NO_THROW(fits.allocate(be, 2));
    Embedding open("open", 0, 4);  // the data's vocab_size, past the limit
    EXPECT_THROW(open.fit_vocab(c.most + 1, c.t), UsageError);
    Embedding big("big", c.most + 1, 4);
    try {
      big.fit_vocab(10, c.t);
      ADD_FAILURE() << "fit_vocab accepted vocab " << c.most + 1;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "embedding 'big' has vocab " + std::to_string(c.most + 1) + ", more than the " +
                    std::to_string(c.most) + " token ids " + c.name +
                    " activations hold exactly (use precision fp32 or a smaller vocab)");
    }
  }
  CpuBackend f32(1);
  Embedding large("large", 5000, 4);
  EXPECT_NO_THROW(large.fit_vocab(10, DType::kF32));
  large.output_dims({1, 1, 3});
  EXPECT_NO_THROW(large.allocate(f32, 2));
}

// 16-bit activations: ids and the table's compute copy in bfloat16 / float16; forward
// copies the copy's rows as stored, backward sums dy widened to float32 in row order.
TEST(Embedding, SixteenBitForwardAndBackward) {
  for (const DType t : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(to_string(t));
    CpuBackend be(2, CpuBackend::kDefaultConvChunkBytes, false, t);
    const int vocab = 9, dim = 6, rows = 11;
    const std::vector<float> idf = token_ids(rows, vocab), table = random_vector(vocab * dim, 3),
                             dyf = random_vector(size_t(rows) * dim, 4);
    const size_t s = dtype_size(t);
    std::vector<std::byte> ids(rows * s), copy(table.size() * s), y(dyf.size() * s),
        dy(dyf.size() * s);
    from_float(t, idf.data(), ids.data(), idf.size());
    from_float(t, table.data(), copy.data(), table.size());
    from_float(t, dyf.data(), dy.data(), dyf.size());
    be.embedding_forward(ids.data(), copy.data(), y.data(), rows, vocab, dim);
    std::vector<float> got(dyf.size()), rounded(table.size()), dyr(dyf.size());
    to_float(t, y.data(), got.data(), got.size());
    to_float(t, copy.data(), rounded.data(), rounded.size());
    to_float(t, dy.data(), dyr.data(), dyr.size());
    std::vector<float> want(dyf.size()), dwant(table.size(), 0.0f);
    for (size_t r = 0; r < size_t(rows); ++r) {
      const size_t id = static_cast<size_t>(idf[r]);
      for (size_t j = 0; j < size_t(dim); ++j) {
        want[r * dim + j] = rounded[id * dim + j];
        dwant[id * dim + j] += dyr[r * dim + j];
      }
    }
    expect_same(got, want, "forward");
    std::vector<float> dtable(table.size(), kNaN);
    be.embedding_backward(ids.data(), dy.data(), dtable.data(), rows, vocab, dim);
    expect_same(dtable, dwant, "backward");
  }
}

}  // namespace
}  // namespace hpctrain

// kernels/embedding.cu under the emulation against the CPU backend, bit for bit: forward
// copies rows as stored, and backward sums repeated ids' rows in row order on both (the
// block's id tiles: rows not a multiple of the block's width; columns beyond one block).
// Ids outside the table give zero rows forward and nothing backward.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "emu/emu_fixture.hpp"

namespace hpctrain::test {
namespace {

// Ids of a batch of sequences with repeats (within and across samples), 0 and vocab - 1.
std::vector<float> token_ids(size_t n, int vocab) {
  std::vector<float> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<float>((i * 7 + i / 5) % vocab);
  ids[0] = 0;
  ids[n - 1] = static_cast<float>(vocab - 1);
  return ids;
}

TEST_P(EmuVsCpu, EmbeddingForwardAndBackwardBitForBit) {
  struct Shape {
    int vocab, dim, rows;
  };
  // dim 37: one block of 64 threads, some idle; dim 300: two column tiles of 256. 150 rows:
  // id tiles of 64 and 256, the last one partial.
  for (const Shape s : {Shape{7, 37, 150}, Shape{11, 300, 150}, Shape{5, 4, 3}}) {
    SCOPED_TRACE("vocab " + std::to_string(s.vocab) + " dim " + std::to_string(s.dim));
    const size_t n = size_t(s.rows) * s.dim;
    const Acts ids = acts(token_ids(s.rows, s.vocab));
    const Acts table = acts(random_vector(size_t(s.vocab) * s.dim, 41));
    const Acts dy = acts(random_vector(n, 42));
    Acts y(t_, n);
    std::vector<float> dtable(size_t(s.vocab) * s.dim, kNaN);
    cpu_.embedding_forward(ids.data(), table.data(), y.data(), s.rows, s.vocab, s.dim);
    cpu_.embedding_backward(ids.data(), dy.data(), dtable.data(), s.rows, s.vocab, s.dim);
    const auto got = both_orders([&] {
      Acts yy = Acts::nan(t_, n);
      std::vector<float> dt(dtable.size(), kNaN);
      kernels::embedding_forward(t_, ids.data(), table.data(), yy.data(), s.rows, s.vocab, s.dim,
                                 kStream);
      kernels::embedding_backward(t_, ids.data(), dy.data(), dt.data(), s.rows, s.vocab, s.dim,
                                  kStream);
      return results(yy.floats(), dt);
    });
    expect_same(got[0], y.floats(), "forward");
    expect_same(got[1], dtable, "backward");
    // The repeated ids did sum several rows (a kernel adding only the last would fail).
    const std::vector<float> idf = ids.floats(), dyf = dy.floats();
    float first_id = 0.0f;
    for (size_t r = 0; r < size_t(s.rows); ++r) {
      if (idf[r] == 0.0f) first_id += dyf[r * s.dim];
    }
    EXPECT_EQ(got[1][0], first_id);
  }
}

// Ids the table lacks (vocab, -1, a fraction; the CPU refuses them) must not reach
// memory: zero rows forward, and backward sums the valid rows only.
TEST_P(EmuVsCpu, EmbeddingIgnoresIdsOutsideTheTable) {
  const int vocab = 6, dim = 9, rows = 8;
  std::vector<float> idf = token_ids(rows, vocab);
  idf[2] = static_cast<float>(vocab);
  idf[4] = -1.0f;
  idf[5] = 2.5f;
  const Acts ids = acts(idf), table = acts(random_vector(size_t(vocab) * dim, 43));
  const Acts dy = acts(random_vector(size_t(rows) * dim, 44));
  const std::vector<float> tf = table.floats(), dyf = dy.floats();
  std::vector<float> want_y(size_t(rows) * dim, 0.0f), want_dt(size_t(vocab) * dim, 0.0f);
  for (size_t r = 0; r < size_t(rows); ++r) {
    if (r == 2 || r == 4 || r == 5) continue;
    const size_t id = static_cast<size_t>(idf[r]);
    for (size_t j = 0; j < size_t(dim); ++j) {
      want_y[r * dim + j] = tf[id * dim + j];
      want_dt[id * dim + j] += dyf[r * dim + j];
    }
  }
  const auto got = both_orders([&] {
    Acts yy = Acts::nan(t_, want_y.size());
    std::vector<float> dt(want_dt.size(), kNaN);
    kernels::embedding_forward(t_, ids.data(), table.data(), yy.data(), rows, vocab, dim, kStream);
    kernels::embedding_backward(t_, ids.data(), dy.data(), dt.data(), rows, vocab, dim, kStream);
    return results(yy.floats(), dt);
  });
  expect_same(got[0], want_y, "forward");
  expect_same(got[1], want_dt, "backward");
  std::vector<float> y(want_y.size());
  EXPECT_THROW(cpu_.embedding_forward(ids.data(), table.data(), y.data(), rows, vocab, dim), Error);
}

}  // namespace
}  // namespace hpctrain::test

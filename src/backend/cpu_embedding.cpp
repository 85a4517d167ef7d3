// The CPU backend's embedding lookup and its gradient. Rows of the table are copied as
// stored (any activation type), so forward is exact; backward sums in float32 in the
// order Backend::embedding_backward fixes, split over the table's columns so that every
// entry is summed by one thread, row by row, whatever the thread count.
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu_backend.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace hpctrain {

const float* CpuBackend::token_ids(int slot, const void* ids, int rows, int vocab) {
  const float* f = widen(slot, ids, static_cast<size_t>(rows));
  // One pass over batch x steps values: cheap beside the rows it guards, and a wrong id
  // would otherwise read or write outside the table.
  for (int r = 0; r < rows; ++r) {
    const float v = f[r];
    HT_REQUIRE(v >= 0.0f && v < static_cast<float>(vocab) && v == std::floor(v),
               "embedding: token id " + std::to_string(v) + " (row " + std::to_string(r) +
                   ") is not an integer in [0, " + std::to_string(vocab) + ")");
  }
  return f;
}

void CpuBackend::embedding_forward(const void* ids, const void* table, void* out, int rows,
                                   int vocab, int dim) {
  const float* id = token_ids(0, ids, rows, vocab);
  const size_t row = static_cast<size_t>(dim) * dtype_size(act_type_);
  const auto* t = static_cast<const std::byte*>(table);
  auto* o = static_cast<std::byte*>(out);
  parallel(static_cast<size_t>(rows), grain_for(static_cast<size_t>(dim)),
           [&](size_t lo, size_t hi) {
             for (size_t r = lo; r < hi; ++r) {
               std::memcpy(o + r * row, t + static_cast<size_t>(id[r]) * row, row);
             }
           });
}

void CpuBackend::embedding_backward(const void* ids, const void* dy, float* dtable, int rows,
                                    int vocab, int dim) {
  const float* id = token_ids(0, ids, rows, vocab);
  const size_t d = static_cast<size_t>(dim), nr = static_cast<size_t>(rows);
  const float* g = widen(1, dy, nr * d);
  // Each part owns columns [lo, hi) of every table row: it clears them, then adds the rows
  // of dy in order, so a repeated id's rows are summed in row order as on a GPU.
  parallel(d, grain_for(nr + static_cast<size_t>(vocab)), [&](size_t lo, size_t hi) {
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
      std::memset(dtable + v * d + lo, 0, (hi - lo) * sizeof(float));
    }
    for (size_t r = 0; r < nr; ++r) {
      float* dst = dtable + static_cast<size_t>(id[r]) * d;
      const float* src = g + r * d;
      for (size_t j = lo; j < hi; ++j) dst[j] += src[j];
    }
  });
}

}  // namespace hpctrain

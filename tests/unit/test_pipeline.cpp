// Sharding, batch plans, sampling, the prefetch queue and the loader's order over epochs:
// ordering, coverage, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"
#include "data-tools/dataset_writer.hpp"
#include "data/batch_plan.hpp"
#include "data/dataset_file.hpp"
#include "data/loader.hpp"
#include "data/prefetch_queue.hpp"
#include "data/sampler.hpp"

namespace hpctrain {
namespace {

TEST(Shard, BalancedContiguousCover) {
  for (int64_t n : {1, 7, 10, 1000003}) {
    for (int size = 1; size <= 5; ++size) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const Shard s = shard_for_rank(n, r, size);
        EXPECT_EQ(s.begin, next);
        EXPECT_GE(s.count, n / size);
        EXPECT_LE(s.count, n / size + 1);
        next += s.count;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(Shard, StepsPerEpochFollowTheSmallestShard) {
  EXPECT_EQ(steps_per_epoch(127, 2, 64), 0);  // shards 64 and 63: no full batch on both
  EXPECT_EQ(steps_per_epoch(128, 2, 64), 1);
  EXPECT_EQ(steps_per_epoch(55000, 2, 64), 429);
}

TEST(Shard, ApportionAddsUpByLargestRemainder) {
  EXPECT_EQ(apportion(100, {85, 2, 13}), (std::vector<int64_t>{85, 2, 13}));
  EXPECT_EQ(apportion(10, {85, 2, 13}), (std::vector<int64_t>{9, 0, 1}));
  EXPECT_EQ(apportion(7, {1, 1, 1}), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(apportion(0, {3, 1}), (std::vector<int64_t>{0, 0}));
  for (int64_t n = 0; n < 200; ++n) {
    const std::vector<int64_t> c = apportion(n, {85, 2, 13});
    ASSERT_EQ(c[0] + c[1] + c[2], n);
    for (size_t p = 0; p < 3; ++p) {
      const double exact = static_cast<double>(n) * std::vector<double>{0.85, 0.02, 0.13}[p];
      ASSERT_LT(std::abs(static_cast<double>(c[p]) - exact), 1.0) << n << " " << p;
    }
  }
  // Large row counts: no overflow of n * w.
  const int64_t big = int64_t{1} << 50;
  const std::vector<int64_t> c = apportion(big, {1 << 20, 3 << 20});
  EXPECT_EQ(c[0], big / 4);
  EXPECT_EQ(c[1], big / 4 * 3);
}

// Equal weights: the plan is the classic one (batch b everywhere, shard_for_rank's shards,
// steps_per_epoch()), so existing runs keep their data order.
TEST(BatchPlan, EqualWeightsGiveTheBalancedShards) {
  for (int64_t n : {127, 128, 1000, 55000}) {
    for (int size = 1; size <= 5; ++size) {
      const BatchPlan p = plan_batches(n, 4 * size, std::vector<int64_t>(size, 1), 1);
      EXPECT_EQ(p.steps_per_epoch, steps_per_epoch(n, size, 4)) << n << " " << size;
      EXPECT_EQ(p.global_batch(), 4 * size);
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(p.batch[r], 4);
        EXPECT_EQ(p.shards[r].begin, shard_for_rank(n, r, size).begin);
        EXPECT_EQ(p.shards[r].count, shard_for_rank(n, r, size).count);
      }
    }
  }
}

// Uneven weights: batches and shards in proportion, every rank the same steps, the whole
// set covered once; micro-batches multiply the samples of a step.
TEST(BatchPlan, WeightsShareBatchesAndRowsAlike) {
  const BatchPlan p = plan_batches(10000, 128, {3, 1}, 1);
  EXPECT_EQ(p.batch, (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(p.shards[0].count, 7500);
  EXPECT_EQ(p.shards[1].begin, 7500);
  EXPECT_EQ(p.shards[1].count, 2500);
  EXPECT_EQ(p.steps_per_epoch, 78);
  // A global batch of 128 over 3 ranks: 43, 43, 42.
  const BatchPlan q = plan_batches(1000, 128, {1, 1, 1}, 4);
  EXPECT_EQ(q.batch, (std::vector<int64_t>{43, 43, 42}));
  EXPECT_EQ(q.global_batch(), 512);
  EXPECT_EQ(q.steps_per_epoch, 1);  // 334 rows / (43 x 4)
  // A tiny weight still gets a sample: nobody idles.
  const BatchPlan t = plan_batches(1000, 10, {1000, 1}, 1);
  EXPECT_EQ(t.batch, (std::vector<int64_t>{9, 1}));
}

TEST(Sampler, ShuffleIsAPermutationSeededByEpochAndRank) {
  Sampler s(100, 8, 12, true, 7, 0);
  std::vector<int64_t> a, b, c, d;
  s.epoch_order(0, a);
  s.epoch_order(0, b);
  s.epoch_order(1, c);
  Sampler other_rank(100, 8, 12, true, 7, 1);
  other_rank.epoch_order(0, d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
}

// Through the Loader itself (its reader threads, in memory and streamed): each epoch takes
// every row of the rank's shard once, and in another order than the epoch before.
TEST(Loader, EachEpochIsANewPermutationOfTheShard) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "ht_pipeline_epochs.h5").string();
  const int64_t n = 64;
  std::vector<uint8_t> images(n);
  std::vector<int32_t> labels(n, 0);
  std::iota(images.begin(), images.end(), uint8_t{0});  // a row's pixel is its index
  DatasetWriterOptions w;
  w.type = SampleType::kU8;
  w.c = w.h = w.w = 1;
  w.num_classes = 2;
  w.chunk_samples = 8;
  {
    DatasetWriter writer(path, w);
    writer.append(n, images.data(), labels.data());
    writer.close();
  }
  const DatasetFile file(path);
  const Shard shard{10, 30};
  for (const size_t cache : {size_t{1} << 30, size_t{0}}) {
    LoaderOptions o;
    o.batch = 6;
    o.epochs = 3;
    o.shuffle = true;
    o.seed = 5;
    o.raw = true;  // the stored bytes: the rows' indices
    o.threads = 2;
    o.cache_bytes = cache;
    Loader loader(file, shard, o);
    ASSERT_EQ(loader.batches_per_epoch(), 5);
    std::vector<std::vector<int64_t>> epochs(3);
    for (std::vector<int64_t>& rows : epochs) {
      for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
        const BatchBuffer& x = loader.next();
        const auto* stored = reinterpret_cast<const uint8_t*>(x.images.data());
        rows.insert(rows.end(), stored, stored + x.size);
      }
      std::vector<int64_t> sorted = rows;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> want(30);
      std::iota(want.begin(), want.end(), 10);
      EXPECT_EQ(sorted, want) << "an epoch is not the shard's rows once each (cache " << cache
                              << ")";
    }
    EXPECT_NE(epochs[0], epochs[1]) << "epoch 2 repeats epoch 1's order (cache " << cache << ")";
    EXPECT_NE(epochs[1], epochs[2]) << "epoch 3 repeats epoch 2's order (cache " << cache << ")";
  }
}

TEST(Sampler, NoShuffleIsIdentityAndLastBatchPartial) {
  Sampler s(10, 4, 3, false, 1, 0);
  std::vector<int64_t> a;
  s.epoch_order(3, a);
  EXPECT_EQ(a, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.batch_size(0), 4);
  EXPECT_EQ(s.batch_size(2), 2);
}

TEST(PrefetchQueue, DeliversInSequenceOrderWithManyThreads) {
  // Readers take random time so batches complete out of order.
  PrefetchQueue q(4, 3, 2, 1, 5, 10, 60, [](int64_t seq, BatchBuffer& b) {
    std::this_thread::sleep_for(std::chrono::microseconds((seq * 7919) % 500));
    b.size = 1 + seq % 5;
    b.images[0] = static_cast<float>(seq);
    b.labels[0] = static_cast<int32_t>(seq);
  });
  for (int64_t seq = 10; seq < 60; ++seq) {
    const BatchBuffer& b = q.pop();
    ASSERT_EQ(b.seq, seq);
    EXPECT_EQ(b.labels[0], seq);
    EXPECT_EQ(b.size, 1 + seq % 5);
  }
  EXPECT_THROW(q.pop(), Error);  // past the end
}

TEST(PrefetchQueue, ReaderErrorReachesTheConsumer) {
  PrefetchQueue q(2, 2, 1, 1, 1, 0, 100, [](int64_t seq, BatchBuffer& b) {
    if (seq == 3) throw std::runtime_error("bad sample in batch 3");
    b.size = 1;
  });
  for (int i = 0; i < 3; ++i) q.pop();
  try {
    q.pop();
    FAIL() << "expected the reader's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad sample in batch 3");
  }
}

TEST(PrefetchQueue, DestructorStopsBlockedReaders) {
  std::atomic<int> filled{0};
  {
    PrefetchQueue q(3, 2, 1, 1, 1, 0, 1000000, [&](int64_t, BatchBuffer& b) {
      b.size = 1;
      ++filled;
    });
    q.pop();
  }  // must not hang with readers waiting for free slots
  EXPECT_LE(filled.load(), 4);
}

TEST(PrefetchQueue, HooksSeeEveryBufferOnceEachWay) {
  std::vector<std::pair<void*, size_t>> acquired;
  std::vector<void*> released;
  {
    PrefetchQueue q(2, 3, 6, 1, 5, 0, 10, [](int64_t, BatchBuffer& b) { b.size = 5; },
                    {[&](void* p, size_t bytes) { acquired.emplace_back(p, bytes); },
                     [&](void* p) { released.push_back(p); }});
    for (int i = 0; i < 10; ++i) {
      const BatchBuffer& b = q.pop();
      // The batch lives in memory the hooks were given.
      EXPECT_TRUE(std::any_of(acquired.begin(), acquired.end(),
                              [&](const auto& a) { return a.first == b.images.data(); }));
    }
    EXPECT_TRUE(released.empty());
  }
  // depth + 1 buffers, each with an image block (5 x 6 floats) and a label block (5 ints).
  ASSERT_EQ(acquired.size(), 8u);
  for (size_t i = 0; i < acquired.size(); ++i) {
    EXPECT_EQ(acquired[i].second, i % 2 == 0 ? 5 * 6 * sizeof(float) : 5 * sizeof(int32_t));
  }
  std::vector<void*> a;
  for (const auto& x : acquired) a.push_back(x.first);
  std::sort(a.begin(), a.end());
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, a);
}

TEST(PrefetchQueue, CountsWaitTime) {
  PrefetchQueue q(1, 1, 1, 1, 1, 0, 3, [](int64_t, BatchBuffer& b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.size = 1;
  });
  q.pop();
  q.pop();
  EXPECT_GT(q.wait_seconds(), 0.02);
}

}  // namespace
}  // namespace hpctrain

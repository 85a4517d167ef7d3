// Ring all-reduce against MPI_Allreduce, parameter averaging, set-up agreement, and an
// epoch's figures over the ranks, on whatever world size mpiexec started.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "comm/agreement.hpp"
#include "comm/communicator.hpp"
#include "comm/device_group.hpp"
#include "comm/param_average.hpp"
#include "comm/ring_allreduce.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "train/energy_carry.hpp"
#include "train/epoch_tally.hpp"

namespace hpctrain {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::vector<float> rank_data(size_t count, int rank) {
  Rng rng(mix_seed(99, static_cast<uint64_t>(rank)));
  std::vector<float> v(count);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

class RingVsMpi : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

TEST_P(RingVsMpi, SumsEqualWithinRounding) {
  const auto [count, chunk_bytes] = GetParam();
  std::vector<float> ring = rank_data(count, world_rank());
  std::vector<float> ref = ring;
  RingAllreduce algo(MPI_COMM_WORLD, chunk_bytes);
  algo.run(ring.data(), count);
  if (count > 0) {
    MPI_Allreduce(MPI_IN_PLACE, ref.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  // Each element is a sum of world_size float32 terms in some order: the two
  // results may differ by a few ulps of the partial sums' magnitude.
  const double tol = 4.0 * world_size() * 1.2e-7;
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::fabs(ring[i] - ref[i]) > tol * (1.0 + std::fabs(ref[i]) * world_size())) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "count " << count;
  // Exactly equal on every rank (all-gather copies one reduced value everywhere).
  std::vector<float> rank0 = ring;
  if (count > 0) {
    MPI_Bcast(rank0.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  EXPECT_EQ(rank0, ring);
}

INSTANTIATE_TEST_SUITE_P(Counts, RingVsMpi,
                         ::testing::Combine(::testing::Values(0, 1, 3, 1000003),
                                            ::testing::Values(64, 1 << 20)));

TEST(RingAllreduce, IntegerValuedSumIsExact) {
  const size_t count = 4097;
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(world_rank() + 1 + i % 3);
  RingAllreduce algo(MPI_COMM_WORLD, 256);
  algo.run(v.data(), count);
  const int p = world_size();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(v[i], static_cast<float>(p * (p + 1) / 2 + p * static_cast<int>(i % 3))) << i;
  }
}

TEST(RingAllreduce, RepeatedCallsReuseBuffers) {
  RingAllreduce algo(MPI_COMM_WORLD, 1024);
  for (size_t count : {10000, 7, 10000, 0, 33}) {
    std::vector<float> v(count, 1.0f);
    algo.run(v.data(), count);
    for (float x : v) ASSERT_EQ(x, static_cast<float>(world_size()));
  }
}

TEST(Communicator, BothAlgorithmsAgree) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  std::vector<float> a = rank_data(12345, world_rank()), b = a;
  comm.allreduce_sum(a.data(), a.size(), AllreduceAlgorithm::kRing);
  comm.allreduce_sum(b.data(), b.size(), AllreduceAlgorithm::kMpi);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * world_size());
  EXPECT_GE(comm.comm_seconds(), 0.0);
}

// Messages above the largest of one MPI call go in pieces (here 64 bytes, as a model of
// more than 2^29 floats would at 1 GiB): every element arrives, the last piece shorter.
TEST(Communicator, LargeMessagesGoInPieces) {
  Communicator comm(MPI_COMM_WORLD, 4096, /*max_message_bytes=*/64);
  const int p = world_size(), r = world_rank();
  std::vector<unsigned char> bytes(1001, 0);
  if (r == 0) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  }
  comm.broadcast(bytes.data(), bytes.size(), 0);
  for (size_t i = 0; i < bytes.size(); ++i) {
    ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7)) << i;
  }
  std::vector<float> sum(333), reduced(333);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = reduced[i] = static_cast<float>(r + i);
  comm.allreduce_sum(sum.data(), sum.size(), AllreduceAlgorithm::kMpi);
  comm.reduce_sum(reduced.data(), reduced.size(), 0);
  for (size_t i = 0; i < sum.size(); ++i) {
    const float want = static_cast<float>(p * (p - 1) / 2 + p * static_cast<int>(i));
    ASSERT_EQ(sum[i], want) << i;
    if (r == 0) {
      ASSERT_EQ(reduced[i], want) << i;
    }
  }
}

TEST(Communicator, AllgatherOfStringsOfAnyLength) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  // Rank r sends r copies of 'a' + r (rank 0 an empty string), and a NUL inside one.
  const std::string mine =
      std::string(static_cast<size_t>(world_rank()), static_cast<char>('a' + world_rank())) +
      (world_rank() == 1 ? std::string("\0x", 2) : std::string());
  const std::vector<std::string> all = comm.allgather(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) {
    const std::string want = std::string(static_cast<size_t>(r), static_cast<char>('a' + r)) +
                             (r == 1 ? std::string("\0x", 2) : std::string());
    EXPECT_EQ(all[static_cast<size_t>(r)], want) << "rank " << r;
  }
}

TEST(DeviceGroup, RanksOnMyDeviceCountsThoseNamingItOnThisHost) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  // One host: ranks naming the same device share it, each counting itself.
  EXPECT_EQ(ranks_on_my_device(comm, "0000:01:00.0"), world_size());
  // Even ranks on one device, odd ranks on another (the GPU memory check's divisor).
  const int evens = (world_size() + 1) / 2;
  const bool even = world_rank() % 2 == 0;
  EXPECT_EQ(ranks_on_my_device(comm, even ? "0000:01:00.0" : "0000:02:00.0"),
            even ? evens : world_size() - evens);
  EXPECT_EQ(ranks_share_a_device(comm, "0000:0" + std::to_string(world_rank()) + ":00.0"), false);
}

TEST(ParamAverage, EveryRankGetsTheMean) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  std::vector<float> p(101);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(world_rank() * 2 + i);
  average_parameters(comm, p.data(), p.size());
  const double mean_rank = (world_size() - 1) / 2.0;
  for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(p[i], mean_rank * 2 + i, 1e-4);
}

TEST(EpochTally, SlowestSecondsMeanCpuAndSumsInRankOrder) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  const int r = world_rank(), n = world_size();
  const EpochTally mine{1.0 + r, 10.0 - r,      r == n - 1 ? 5.0 : 0.0,
                        2.0 * r, 0.1 * (r + 1), static_cast<double>(r),
                        10.0};
  std::vector<double> scratch(kTallyFigures * static_cast<size_t>(n));
  const EpochTally all = reduce_tally(comm, mine, scratch);
  double loss = 0;
  for (int k = 0; k < n; ++k) loss += 0.1 * (k + 1);  // the same order: the same bits
  EXPECT_EQ(all.train_s, n);
  EXPECT_EQ(all.wait_s, 10.0);
  EXPECT_EQ(all.comm_s, 5.0);
  EXPECT_EQ(all.cpu_s, n - 1.0);
  EXPECT_EQ(all.loss_sum, loss);
  EXPECT_EQ(all.correct, n * (n - 1) / 2.0);
  EXPECT_EQ(all.count, 10.0 * n);
}

// One sampler per node, here on the even ranks: the joules summed in rank order, a source
// read only where every sampler read it (the last sampler cannot read the GPU's, where
// there are two), the longest node's seconds; the other ranks add nothing.
TEST(EnergyCarry, SamplersSumAndSourcesReadByEveryOne) {
  Communicator comm(MPI_COMM_WORLD, 4096);
  const int r = world_rank(), n = world_size();
  const int last_sampler = (n - 1) / 2 * 2;
  EnergyCounts mine;
  for (int i = 0; i < kEnergySources; ++i) {
    mine.joules[i] = 0.1 * (r + 1) + i;
    mine.read[i] = i != 2 || r != last_sampler || last_sampler == 0;
  }
  mine.seconds = 3.0 + r;
  std::vector<double> scratch(kEnergyFigures * static_cast<size_t>(n));
  const EnergyCounts all = reduce_energy(comm, r % 2 == 0 ? &mine : nullptr, scratch);
  double cpu = 0;
  for (int k = 0; k < n; k += 2) cpu += 0.1 * (k + 1);  // the same order: the same bits
  EXPECT_EQ(all.joules[0], cpu);
  EXPECT_TRUE(all.read[0] && all.read[1] && all.read[3]);
  EXPECT_EQ(all.read[2], last_sampler == 0);
  EXPECT_EQ(all.joules[2], last_sampler == 0 ? 2.1 : 0.0) << "no part of a source not read";
  EXPECT_EQ(all.seconds, 3.0 + last_sampler);
}

TEST(Agreement, OneFailingRankFailsAllWithItsCode) {
  const int last = world_size() - 1;
  const int code = run_and_agree(MPI_COMM_WORLD, [&] {
    if (world_rank() == last) throw UsageError("bad input on the last rank");
  });
  EXPECT_EQ(code, kExitUsage);
  EXPECT_EQ(run_and_agree(MPI_COMM_WORLD, [] {}), 0);
}

}  // namespace
}  // namespace hpctrain

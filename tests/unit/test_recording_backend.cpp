// The recording backend (HPCTRAIN_RECORD_CPU): what it records does not run until replayed,
// replays run in order with eager work between them, and what a CUDA graph cannot hold
// fails the recording, which leaves the backend usable (the GPU test
// CudaVsCpu.StepGraphReplaysWhatItRecorded checks the same of CUDA graphs).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/recording_backend.hpp"
#include "core/error.hpp"

namespace hpctrain {
namespace {

TEST(RecordingBackend, ReplaysWhatItRecorded) {
  const auto b = make_recording_backend(std::make_unique<CpuBackend>(1));
  ASSERT_TRUE(b->can_capture());
  const std::vector<float> x0 = {1, -2, 3.5f, 0.25f, 8};
  std::vector<float> x = x0, sum(x0.size(), 0.0f);
  b->begin_capture();
  b->scale(x.data(), x.size(), 2.0f);
  b->accumulate(sum.data(), x.data(), x.size());
  const int id = b->end_capture();
  EXPECT_EQ(x, x0);  // nothing ran yet
  b->replay(id);
  b->scale(x.data(), x.size(), -1.0f);  // eager, between the replays
  b->replay(id);
  for (size_t i = 0; i < x0.size(); ++i) {
    EXPECT_EQ(x[i], -4 * x0[i]);
    EXPECT_EQ(sum[i], 2 * x0[i] - 4 * x0[i]);
  }
}

TEST(RecordingBackend, RefusesWhatAGraphCannotHold) {
  const auto b = make_recording_backend(std::make_unique<CpuBackend>(1));
  std::vector<float> x = {1, 2, 3}, host(3);
  b->begin_capture();
  b->scale(x.data(), x.size(), 10.0f);
  EXPECT_THROW(b->synchronize(), Error);
  EXPECT_THROW(b->copy_to_host(host.data(), x.data(), sizeof(float) * 3), Error);
  EXPECT_THROW(b->alloc_bytes(16), Error);
  EXPECT_THROW(b->take_phases(), Error);
  b->abort_capture();
  EXPECT_EQ(x[0], 1.0f);  // the dropped recording never runs
  b->scale(x.data(), x.size(), 0.5f);
  EXPECT_EQ(x[0], 0.5f);  // eager again
  b->copy_to_host(host.data(), x.data(), sizeof(float) * 3);
  EXPECT_EQ(host[2], 1.5f);
  b->begin_capture();
  b->fill_zero(x.data(), x.size());
  const int id = b->end_capture();
  b->drop_graphs();
  EXPECT_THROW(b->replay(id), Error);
  EXPECT_EQ(x[1], 1.0f);
}

// HPCTRAIN_RECORD_CPU_REFUSE=N: the N-th operation of every recording fails it.
TEST(RecordingBackend, RefusesTheChosenOperationOfEachRecording) {
  const auto b = make_recording_backend(std::make_unique<CpuBackend>(1), 2);
  std::vector<float> x = {1, 2};
  for (int round = 0; round < 2; ++round) {
    b->begin_capture();
    b->scale(x.data(), x.size(), 3.0f);
    EXPECT_THROW(b->scale(x.data(), x.size(), 5.0f), Error);
    b->abort_capture();
  }
  b->scale(x.data(), x.size(), 2.0f);  // eager: not counted
  b->scale(x.data(), x.size(), 2.0f);
  EXPECT_EQ(x[1], 8.0f);
}

}  // namespace
}  // namespace hpctrain

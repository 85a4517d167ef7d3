// The CUDA emulation itself (emu/cuda_emu.hpp): what it must catch (a race, a barrier that
// exited threads miss, a partial shuffle, a bad launch configuration) and that barriers,
// shared memory and shuffles work.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "emu/cuda_emu.hpp"  // before kernels/: renames hpctrain::kernels to kernels_emu
#include "kernels/launch.cuh"

namespace hpctrain {
namespace {

constexpr cudaStream_t kStream = nullptr;

// Thread i reads its neighbour's shared value without a barrier between the write and the
// read: the result depends on the order the threads run in.
void racy_kernel(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

void synchronised_kernel(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

void exits_before_barrier_kernel(int* out) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Lane i gets lane (i ^ 1)'s value, in each of two warps of two blocks.
void shuffle_kernel(int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  out[i] = __shfl_xor_sync(0xffffffffu, i, 1);
}

TEST(Emulator, ARaceGivesDifferentResultsInTheTwoOrders) {
  std::vector<int> forward(64), reverse(64);
  emu::set_order(emu::Order::kForward);
  emu::launch(
      1, 64, 0, kStream, [](auto... a) { racy_kernel(a...); }, forward.data());
  emu::set_order(emu::Order::kReverse);
  emu::launch(
      1, 64, 0, kStream, [](auto... a) { racy_kernel(a...); }, reverse.data());
  emu::set_order(emu::Order::kForward);
  EXPECT_NE(forward, reverse);
  for (emu::Order o : {emu::Order::kForward, emu::Order::kReverse}) {
    emu::set_order(o);
    std::vector<int> out(64);
    emu::launch(
        1, 64, 0, kStream, [](auto... a) { synchronised_kernel(a...); }, out.data());
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], (i + 1) % 64);
  }
  emu::set_order(emu::Order::kForward);
}

TEST(Emulator, FailsABarrierThatExitedThreadsMiss) {
  std::vector<int> out(32);
  EXPECT_THROW(
      emu::launch(
          1, 32, 0, kStream, [](auto... a) { exits_before_barrier_kernel(a...); }, out.data()),
      std::runtime_error);
}

void partial_shuffle_kernel(int* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffu, 1, 1); }

TEST(Emulator, ShufflesWithinWarps) {
  std::vector<int> out(128, -1);
  // Thrown in a thread (a partial mask is not emulated): unwound on its fiber's stack.
  EXPECT_THROW(emu::launch(
                   1, 32, 0, kStream, [](auto... a) { partial_shuffle_kernel(a...); }, out.data()),
               std::logic_error);
  emu::launch(
      2, 64, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(out[i], i ^ 1);
}

TEST(Emulator, ReportsAnInvalidConfigurationAsCudaDoes) {
  std::vector<int> out(2048);
  emu::launch(
      1, 2048, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  emu::launch(
      1, 2048, 0, kStream, [](auto... a) { shuffle_kernel(a...); }, out.data());
  EXPECT_THROW(kernels::check_launch("shuffle_kernel"), std::runtime_error);
}

}  // namespace
}  // namespace hpctrain

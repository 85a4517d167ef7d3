// The fiber scheduler behind cuda_emu.hpp. One block at a time: every thread of the block
// gets a fiber; the scheduler resumes each runnable fiber in turn until it finishes or
// waits at a barrier (block) or shuffle (warp); a warp whose live lanes all wait at a
// shuffle, or a block whose live threads all wait at __syncthreads, is released; when
// nothing can be released and threads remain, the launch fails.
#include "emu/cuda_emu.hpp"

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define HT_EMU_ASAN 1
#endif

namespace emu {

Coordinates here;

namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 64 * 1024;

enum class State { kReady, kAtBarrier, kAtShuffle, kDone };

struct Fiber {
  ucontext_t context;
  uint3 thread;
  State state;
};

// Stacks are kept for later launches: a launch of many small blocks reuses them.
std::vector<std::unique_ptr<char[]>>& stacks() {
  static std::vector<std::unique_ptr<char[]>> s;
  return s;
}

struct Block {
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;
  std::exception_ptr error;
  std::array<std::array<unsigned char, 8>, kMaxThreads> slots;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer's fiber switches
  size_t scheduler_stack_bytes = 0;
};

Block* running = nullptr;
Order order_now = Order::kForward;
cudaError_t pending = cudaSuccess;

// AddressSanitizer must be told of each stack switch (no-ops without it).
void* start_switch(const void* bottom, size_t bytes) {
  void* fake = nullptr;
#ifdef HT_EMU_ASAN
  __sanitizer_start_switch_fiber(&fake, bottom, bytes);
#else
  (void)bottom;
  (void)bytes;
#endif
  return fake;
}
void finish_switch(void* fake, const void** bottom, size_t* bytes) {
#ifdef HT_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, bottom, bytes);
#else
  (void)fake;
  (void)bottom;
  (void)bytes;
#endif
}

// From a fiber back to the scheduler, leaving the fiber in state s.
void yield(State s) {
  Block& b = *running;
  Fiber& f = b.fibers[b.current];
  f.state = s;
  void* fake = start_switch(b.scheduler_stack, b.scheduler_stack_bytes);
  swapcontext(&f.context, &b.scheduler);
  finish_switch(fake, &b.scheduler_stack, &b.scheduler_stack_bytes);
}

void fiber_main() {
  Block& b = *running;
  finish_switch(nullptr, &b.scheduler_stack, &b.scheduler_stack_bytes);
  try {
    (*b.body)();
  } catch (...) {
    if (!b.error) b.error = std::current_exception();
  }
  b.fibers[b.current].state = State::kDone;
  start_switch(b.scheduler_stack, b.scheduler_stack_bytes);  // this stack is finished
  setcontext(&b.scheduler);
}

void resume(Block& b, int i) {
  b.current = i;
  here.thread = b.fibers[i].thread;
  void* fake = start_switch(stacks()[i].get(), kStackBytes);
  swapcontext(&b.scheduler, &b.fibers[i].context);
  finish_switch(fake, nullptr, nullptr);
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("emu: block (" + std::to_string(here.block.x) + "," +
                           std::to_string(here.block.y) + "," + std::to_string(here.block.z) +
                           "): " + what);
}

// Releases what can go on: warps whose live lanes all wait at a shuffle (lanes that
// exited make the shuffle fail), else the block when all live threads wait at the
// barrier. False when every thread is done.
bool release(Block& b) {
  const int n = static_cast<int>(b.fibers.size());
  bool released = false;
  for (int w = 0; w < n; w += kWarp) {
    int live = 0, waiting = 0;
    for (int i = w; i < std::min(n, w + kWarp); ++i) {
      live += b.fibers[i].state != State::kDone;
      waiting += b.fibers[i].state == State::kAtShuffle;
    }
    if (waiting == 0 || waiting != live) continue;
    if (live != std::min(n, w + kWarp) - w) fail("a shuffle in a warp whose lanes exited");
    for (int i = w; i < w + live; ++i) b.fibers[i].state = State::kReady;
    released = true;
  }
  if (released) return true;
  int live = 0, waiting = 0;
  for (const Fiber& f : b.fibers) {
    live += f.state != State::kDone;
    waiting += f.state == State::kAtBarrier;
  }
  if (live == 0) return false;
  if (waiting != live) fail("deadlock: threads wait at a shuffle while others wait at a barrier");
  if (live != n) fail("__syncthreads() after threads of the block exited");
  for (Fiber& f : b.fibers) f.state = State::kReady;
  return true;
}

// Once per launch: run_block then only re-makes the context for each block. Out of line, so
// that getcontext's second return cannot clobber the caller's locals.
[[gnu::noinline]] void initialise(ucontext_t& context) { getcontext(&context); }

void run_block(Block& b, int threads) {
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[i];
    f.state = State::kReady;
    f.context.uc_stack.ss_sp = stacks()[i].get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
#ifdef HT_EMU_ASAN
    __asan_unpoison_memory_region(stacks()[i].get(), kStackBytes);
#endif
    makecontext(&f.context, fiber_main, 0);
  }
  do {
    for (int k = 0; k < threads; ++k) {
      const int i = order_now == Order::kForward ? k : threads - 1 - k;
      if (b.fibers[i].state == State::kReady) resume(b, i);
      if (b.error) std::rethrow_exception(b.error);
    }
  } while (release(b));
}

}  // namespace

void set_order(Order order) { order_now = order; }

void run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
  const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
    pending = cudaErrorInvalidConfiguration;
    return;
  }
  if (running != nullptr) throw std::logic_error("emu: a launch from inside a kernel");
  while (stacks().size() < threads) stacks().push_back(std::make_unique<char[]>(kStackBytes));
  auto b = std::make_unique<Block>();
  b->body = &body;
  b->fibers.resize(threads);
  for (size_t i = 0; i < threads; ++i) {
    initialise(b->fibers[i].context);
    b->fibers[i].thread =
        uint3{static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
              static_cast<unsigned>(i / (block.x * block.y))};
  }
  here.block_dim = block;
  here.grid_dim = grid;
  running = b.get();
  const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
  try {
    for (size_t k = 0; k < blocks; ++k) {
      const size_t j = order_now == Order::kForward ? k : blocks - 1 - k;
      here.block =
          uint3{static_cast<unsigned>(j % grid.x), static_cast<unsigned>(j / grid.x % grid.y),
                static_cast<unsigned>(j / (static_cast<size_t>(grid.x) * grid.y))};
      run_block(*b, static_cast<int>(threads));
    }
  } catch (...) {
    running = nullptr;
    throw;
  }
  running = nullptr;
}

void syncthreads() {
  if (running == nullptr) throw std::logic_error("emu: __syncthreads() outside a kernel");
  yield(State::kAtBarrier);
}

void exchange(unsigned mask, const void* v, void* out, size_t bytes, int lane_mask) {
  if (running == nullptr) throw std::logic_error("emu: a shuffle outside a kernel");
  if (mask != 0xffffffffu) throw std::logic_error("emu: only full-warp shuffles are emulated");
  Block& b = *running;
  const int i = b.current, lane = i % kWarp;
  std::memcpy(b.slots[i].data(), v, bytes);
  yield(State::kAtShuffle);  // every lane has written its value
  std::memcpy(out, b.slots[i - lane + ((lane ^ lane_mask) & (kWarp - 1))].data(), bytes);
  yield(State::kAtShuffle);  // every lane has read: the slots are free again
}

cudaError_t last_error() {
  const cudaError_t e = pending;
  pending = cudaSuccess;
  return e;
}

const char* error_string(cudaError_t e) {
  return e == cudaErrorInvalidConfiguration ? "invalid configuration argument (emulated)"
                                            : "error (emulated)";
}

}  // namespace emu

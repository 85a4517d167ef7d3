// The fiber scheduler behind cuda_emu.hpp. One block at a time: every thread of the block
// gets a fiber; the scheduler resumes each runnable fiber in turn until it finishes or
// waits at a barrier (block) or shuffle (warp); a warp whose live lanes all wait at a
// shuffle, or a block whose live threads all wait at __syncthreads, is released; when
// nothing can be released and threads remain, the launch fails.
//
// Fibers switch with a few instructions on x86-64 (ht_emu_switch_stack: callee-saved
// registers and the floating-point control words, no system call), with ucontext
// elsewhere (two system calls per switch: several times slower).
#include "emu/cuda_emu.hpp"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
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

#if defined(__x86_64__)
// ht_emu_switch_stack(from, to): pushes the callee-saved registers and the MXCSR and x87 control
// words, stores the stack pointer in *from, loads `to` and pops the same from there.
extern "C" void ht_emu_switch_stack(void** from, void* to);
asm(R"(
  .text
  .p2align 4
  .type ht_emu_switch_stack, @function
ht_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw 12(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw 12(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ht_emu_switch_stack, .-ht_emu_switch_stack
)");

struct Context {
  void* sp = nullptr;
};

// A context that starts entry() on the stack [stack, stack + bytes): the frame
// ht_emu_switch_stack pops (zero registers, this thread's control words), then entry's
// address as the return address, 16-byte aligned as after a call, above it a null one.
void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  auto* top =
      reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t{15});
  uint64_t* sp = top - 2;  // [0]: entry, [1]: null
  sp[0] = reinterpret_cast<uint64_t>(entry);
  sp[1] = 0;
  sp -= 8;  // six registers, then the control words' 16 bytes
  std::fill(sp, sp + 8, uint64_t{0});
  uint32_t mxcsr;
  uint16_t fpu;
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpu));
  std::memcpy(reinterpret_cast<char*>(sp) + 8, &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(sp) + 12, &fpu, 2);
  c.sp = sp;
}
void switch_context(Context& from, const Context& to) { ht_emu_switch_stack(&from.sp, to.sp); }
#else
struct Context {
  ucontext_t uc;
};
// Out of line: getcontext returns twice.
[[gnu::noinline]] void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
void switch_context(Context& from, const Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 64 * 1024;

enum class State { kReady, kAtBarrier, kAtShuffle, kDone };

struct Fiber {
  Context context;
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
  Context scheduler;
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
  switch_context(f.context, b.scheduler);
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
  Context finished;
  switch_context(finished, b.scheduler);  // never resumed
  __builtin_unreachable();
}

void resume(Block& b, int i) {
  b.current = i;
  here.thread = b.fibers[i].thread;
  void* fake = start_switch(stacks()[i].get(), kStackBytes);
  switch_context(b.scheduler, b.fibers[i].context);
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

void run_block(Block& b, int threads) {
  for (int i = 0; i < threads; ++i) {
    Fiber& f = b.fibers[i];
    f.state = State::kReady;
#ifdef HT_EMU_ASAN
    __asan_unpoison_memory_region(stacks()[i].get(), kStackBytes);
#endif
    make_context(f.context, stacks()[i].get(), kStackBytes, fiber_main);
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

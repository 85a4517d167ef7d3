// A fixed team of threads for data-parallel loops inside one rank (the CPU backend splits
// batches, channels and element ranges across it). The caller is thread 0 and works too;
// the others wait for the next run(), spinning briefly before they sleep, since a
// training step issues many short parallel regions. Partitions are static, so a result
// depends on the thread count but never on timing.
// Not thread-safe: one caller at a time, and run() must not be nested.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace hpctrain {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; starts threads - 1 workers
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(t) for every t in [0, size()), t = 0 on the calling thread, and returns
  // when all calls have returned. An exception thrown by a call is rethrown here.
  // fn is passed by address, never copied, so a run allocates nothing.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_task([](void* f, int t) { (*static_cast<Fn*>(f))(t); },
             const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into size() contiguous ranges (fewer when n < size() * grain) and
  // calls fn(begin, end) for each, in parallel.
  template <typename F>
  void parallel_for(size_t n, size_t grain, F&& fn) {
    const size_t parts = std::min(static_cast<size_t>(size()), grain == 0 ? n : n / grain);
    if (parts <= 1) {
      if (n > 0) fn(size_t{0}, n);
      return;
    }
    run([&](int t) {
      if (static_cast<size_t>(t) >= parts) return;
      fn(n * t / parts, n * (t + 1) / parts);
    });
  }

 private:
  using Call = void (*)(void* fn, int thread);
  void run_task(Call call, void* fn);
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  Call call_ = nullptr;  // the current run's task: call_(fn_, thread)
  void* fn_ = nullptr;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace hpctrain

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
#include <functional>
#include <mutex>
#include <thread>
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
  void run(const std::function<void(int)>& fn);

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
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int)>* task_ = nullptr;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace hpctrain

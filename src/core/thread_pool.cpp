// ThreadPool: a generation counter announces each run(); workers spin on it for a short
// while, then sleep on the condition variable. The last call to finish wakes the caller.
#include "core/thread_pool.hpp"

#include <immintrin.h>

#include "core/error.hpp"

namespace hpctrain {
namespace {

// About 20 microseconds of polling before sleeping: long enough to catch the next
// parallel region of a training step, short enough not to burn a core while idle.
constexpr int kSpins = 4000;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  HT_REQUIRE(threads >= 1, "a thread pool needs at least one thread");
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_task(Call call, void* fn) {
  if (workers_.empty()) {
    call(fn, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    call_ = call;
    fn_ = fn;
    error_ = nullptr;
    pending_.store(static_cast<int>(workers_.size()) + 1);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  try {
    call(fn, 0);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  if (pending_.fetch_sub(1) != 1) {
    for (int i = 0; i < kSpins && pending_.load() != 0; ++i) _mm_pause();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_.load() == 0; });
  }
  call_ = nullptr;
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpins && generation_.load() == seen; ++i) _mm_pause();
    Call call = nullptr;
    void* fn = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      seen = generation_.load();
      if (stop_) return;
      call = call_;
      fn = fn_;
    }
    try {
      call(fn, index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace hpctrain

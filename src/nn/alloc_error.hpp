// A model buffer that could not be allocated: a std::bad_alloc whose what() names the buffer
// ("the workspace of layer conv2d0 (4.0 TiB)"), so that the code building a model for a
// config can report it as a model that does not fit (exit 2) rather than a bare bad_alloc.
#pragma once

#include <new>
#include <string>
#include <utility>

namespace hpctrain {

class AllocationFailed : public std::bad_alloc {
 public:
  explicit AllocationFailed(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

// The one-line refusal (for a UsageError) of a model for config `source` that could not be
// allocated: `e` names the buffer when it is an AllocationFailed.
inline std::string allocation_refusal(const std::string& source, const std::bad_alloc& e) {
  const auto* named = dynamic_cast<const AllocationFailed*>(&e);
  return source + ": model: cannot allocate " +
         (named != nullptr ? std::string(named->what()) : std::string("its buffers")) +
         " (out of memory): use a smaller model (model.*) or train.batch_size";
}

}  // namespace hpctrain

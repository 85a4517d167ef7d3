// Backend's defaults for the optional device collectives: a backend without them says so.
#include "backend/backend.hpp"

#include <string>

#include "core/error.hpp"

namespace hpctrain {
namespace {

[[noreturn]] void no_collectives(const Backend& b) {
  throw Error(std::string("the ") + b.name() + " backend has no device collectives");
}

}  // namespace

std::vector<std::byte> Backend::new_collective_id() { no_collectives(*this); }
void Backend::join_collectives(const std::vector<std::byte>& /*id*/, int /*rank*/, int /*size*/) {
  no_collectives(*this);
}
void Backend::allreduce_sum(float* /*x*/, size_t /*n*/) { no_collectives(*this); }
void Backend::broadcast(float* /*x*/, size_t /*n*/, int /*root*/) { no_collectives(*this); }

}  // namespace hpctrain

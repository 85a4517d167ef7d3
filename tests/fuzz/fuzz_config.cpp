// libFuzzer target: the YAML config loader (config/). Any input is either refused with a
// UsageError or loads into a Config whose resolved YAML (config_to_yaml) loads back to the
// same YAML: the round trip the run directory's config.yaml relies on.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "config/config.hpp"
#include "fuzz_input.hpp"
#include "train/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpctrain;
  const std::string& path = fuzz::write_input(data, size, ".yaml");
  fuzz::expect_usage_error_or_success([&] {
    const Config config = load_config(path, {}, catalog());
    const std::string resolved = config_to_yaml(config);
    const std::string& again = fuzz::write_input(reinterpret_cast<const uint8_t*>(resolved.data()),
                                                 resolved.size(), ".yaml");
    Config reloaded;
    try {
      reloaded = load_config(again, {}, catalog());
    } catch (const UsageError& e) {
      std::fprintf(stderr, "fuzz: the resolved config does not load back: %s\n%s\n", e.what(),
                   resolved.c_str());
      std::abort();
    }
    if (config_to_yaml(reloaded) != resolved) {
      std::fprintf(stderr, "fuzz: the resolved config changes on reloading:\n%s\n",
                   resolved.c_str());
      std::abort();
    }
  });
  return 0;
}

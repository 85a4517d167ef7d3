// Energy sampling: the RAPL counters of a powercap tree (a fake one in a temporary folder),
// their wrap, NVML where no driver is, and the sampler's totals and CSV rows.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "train/energy.hpp"
#include "train/energy_carry.hpp"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text << "\n"; }

// A powercap class folder laid out as Linux does: the zones are folders nested under a
// devices tree (intel-rapl:0, package-0, holds dram and core sub-zones), and the class
// folder holds a link to each zone and sub-zone; each zone links back to the class folder
// (`subsystem`), a loop for whoever walks the tree through links. Returns the class folder,
// in a temporary folder (`parent_path()`) of its own.
fs::path fake_powercap(const std::string& name, uint64_t package_uj, uint64_t dram_uj) {
  const fs::path top = fs::temp_directory_path() / ("hpctrain_rapl_" + name);
  fs::remove_all(top);
  const fs::path cls = top / "class";
  const fs::path pkg = top / "devices" / "intel-rapl" / "intel-rapl:0";
  const fs::path dram = pkg / "intel-rapl:0:0";
  const fs::path core = pkg / "intel-rapl:0:1";
  for (const fs::path& d : {cls, pkg, dram, core}) fs::create_directories(d);
  fs::create_directory_symlink(pkg.parent_path(), cls / "intel-rapl");
  for (const fs::path& d : {pkg, dram, core}) {
    fs::create_directory_symlink(d, cls / d.filename());
    fs::create_directory_symlink(cls, d / "subsystem");
  }
  write(pkg / "name", "package-0");
  write(pkg / "energy_uj", std::to_string(package_uj));
  write(pkg / "max_energy_range_uj", "1000000");  // wraps after 1 J, so a test can wrap it
  write(dram / "name", "dram");
  write(dram / "energy_uj", std::to_string(dram_uj));
  write(dram / "max_energy_range_uj", "1000000");
  write(core / "name", "core");  // part of the package: not added
  write(core / "energy_uj", "5");
  write(core / "max_energy_range_uj", "1000000");
  return cls;
}

TEST(Energy, CounterDeltaWraps) {
  EXPECT_EQ(counter_delta(10, 25, 100), 15u);
  EXPECT_EQ(counter_delta(90, 5, 100), 16u);  // 90 -> 100, 100 -> 0, 0 -> 5: 10 + 1 + 5
  EXPECT_EQ(counter_delta(100, 0, 100), 1u);
  EXPECT_EQ(counter_delta(7, 7, 100), 0u);
  // A decrease that cannot be one wrap is a reset, not energy: more than half the range in
  // one interval (it gave 262 kJ for a counter that went from 5 J to 1 J), or no range.
  EXPECT_EQ(counter_delta(40, 5, 100), std::nullopt);
  EXPECT_EQ(counter_delta(5000000, 1000000, 262143328850), std::nullopt);
  EXPECT_EQ(counter_delta(10, 5, 0), std::nullopt);
}

TEST(Energy, RaplPackagesAndDramWithAWrap) {
  const fs::path root = fake_powercap("wrap", 900000, 100);
  RaplCounters rapl(root.string());
  ASSERT_EQ(rapl.domains().size(), 2u) << "package and dram; core is not counted";
  write(root / "intel-rapl:0" / "energy_uj", "300000");  // wrapped: 0.1 + 0.3 J + 1 uJ
  write(root / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj", "250100");
  rapl.sample();
  ASSERT_TRUE(rapl.cpu().joules.has_value());
  EXPECT_NEAR(*rapl.cpu().joules, 0.400001, 1e-9);
  EXPECT_NEAR(*rapl.dram().joules, 0.25, 1e-9);
  fs::remove_all(root.parent_path());
}

TEST(Energy, MissingOrUnreadableRaplHasAReasonNotZero) {
  RaplCounters none("/nonexistent/powercap");
  EXPECT_FALSE(none.cpu().joules.has_value());
  EXPECT_NE(none.cpu().reason.find("/nonexistent/powercap does not exist"), std::string::npos);
  const fs::path root = fake_powercap("bad", 1, 1);
  write(root / "intel-rapl:0" / "energy_uj", "not a number");
  RaplCounters bad(root.string());
  EXPECT_FALSE(bad.cpu().joules.has_value());
  EXPECT_NE(bad.cpu().reason.find("energy_uj is not readable"), std::string::npos)
      << bad.cpu().reason;
  EXPECT_TRUE(bad.dram().joules.has_value()) << "the dram domain was readable";
  // A counter that stops being readable leaves its kind without a total, not a part of it.
  const fs::path later = fake_powercap("later", 1, 1);
  RaplCounters rapl(later.string());
  fs::remove(later / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj");
  rapl.sample();
  EXPECT_FALSE(rapl.dram().joules.has_value());
  EXPECT_NE(rapl.dram().reason.find("could not be read during the run"), std::string::npos)
      << rapl.dram().reason;
  EXPECT_TRUE(rapl.cpu().joules.has_value());
  fs::remove_all(later.parent_path());
  fs::remove_all(root.parent_path());
}

TEST(Energy, NoNvidiaDriverMeansNoGpuTotalAndSaysWhy) {
  if (void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(lib);
    GTEST_SKIP() << "an NVIDIA driver is installed here; the absence path needs a machine "
                    "without one";
  }
  NvmlEnergy nvml;
  nvml.sample();
  EXPECT_FALSE(nvml.gpu().joules.has_value());
  EXPECT_NE(nvml.gpu().reason.find("libnvidia-ml.so.1 cannot be loaded"), std::string::npos);
}

TEST(Energy, SamplerTotalsAndCsvRows) {
  const fs::path root = fake_powercap("sampler", 0, 0);
  const fs::path csv = root / "power.csv";
  EnergySampler sampler(0.005, csv.string(), root.string());
  write(root / "intel-rapl:0" / "energy_uj", "300000");
  write(root / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj", "20000");
  const EnergyTotals t = sampler.finish();
  ASSERT_TRUE(t.cpu.joules && t.dram.joules);
  EXPECT_NEAR(*t.cpu.joules, 0.3, 1e-9);
  EXPECT_NEAR(*t.dram.joules, 0.02, 1e-9);
  EXPECT_GT(t.seconds, 0.0);
  std::ifstream in(csv);
  std::string header, line, last_cpu;
  std::getline(in, header);
  EXPECT_EQ(header, "time_s,device,power_w,energy_j");
  while (std::getline(in, line)) {
    if (line.find(",cpu0,") != std::string::npos) last_cpu = line;
  }
  EXPECT_NE(last_cpu.find(",0.300"), std::string::npos) << "last cpu0 row: " << last_cpu;
  fs::remove_all(root.parent_path());
}

// A domain that stops being readable gets no more rows (they read 0 W), and the others'
// powers stay theirs.
TEST(Energy, NoRowsForADomainOnceItFailed) {
  const fs::path root = fake_powercap("failing", 0, 0);
  const fs::path csv = root / "power.csv";
  EnergySampler sampler(0.005, csv.string(), root.string());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fs::remove(root / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const EnergyTotals t = sampler.finish();
  EXPECT_FALSE(t.dram.joules.has_value());
  std::ifstream in(csv);
  std::string line;
  std::vector<std::string> devices;
  while (std::getline(in, line)) devices.push_back(line.substr(line.find(',') + 1, 4));
  const auto last_dram = std::find(devices.rbegin(), devices.rend(), "dram");
  ASSERT_NE(last_dram, devices.rend()) << "no dram row before it failed";
  EXPECT_GE(std::count(devices.rbegin(), last_dram, "cpu0"), 3) << "cpu0 rows after dram's end";
}

TEST(Energy, PciBusIdsOfCudaAndNvmlAlike) {
  const PciAddress gpu{0, 0x3b, 0};
  EXPECT_EQ(parse_pci_bus_id("0000:3B:00.0"), gpu);      // CUDA's form
  EXPECT_EQ(parse_pci_bus_id("00000000:3b:00.0"), gpu);  // NVML's
  EXPECT_EQ(parse_pci_bus_id("0001:3B:1F.0"), (PciAddress{1, 0x3b, 0x1f}));
  EXPECT_EQ(parse_pci_bus_id(""), std::nullopt);
  EXPECT_EQ(parse_pci_bus_id("0000:3B:00.0 "), std::nullopt);
  EXPECT_EQ(parse_pci_bus_id("GPU-0"), std::nullopt);
}

// Through a stand-in NVML (two GPUs, at 0000:10:00.0 and 0000:11:00.0, whose counters
// advance 3000 and 600 mJ at every reading): every GPU's energy, and that of the GPUs the
// ranks use; a GPU in use that NVML does not report leaves that figure unknown.
TEST(Energy, ActiveGpusAreThoseTheRanksUse) {
  ::setenv("FAKE_NVML_MJ_PER_READ", "3000,600", 1);
  NvmlEnergy nvml(HT_FAKE_NVML);
  ASSERT_EQ(nvml.joules().size(), 2u) << nvml.gpu().reason;
  nvml.sample();
  nvml.sample();
  EXPECT_NEAR(*nvml.gpu().joules, 7.2, 1e-9);
  EXPECT_NEAR(*nvml.gpus_at({{0, 0x11, 0}}).joules, 1.2, 1e-9);
  EXPECT_NEAR(*nvml.gpus_at({}).joules, 0.0, 0.0) << "no GPU in use: all of them idle";
  const EnergySource lost = nvml.gpus_at({{0, 0x11, 0}, {0, 0x7f, 0}});
  EXPECT_FALSE(lost.joules.has_value());
  EXPECT_NE(lost.reason.find("0000:7f:00.0, which a rank uses, is not among"), std::string::npos)
      << lost.reason;
  NvmlEnergy none("libhpctrain-no-such-nvml.so");
  EXPECT_FALSE(none.gpus_at({{0, 0x10, 0}}).joules.has_value());
  EXPECT_NEAR(*none.gpus_at({}).joules, 0.0, 0.0);

  const fs::path root = fake_powercap("active", 0, 0);
  EnergySampler sampler(3600.0, (root / "power.csv").string(), root.string(), {"0000:10:00.0"},
                        HT_FAKE_NVML);
  const EnergyCounts c = sampler.sample_now();
  EXPECT_TRUE(c.read[2] && c.read[3]);
  EXPECT_NEAR(c.joules[3] / c.joules[2], 3000.0 / 3600.0, 1e-12) << "GPU 0 of the two";
  const EnergyTotals t = sampler.finish();
  EXPECT_NEAR(*t.gpu_active.joules, 6.0, 1e-9) << "two readings of GPU 0 since the start";
  EnergySampler odd(3600.0, (root / "power2.csv").string(), root.string(), {"GPU-0"}, HT_FAKE_NVML);
  EXPECT_NE(odd.finish().gpu_active.reason.find("PCI bus id of an unknown form: GPU-0"),
            std::string::npos);
  ::unsetenv("FAKE_NVML_MJ_PER_READ");
  fs::remove_all(root.parent_path());
}

// A sample asked for at a checkpoint: taken at once (its rows in the CSV file, at the
// seconds it returns), with the counters' joules; after finish(), finish()'s counts.
TEST(Energy, SampleNowIsARowOfThatMoment) {
  const fs::path root = fake_powercap("now", 0, 0);
  const fs::path csv = root / "power.csv";
  EnergySampler sampler(3600.0, csv.string(), root.string());  // no sample but those asked
  write(root / "intel-rapl:0" / "energy_uj", "250000");
  const EnergyCounts c = sampler.sample_now();
  EXPECT_NEAR(c.joules[0], 0.25, 1e-9);
  EXPECT_TRUE(c.read[0] && c.read[1]);
  EXPECT_GT(c.seconds, 0.0);
  write(root / "intel-rapl:0" / "energy_uj", "400000");
  const EnergyTotals t = sampler.finish();
  const EnergyCounts after = sampler.sample_now();
  EXPECT_NEAR(after.joules[0], 0.4, 1e-9);
  EXPECT_EQ(after.seconds, t.seconds);
  std::ifstream in(csv);
  std::string line;
  std::vector<std::string> cpu;
  while (std::getline(in, line)) {
    if (line.find(",cpu0,") != std::string::npos) cpu.push_back(line);
  }
  ASSERT_EQ(cpu.size(), 2u) << "the asked-for sample and finish()'s";
  char at[32];
  std::snprintf(at, sizeof(at), "%.3f,cpu0,", c.seconds);
  EXPECT_EQ(cpu[0].rfind(at, 0), 0u) << cpu[0] << " for a sample at " << c.seconds << " s";
  EXPECT_NE(cpu[0].find(",0.250"), std::string::npos) << cpu[0];
  fs::remove_all(root.parent_path());
}

// The checkpoint array keeps the joules and seconds to about 48 bits and the read flags;
// one that is empty or of another length (an older release's), or says unknown, is unknown.
TEST(EnergyCarry, CheckpointArrayRoundTripAndUnknown) {
  EnergySoFar e = EnergySoFar::nothing_yet();
  EnergyCounts part;
  part.joules[0] = 1234567.891234567;
  part.joules[1] = 0.000123456789;
  part.joules[3] = 4.5;
  part.read[0] = part.read[1] = part.read[3] = true;
  part.seconds = 86400.123456789;
  e += part;
  EXPECT_FALSE(e.counts.read[2]) << "a source one part did not read";
  std::vector<float> saved;
  encode_energy(e, saved);
  ASSERT_EQ(saved.size(), kEnergySoFarFloats);
  const EnergySoFar back = decode_energy(saved);
  ASSERT_TRUE(back.known);
  EXPECT_NEAR(back.counts.joules[0], part.joules[0], part.joules[0] * 1e-13);
  EXPECT_NEAR(back.counts.joules[1], part.joules[1], part.joules[1] * 1e-13);
  EXPECT_NEAR(back.counts.seconds, part.seconds, part.seconds * 1e-13);
  EXPECT_EQ(back.counts.joules[3], 4.5);
  EXPECT_TRUE(back.counts.read[0] && back.counts.read[1] && back.counts.read[3]);
  EXPECT_FALSE(back.counts.read[2]);
  encode_energy(EnergySoFar{}, saved);
  EXPECT_FALSE(decode_energy(saved).known);
  EXPECT_FALSE(decode_energy({}).known);
  EXPECT_FALSE(decode_energy(std::vector<float>(kEnergySoFarFloats - 1, 1.0f)).known);
}

}  // namespace
}  // namespace hpctrain

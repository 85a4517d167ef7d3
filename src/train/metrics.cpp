// CSV and JSON output. Numbers are printed with enough digits to round-trip.
#include "train/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/utf8.hpp"
#include "core/version.hpp"
#include "train/energy.hpp"

namespace hpctrain {
namespace {

// A NaN or an infinity (a diverged run's loss) is neither JSON nor a CSV number: it is
// written as `missing` (JSON null, an empty CSV field), as a value that is not there.
std::string num(double x, const char* missing = "null") {
  if (!std::isfinite(x)) return missing;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", x);
  return buf;
}

std::string opt_num(const std::optional<double>& x, const char* missing) {
  return x ? num(*x, missing) : std::string(missing);
}

// A JSON string of `text`, whose bytes that are not UTF-8 (a name or a path can hold any)
// become U+FFFD: JSON is UTF-8.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : valid_utf8(text)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// An energy object of summary.json, or null; returns its total_j and active_j (each the
// sum of its sources that were read, null for none; gpu_active is a part of gpu). `per_sample` adds
// joules_per_sample, and otherwise the energy-delay products ("edp", "edp_active").
std::pair<std::optional<double>, std::optional<double>> write_energy(
    std::ostream& o, const std::optional<EnergySummary>& energy, bool per_sample) {
  if (!energy) {
    o << "null";
    return {};
  }
  const EnergySummary& e = *energy;
  std::optional<double> total, active;
  o << "{";
  const auto sources = e.sources();
  for (int i = 0; i < kEnergySources; ++i) {
    const EnergySummary::Source& src = *sources[i];
    const char* name = kEnergySourceNames[i];
    o << (i > 0 ? ", " : "") << '"' << name << "_j\": " << opt_num(src.joules, "null");
    if (!src.joules) {
      o << ", \"" << name << "_reason\": " << json_string(src.reason);
      continue;
    }
    const bool all_gpus = i == kGpuSource, ranks_gpus = i == kGpuActiveSource;
    if (!ranks_gpus) total = total.value_or(0.0) + *src.joules;
    // 0 J of the ranks' GPUs (none used) is no reading of the active devices by itself.
    if (!all_gpus && (!ranks_gpus || *src.joules > 0)) active = active.value_or(0.0) + *src.joules;
  }
  o << ", \"total_j\": " << opt_num(total, "null") << ", \"active_j\": " << opt_num(active, "null")
    << ", \"seconds\": " << num(e.seconds) << ", \"average_power_w\": "
    << (total && e.seconds > 0 ? num(*total / e.seconds) : std::string("null"));
  if (per_sample) {
    o << ", \"joules_per_sample\": "
      << (total && e.samples > 0 ? num(*total / e.samples) : std::string("null"));
  } else {
    o << ", \"edp\": " << (total ? num(*total * e.seconds) : std::string("null"))
      << ", \"edp_active\": " << (active ? num(*active * e.seconds) : std::string("null"));
  }
  o << "}";
  return {total, active};
}

}  // namespace

std::string json_number(double x) { return num(x); }

MetricsCsv::MetricsCsv(const std::string& path, std::optional<int> completed_epochs) : path_(path) {
  std::string kept =
      "epoch,train_loss,train_accuracy,val_loss,val_accuracy,lr,time_train_s,time_val_s,"
      "samples_per_second,data_wait_s,comm_s\n";
  std::ifstream existing(path);
  if (completed_epochs && existing) {
    // Rows are whole lines written at epoch ends; a torn last line (no newline) is dropped.
    std::string line, text((std::istreambuf_iterator<char>(existing)), {});
    std::istringstream lines(text);
    bool header = true;
    while (std::getline(lines, line)) {
      if (lines.eof()) break;  // the last line had no newline
      if (header) {
        header = false;
        continue;
      }
      char* end = nullptr;
      const long epoch = std::strtol(line.c_str(), &end, 10);
      if (end != line.c_str() && *end == ',' && epoch >= 1 && epoch <= *completed_epochs) {
        kept += line + '\n';
      }
    }
  }
  existing.close();
  write_file_atomic(path, kept);
  out_.open(path, std::ios::app);
  if (!out_) throw Error(path + ": cannot open metrics file for appending");
}

void MetricsCsv::append(const EpochMetrics& m) {
  out_ << m.epoch << ',' << num(m.train_loss, "") << ',' << num(m.train_accuracy, "") << ','
       << opt_num(m.val_loss, "") << ',' << opt_num(m.val_accuracy, "") << ',' << num(m.lr, "")
       << ',' << num(m.time_train_s, "") << ',' << num(m.time_val_s, "") << ','
       << num(m.samples_per_second, "") << ',' << num(m.data_wait_s, "") << ',' << num(m.comm_s, "")
       << '\n';
  out_.flush();
  if (!out_) throw Error(path_ + ": write failed");
  // On disk before the epoch's checkpoint is committed: after a crash of the node, a resume
  // from that checkpoint keeps the epochs it completed and never writes their rows again.
  fsync_file(path_);
}

std::string summary_to_json(const RunSummary& s) {
  std::ostringstream o;
  o << "{\n";
  o << "  \"run_name\": " << json_string(s.run_name) << ",\n";
  o << "  \"backend\": " << json_string(s.backend) << ",\n";
  o << "  \"strategy\": " << json_string(s.strategy) << ",\n";
  o << "  \"algorithm\": " << json_string(s.algorithm) << ",\n";
  o << "  \"precision\": " << json_string(s.precision) << ",\n";
  o << "  \"layout\": " << json_string(s.layout) << ",\n";
  o << "  \"world_size\": " << s.world_size << ",\n";
  o << "  \"threads_per_rank\": " << s.threads_per_rank << ",\n";
  o << "  \"global_batch\": " << s.global_batch << ",\n";
  o << "  \"rank_batches\": [";
  for (size_t r = 0; r < s.rank_batches.size(); ++r) o << (r > 0 ? ", " : "") << s.rank_batches[r];
  o << "],\n";
  o << "  \"param_count\": " << s.param_count << ",\n";
  o << "  \"epochs_completed\": " << s.epochs_completed << ",\n";
  o << "  \"test_accuracy\": " << opt_num(s.test_accuracy, "null") << ",\n";
  o << "  \"test_loss\": " << opt_num(s.test_loss, "null") << ",\n";
  o << "  \"val_accuracy\": " << opt_num(s.val_accuracy, "null") << ",\n";
  o << "  \"val_loss\": " << opt_num(s.val_loss, "null") << ",\n";
  o << "  \"train_loss\": " << num(s.final_train_loss) << ",\n";
  o << "  \"train_accuracy\": " << num(s.final_train_accuracy) << ",\n";
  o << "  \"samples_per_second\": " << num(s.samples_per_second) << ",\n";
  o << "  \"time_train_s\": " << num(s.time_train_s) << ",\n";
  o << "  \"time_val_s\": " << num(s.time_val_s) << ",\n";
  o << "  \"time_test_s\": " << num(s.time_test_s) << ",\n";
  o << "  \"time_total_s\": " << num(s.time_total_s) << ",\n";
  o << "  \"data_wait_fraction\": " << num(s.data_wait_fraction) << ",\n";
  o << "  \"comm_fraction\": " << num(s.comm_fraction) << ",\n";
  o << "  \"cpu_load_per_rank\": " << opt_num(s.cpu_load_per_rank, "null") << ",\n";
  o << "  \"checkpoints_written\": " << s.checkpoints_written << ",\n";
  o << "  \"checkpoint_write_s\": " << num(s.checkpoint_write_s) << ",\n";
  o << "  \"checkpoint_blocked_s\": " << num(s.checkpoint_blocked_s) << ",\n";
  o << "  \"resumed_from\": " << (s.resumed_from ? std::to_string(*s.resumed_from) : "null")
    << ",\n";
  o << "  \"step_phases_s\": ";
  if (s.step_phases_s) {
    const auto& p = *s.step_phases_s;
    o << "{\"forward\": " << num(p[0]) << ", \"backward\": " << num(p[1])
      << ", \"exchange\": " << num(p[2]) << ", \"optimizer\": " << num(p[3])
      << ", \"between_steps\": " << num(p[4]) << "},\n";
  } else {
    o << "null,\n";
  }
  // The same as fractions of the training time, with the input wait beside them.
  o << "  \"step_phase_fractions\": ";
  if (s.step_phases_s && s.time_train_s > 0) {
    const auto& p = *s.step_phases_s;
    const double t = s.time_train_s;
    o << "{\"data_wait\": " << num(s.data_wait_fraction) << ", \"forward\": " << num(p[0] / t)
      << ", \"backward\": " << num(p[1] / t) << ", \"exchange\": " << num(p[2] / t)
      << ", \"optimizer\": " << num(p[3] / t) << ", \"between_steps\": " << num(p[4] / t) << "},\n";
  } else {
    o << "null,\n";
  }
  o << "  \"loss_scale\": " << opt_num(s.loss_scale, "null") << ",\n";
  o << "  \"skipped_steps\": " << (s.skipped_steps ? std::to_string(*s.skipped_steps) : "null")
    << ",\n";
  o << "  \"cuda_graph_steps\": "
    << (s.cuda_graph_steps ? std::to_string(*s.cuda_graph_steps) : "null") << ",\n";
  o << "  \"async\": ";
  if (s.async) {
    const AsyncReport& a = *s.async;
    o << "{\n    \"workers\": " << a.workers << ", \"servers\": " << a.servers
      << ", \"deterministic\": " << (a.deterministic ? "true" : "false")
      << ",\n    \"staleness_per_epoch\": [";
    for (size_t e = 0; e < a.staleness_per_epoch.size(); ++e) {
      o << (e > 0 ? ", " : "") << '[';
      const std::vector<int64_t>& h = a.staleness_per_epoch[e];
      for (size_t i = 0; i < h.size(); ++i) o << (i > 0 ? ", " : "") << h[i];
      o << ']';
    }
    o << "],\n    \"server_reports\": [";
    for (size_t i = 0; i < a.server_reports.size(); ++i) {
      const AsyncServerReport& r = a.server_reports[i];
      o << (i > 0 ? ", " : "") << "{\"rank\": " << r.rank
        << ", \"pushes_per_second\": " << num(r.pushes_per_second)
        << ", \"pulls_per_second\": " << num(r.pulls_per_second) << ", \"dropped\": " << r.dropped
        << ", \"busy_fraction\": " << num(r.busy_fraction)
        << ", \"cpu_fraction\": " << num(r.cpu_fraction) << '}';
    }
    o << "],\n    \"bytes_per_sample\": " << num(a.bytes_per_sample)
      << ",\n    \"allreduce_bytes_per_sample\": " << num(a.allreduce_bytes_per_sample)
      << "\n  },\n";
  } else {
    o << "null,\n";
  }
  o << "  \"energy\": ";
  const auto [total, active] = write_energy(o, s.energy, /*per_sample=*/true);
  o << ",\n  \"edp\": " << (total ? num(*total * s.energy->seconds) : std::string("null"))
    << ",\n  \"edp_active\": " << (active ? num(*active * s.energy->seconds) : std::string("null"))
    << ",\n";
  o << "  \"energy_whole_run\": ";
  write_energy(o, s.energy_whole_run, /*per_sample=*/false);
  o << ",\n";
  o << "  \"params_sha256\": " << json_string(s.params_sha256) << ",\n";
  o << "  \"version\": " << json_string(version()) << ",\n";
  o << "  \"git_commit\": " << json_string(git_commit()) << ",\n";
  o << "  \"hosts\": [";
  for (size_t i = 0; i < s.hosts.size(); ++i) o << (i > 0 ? ", " : "") << json_string(s.hosts[i]);
  o << "],\n";
  o << "  \"slurm\": ";
  if (s.slurm.empty()) {
    o << "null,\n";
  } else {
    o << "{";
    for (size_t i = 0; i < s.slurm.size(); ++i) {
      const auto& [key, v] = s.slurm[i];
      const bool name = key == "job_name" || key == "cluster";  // "42" names a job too
      const bool integer = !name && !v.empty() && v.size() < 18 &&
                           v.find_first_not_of("0123456789") == std::string::npos;
      o << (i > 0 ? ", " : "") << json_string(key) << ": " << (integer ? v : json_string(v));
    }
    o << "},\n";
  }
  o << "  \"start_time\": " << json_string(s.start_time) << ",\n";
  o << "  \"end_time\": " << json_string(s.end_time) << "\n";
  o << "}\n";
  return o.str();
}

std::vector<std::pair<std::string, std::string>> slurm_ids() {
  static const std::pair<const char*, const char*> kKeys[] = {
      {"SLURM_JOB_ID", "job_id"},
      {"SLURM_ARRAY_JOB_ID", "array_job_id"},
      {"SLURM_ARRAY_TASK_ID", "array_task_id"},
      {"SLURM_RESTART_COUNT", "restart_count"},
      {"SLURM_JOB_NAME", "job_name"},
      {"SLURM_CLUSTER_NAME", "cluster"}};
  std::vector<std::pair<std::string, std::string>> ids;
  for (const auto& [variable, key] : kKeys) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') ids.emplace_back(key, value);
  }
  return ids;
}

std::string epoch_line(const EpochMetrics& m, int epochs) {
  const auto four = [](const std::optional<double>& v) {  // rounded (it was cut: 0.6032)
    char text[32] = "-";
    if (v) std::snprintf(text, sizeof(text), "%.4f", *v);
    return std::string(text);
  };
  char line[256];
  std::snprintf(line, sizeof(line),
                "epoch %d/%d  train loss %.4f acc %.4f  val loss %s acc %s  %.2fs  %.0f "
                "samples/s  data wait %.1f%%  comm %.1f%%",
                m.epoch, epochs, m.train_loss, m.train_accuracy, four(m.val_loss).c_str(),
                four(m.val_accuracy).c_str(), m.time_train_s, m.samples_per_second,
                m.time_train_s > 0 ? 100.0 * m.data_wait_s / m.time_train_s : 0.0,
                m.time_train_s > 0 ? 100.0 * m.comm_s / m.time_train_s : 0.0);
  return line;
}

}  // namespace hpctrain

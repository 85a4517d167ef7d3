// Checkpoint capture and restore.
//   capture: a strategy with identical replicas (allreduce) keeps the same parameters and
//     optimizer state on every rank, so rank 0 copies its own; otherwise (average) the
//     state is per rank, so rank 0 gathers everyone's per-parameter arrays and stores them
//     per rank. The model state (BatchNorm statistics) is the same on every rank when
//     save() is called (the trainer averages it first) and is stored once, as are the
//     optimizer's scalars.
//   restore: rank 0 broadcasts the cursor, then the arrays: per rank when the
//     checkpoint holds per-rank state for the same world size and strategy,
//     else one shared copy (the ranks' average for a per-rank checkpoint).
//     With another world size or batch, the cursor is kept as the epoch and the
//     samples consumed in it.
#include "train/checkpointing.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>

#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "train/memory_check.hpp"

namespace hpctrain {
namespace {

// First line where two architecture descriptions differ, for the error message.
std::string first_difference(const std::string& stored, const std::string& current) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < s.size()) {
      const size_t end = s.find('\n', start);
      out.push_back(s.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  };
  const auto a = lines(stored), b = lines(current);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)";
    const std::string y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) return "checkpoint has '" + x + "', the config gives '" + y + "'";
  }
  return "";
}

// Why the model arrays of `s` cannot be this model's, or "" when they fit (the architecture
// agreed; a file another tool wrote may still hold arrays of other sizes).
std::string array_misfit(const CheckpointState& s, size_t params, size_t state) {
  auto wrong = [&](const std::string& name, size_t want) -> std::string {
    const auto it = s.arrays.find(name);
    if (it == s.arrays.end()) return "array '" + name + "' is missing";
    if (it->second.size() == want) return "";
    return "array '" + name + "' holds " + std::to_string(it->second.size()) +
           " values, the model " + std::to_string(want);
  };
  std::string why;
  if (s.arrays.count(kParamsArray) > 0) {
    why = wrong(kParamsArray, params);
  } else {
    for (int r = 0; r < s.world_size && why.empty(); ++r) {
      why = wrong(rank_array_name(r, kParamsArray), params);
    }
  }
  // A model with state (BatchNorm's running statistics) needs it: none is damage too.
  if (why.empty() && (state > 0 || s.arrays.count(kStateArray) > 0)) {
    why = wrong(kStateArray, state);
  }
  // Every array kept per rank (optimizer state under strategy average) is there for each
  // rank the checkpoint names, as long as rank 0's: a rank's copy is read into a buffer of
  // rank 0's size.
  const std::string rank0 = rank_array_name(0, "");
  for (const auto& [name, values] : s.arrays) {
    if (!why.empty() || name.rfind(rank0, 0) != 0) continue;
    const std::string array = name.substr(rank0.size());
    for (int r = 1; r < s.world_size && why.empty(); ++r) {
      why = wrong(rank_array_name(r, array), values.size());
    }
  }
  return why;
}

// The owner of the run's checkpoints in the manifest: the run directory identifies the run,
// so its resumed runs prune what it wrote. Where the checkpoint directory is the run
// directory or inside it, the run directory relative to it ("." or "..", ...), so that a
// run directory moved with its checkpoints still owns them; else its absolute path.
std::string run_owner(const Config& config) {
  namespace fs = std::filesystem;
  const auto clean = [](const std::string& p) {
    const fs::path c = fs::weakly_canonical(p).lexically_normal();
    return c.has_filename() || !c.has_relative_path() ? c : c.parent_path();  // "/a/b/"
  };
  const fs::path run = clean(config.run.dir);
  const fs::path rel = run.lexically_relative(clean(config.checkpoint.dir));
  bool up_only = !rel.empty();
  for (const fs::path& part : rel) up_only = up_only && (part == ".." || part == ".");
  return up_only ? rel.string() : run.string();
}

// Snapshots up to this size are copied by the training thread itself.
constexpr size_t kInlineSnapshotBytes = size_t{8} << 20;

// Cursor and array layout broadcast from rank 0.
struct RestoreHeader {
  int64_t found = 0;
  int64_t step = 0, epoch = 0, step_in_epoch = 0, global_batch = 0, world_size = 0;
  int64_t steps_per_epoch = 0;
  int64_t per_rank = 0;      // 1: arrays come per rank (scatter); 0: one shared copy
  int64_t state_size = 0;    // floats of model state in the checkpoint
  float loss_scale[2] = {};  // the checkpoint's loss scaler; scale 0: none
};

}  // namespace

TrainingCheckpoints::TrainingCheckpoints(const Config& config, Model& model, Optimizer& optimizer,
                                         LossScaler* scaler, const JobShape& job)
    : config_(config),
      model_(model),
      slots_(optimizer.state()),
      scaler_(scaler),
      rank_(job.rank),
      world_size_(job.world_size),
      steps_per_epoch_(job.steps_per_epoch),
      global_batch_(job.global_batch),
      per_rank_state_(!job.one_stored_state),
      config_yaml_(config_to_yaml(config)),
      architecture_(model.architecture()),
      last_save_time_(now_seconds()) {}

TrainingCheckpoints::~TrainingCheckpoints() = default;

void TrainingCheckpoints::keep_array(const char* name, std::vector<float>* values) {
  kept_.emplace_back(name, values);
}

bool TrainingCheckpoints::enabled() const {
  const CheckpointConfig& c = config_.checkpoint;
  return c.every_steps > 0 || c.every_seconds > 0 || c.at_epoch_end;
}

void TrainingCheckpoints::check_directory() const {
  const std::string& dir = config_.checkpoint.dir;
  const std::string key = config_.source_file + ": checkpoint.dir: " + dir;
  std::error_code ec;
  // Writable: a file can be created there (permissions, read-only mounts, quotas alike).
  const std::string probe = dir + "/.hpctrain-write-test." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError(key + ": cannot write there: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  // The manifest is appended without following links (O_NOFOLLOW): a link or other
  // non-file there failed the first checkpoint, after set-up and some training.
  const std::filesystem::path manifest = std::filesystem::path(dir) / kManifestName;
  const std::filesystem::file_status st = std::filesystem::symlink_status(manifest, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    throw UsageError(key + ": " + kManifestName + " there is " +
                     (std::filesystem::is_symlink(st) ? "a symbolic link" : "not a regular file") +
                     ": hpctrain records its checkpoints in that file and follows no link; "
                     "remove it");
  }
  // The size of one checkpoint: the arrays save() captures.
  const double copies = per_rank_state_ && world_size_ > 1 ? world_size_ : 1;
  double floats = static_cast<double>(model_.param_count()) * copies +
                  static_cast<double>(model_.state_count());
  for (const OptimizerSlot& slot : slots_) {
    floats += static_cast<double>(slot.size) * (slot.per_parameter ? copies : 1.0);
  }
  // Without a cadence only the final checkpoint (or a stop's) is written: it and the one
  // it replaces. A checkpoint is committed before retention deletes the oldest, so at most
  // count of the run's own are there at once (more only while the first new one is written
  // beside more than keep older ones); those already there, which retention replaces, take
  // part of that room: the rest must be free, and at least one checkpoint's size.
  // A keep larger than what the run can write ("keep them all") asks no room for more: at
  // most one per step with a time cadence, else the step cadence's, the epochs' and a
  // final or stop one.
  const CheckpointConfig& c = config_.checkpoint;
  const double left = std::max(
      0.0, static_cast<double>(config_.train.epochs) * static_cast<double>(steps_per_epoch_) -
               static_cast<double>(start_step_));
  const double writes =
      c.every_seconds > 0
          ? left + 1
          : (c.every_steps > 0 ? std::floor(left / c.every_steps) : 0) +
                (c.at_epoch_end ? std::ceil(left / static_cast<double>(steps_per_epoch_)) : 0) + 2;
  const double bytes = floats * sizeof(float);
  double own = 0;
  int owned = 0;
  for (const CheckpointEntry& e : owned_checkpoints(dir, run_owner(config_))) {
    const uintmax_t size = std::filesystem::file_size(e.path, ec);
    if (!ec) own += static_cast<double>(size), ++owned;
  }
  const double count = enabled() ? std::min(c.keep + 1.0, owned + writes) : 2.0;
  const double need = bytes * count;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (!ec && static_cast<double>(space.available) < std::max(bytes, need - own)) {
    char line[300];
    std::snprintf(line, sizeof(line),
                  ": %.1f MiB free, but the %.0f checkpoints of %.1f MiB this run may hold at "
                  "once (checkpoint.keep + 1, or fewer if it writes fewer) need %.1f MiB",
                  static_cast<double>(space.available) / (1 << 20), count, bytes / (1 << 20),
                  need / (1 << 20));
    std::string why = key + line;
    if (owned > 0) {
      std::snprintf(line, sizeof(line),
                    " (the run's own %d checkpoint(s) there, %.1f MiB, which retention replaces, "
                    "count as free)",
                    owned, own / (1 << 20));
      why += line;
    }
    throw UsageError(why);
  }
}

bool TrainingCheckpoints::due_by_steps(int64_t global_step) const {
  return config_.checkpoint.every_steps > 0 && global_step % config_.checkpoint.every_steps == 0;
}

bool TrainingCheckpoints::due_by_time(double now) const {
  return config_.checkpoint.every_seconds > 0 &&
         now - last_save_time_ >= config_.checkpoint.every_seconds;
}

void TrainingCheckpoints::prepare_resume(const std::string& resume, bool writes) {
  if (rank_ != 0) return;
  const std::string& dir = config_.checkpoint.dir;
  if (resume == "never") {
    const auto existing = list_checkpoints(dir);
    if (!existing.empty()) {
      throw UsageError(config_.source_file + ": checkpoint.dir: " + dir +
                       " holds checkpoints (newest: step " + std::to_string(existing.front().step) +
                       "), and --resume never starts fresh: continue the run that wrote them "
                       "with --resume auto, or give this run another checkpoint.dir");
    }
    return;
  }
  // A run of another run directory that wrote here (one checkpoint.dir given to a sweep's
  // runs, one after the other): its final checkpoint would be resumed as this run's, or its
  // files overwritten by this run's of the same steps.
  if (const auto other = writes ? foreign_checkpoint(dir, run_owner(config_)) : std::nullopt) {
    namespace fs = std::filesystem;
    fs::path run(other->owner);  // a run directory, relative to `dir` where inside it
    if (!run.is_absolute()) run = (fs::path(dir) / run).lexically_normal();
    if (!run.has_filename() && run.has_relative_path()) run = run.parent_path();  // "a/b/"
    throw UsageError(config_.source_file + ": checkpoint.dir: " + dir +
                     " holds checkpoints of another run (" + run.string() + " wrote " +
                     std::filesystem::path(other->entry.path).filename().string() + ", says " +
                     kManifestName +
                     "): this run would resume them or write over them; give it a "
                     "checkpoint.dir of its own (with --resume PATH to start from one of them)");
  }
  // auto:PATH (a requeued run whose first run was given --resume PATH): the run's own newest
  // checkpoint, else PATH, where it was stopped before it wrote one.
  const bool auto_else = resume.rfind(kResumeAutoElse, 0) == 0;
  if (resume == "auto" || auto_else) {
    resume_ = load_newest_valid(dir);
    if (!resume_ && auto_else) {
      const std::string path = resume.substr(std::strlen(kResumeAutoElse));
      resume_ = LoadedCheckpoint{path, read_checkpoint_file(path)};
    }
    if (!resume_) return;
  } else {
    resume_ = LoadedCheckpoint{resume, read_checkpoint_file(resume)};
  }
  const std::string diff = first_difference(resume_->state.architecture, architecture_);
  if (!diff.empty()) {
    throw UsageError(resume_->path + ": cannot resume a different model: " + diff);
  }
  const std::string misfit =
      array_misfit(resume_->state, model_.param_count(), model_.state_count());
  if (!misfit.empty()) throw UsageError(resume_->path + ": " + misfit);
}

std::optional<int64_t> TrainingCheckpoints::restore(Communicator& comm) {
  RestoreHeader h;
  const CheckpointState* s = resume_ ? &resume_->state : nullptr;
  if (rank_ == 0 && s != nullptr) {
    h.found = 1;
    h.step = s->step;
    h.epoch = s->epoch;
    h.step_in_epoch = s->step_in_epoch;
    h.global_batch = s->global_batch;
    h.world_size = s->world_size;
    h.steps_per_epoch = s->steps_per_epoch;
    h.state_size =
        s->arrays.count(kStateArray) ? static_cast<int64_t>(s->arrays.at(kStateArray).size()) : 0;
    if (auto it = s->arrays.find(kLossScaleArray);
        it != s->arrays.end() && it->second.size() == 2) {
      h.loss_scale[0] = it->second[0];
      h.loss_scale[1] = it->second[1];
    }
    h.per_rank = s->arrays.count(rank_array_name(0, kParamsArray)) > 0 &&
                 s->world_size == world_size_ && per_rank_state_;
  }
  comm.broadcast(&h, sizeof(h), 0);
  if (!h.found) return std::nullopt;

  // 1. Arrays: parameters, model state, then optimizer state (absent in the checkpoint:
  //    zeros).
  const size_t n = model_.param_count();
  std::vector<float> params(n);
  auto distribute = [&](const char* name, std::vector<float>& out) {
    if (h.per_rank) {
      std::vector<float> all;
      if (rank_ == 0) {
        all.resize(n * static_cast<size_t>(world_size_));
        for (int r = 0; r < world_size_; ++r) {
          const std::vector<float>& a = s->arrays.at(rank_array_name(r, name));
          std::copy(a.begin(), a.end(), all.begin() + static_cast<std::ptrdiff_t>(r * n));
        }
      }
      comm.scatter(all.data(), n, out.data(), 0);
    } else {
      if (rank_ == 0) out = shared_array(*s, name, resume_->path);  // or the copies' mean
      comm.broadcast(out.data(), n * sizeof(float), 0);
    }
  };
  distribute(kParamsArray, params);
  model_.set_params(params.data());
  // prepare_resume refused a checkpoint whose state is missing or of another size.
  HT_REQUIRE(h.state_size == static_cast<int64_t>(model_.state_count()),
             "checkpoint model state of " + std::to_string(h.state_size) + " values, the model " +
                 std::to_string(model_.state_count()));
  if (h.state_size > 0) {
    std::vector<float> state(model_.state_count());
    if (rank_ == 0) state = s->arrays.at(kStateArray);
    comm.broadcast(state.data(), state.size() * sizeof(float), 0);
    model_.set_state(state.data());
  }
  for (const OptimizerSlot& slot : slots_) {
    int64_t present = 0;
    if (rank_ == 0) {
      // Per parameter: per rank, or one shared copy, or per-rank ones to average.
      auto has = [&](const std::string& name) {
        const auto it = s->arrays.find(name);
        return it != s->arrays.end() && it->second.size() == slot.size;
      };
      const std::string per_rank_name = rank_array_name(0, slot.name);
      present = !slot.per_parameter ? has(slot.name)
                : h.per_rank        ? has(per_rank_name)
                                    : has(slot.name) || has(per_rank_name);
      if (!present) {
        log_warn(std::string("checkpoint has no ") + slot.name + " (written with other " +
                 "optimizer settings); that state starts from zero");
      }
    }
    comm.broadcast(&present, sizeof(present), 0);
    std::vector<float> values(slot.size, 0.0f);
    if (present && slot.per_parameter) {
      distribute(slot.name, values);
    } else if (present) {
      if (rank_ == 0) values = s->arrays.at(slot.name);
      comm.broadcast(values.data(), slot.size * sizeof(float), 0);
    }
    model_.backend().copy_to_device(slot.data, values.data(), slot.size * sizeof(float));
  }
  for (auto& [name, values] : kept_) {
    int64_t count = 0;
    if (rank_ == 0) {
      const auto it = s->arrays.find(name);
      count = it == s->arrays.end() ? 0 : static_cast<int64_t>(it->second.size());
    }
    comm.broadcast(&count, sizeof(count), 0);
    values->assign(static_cast<size_t>(count), 0.0f);
    if (rank_ == 0 && count > 0) *values = s->arrays.at(name);
    comm.broadcast(values->data(), values->size() * sizeof(float), 0);
  }
  if (scaler_ != nullptr && h.loss_scale[0] > 0.0f) {
    scaler_->restore({h.loss_scale[0], h.loss_scale[1]});
  } else if (scaler_ != nullptr && rank_ == 0) {
    log_warn("checkpoint has no loss scale (not written by an fp16 run); it starts afresh");
  }

  // 2. Cursor: exact when nothing changed, else the samples consumed in the epoch (also
  // when only the epoch's steps changed: other data, another balance).
  int64_t step_in_epoch = h.step_in_epoch;
  if (h.world_size != world_size_ || h.global_batch != global_batch_ ||
      h.steps_per_epoch != steps_per_epoch_) {
    const int64_t samples = h.step_in_epoch * h.global_batch;
    // At most the epoch's last step: the epoch still ends with its validation, metrics row
    // and checkpoint (the stored epoch had not ended).
    step_in_epoch = std::min((samples + global_batch_ - 1) / global_batch_, steps_per_epoch_ - 1);
  }
  start_step_ = h.epoch * steps_per_epoch_ + step_in_epoch;
  last_saved_step_ = start_step_;
  if (rank_ == 0) {
    // Epochs counted from 1, as in the log and metrics.csv.
    const std::string where = h.step_in_epoch == 0 ? "end of epoch " + std::to_string(h.epoch)
                                                   : "step " + std::to_string(h.step_in_epoch) +
                                                         " of epoch " + std::to_string(h.epoch + 1);
    log_info("loaded checkpoint " + resume_->path + " (step " + std::to_string(h.step) + ", " +
             where + ", written by " + std::to_string(h.world_size) + " rank(s))");
    resume_.reset();
  }
  return h.step;
}

double TrainingCheckpoints::reserved_bytes(const JobShape& job, size_t params, size_t state,
                                           int per_parameter_slots) {
  const double n = static_cast<double>(params);
  const double world = job.world_size;
  const bool per_rank = !job.one_stored_state && job.world_size > 1;
  if (job.rank != 0) return per_rank ? 4.0 * n : 0.0;  // the send buffer
  const double arrays = 1.0 + per_parameter_slots;
  return 4.0 * (per_rank ? n * (arrays * world + world + 1.0) : n * arrays) +
         4.0 * static_cast<double>(state);
}

void TrainingCheckpoints::reserve_memory() {
  const size_t n = model_.param_count();
  const bool per_rank = per_rank_state_ && world_size_ > 1;
  try {
    if (per_rank) {
      send_buffer_.resize(n);
      if (rank_ == 0) gather_buffer_.resize(n * static_cast<size_t>(world_size_));
    }
    if (rank_ != 0) return;
    writer_ = std::make_unique<AsyncCheckpointWriter>(config_.checkpoint.dir,
                                                      config_.checkpoint.keep, run_owner(config_));
    // The arrays save() fills, by name: resized (and zeroed, so touched) once; and the
    // strings it sets, so that no save() allocates on the training thread.
    CheckpointState state;
    const auto reserve = [&](const char* name, bool per_parameter, size_t count) {
      if (!per_rank || !per_parameter) {
        state.array(name).resize(count);
        return;
      }
      for (int r = 0; r < world_size_; ++r) state.arrays[rank_array_name(r, name)].resize(n);
    };
    reserve(kParamsArray, true, n);
    for (const OptimizerSlot& slot : slots_) {
      reserve(slot.name, slot.per_parameter, slot.per_parameter ? n : slot.size);
    }
    if (model_.state_count() > 0) state.array(kStateArray).resize(model_.state_count());
    if (scaler_ != nullptr) state.array(kLossScaleArray).resize(2);
    for (const auto& [name, values] : kept_) state.array(name).reserve(values->size());
    state.strategy = config_.distributed.strategy;
    state.config_yaml = config_yaml_;
    state.architecture = architecture_;
    utc_now(state.created);
    array_key_.reserve(64);
    sources_.reserve(1 + slots_.size());
    writer_->reserve(std::move(state), sources_.capacity());
  } catch (const std::bad_alloc&) {
    int per_parameter = 0;
    for (const OptimizerSlot& slot : slots_) per_parameter += slot.per_parameter ? 1 : 0;
    const JobShape job{rank_, world_size_, 0, 0, !per_rank_state_};
    const double bytes = reserved_bytes(job, n, model_.state_count(), per_parameter);
    throw UsageError(config_.source_file + ": cannot allocate the host memory checkpoints are " +
                     "written from (" + gib(bytes) + ") (out of memory): use a smaller " +
                     "model (model.*)");
  }
}

void TrainingCheckpoints::save(Communicator& comm, int64_t global_step, bool wait) {
  const double t0 = now_seconds();
  const size_t n = model_.param_count();
  const bool per_rank = per_rank_state_ && world_size_ > 1;
  // Rank 0 fills the memory reserve_memory() sized, back from the write in flight, if any
  // (that write would be waited for at submit() anyway): no allocation. The other ranks at
  // most send.
  if (rank_ == 0) writer_->wait();
  CheckpointState state = rank_ == 0 ? writer_->recycle() : CheckpointState{};
  // 1. Arrays to rank 0. Identical on every rank (allreduce): the writer thread
  //    snapshots rank 0's live arrays while training goes on. Per rank (average):
  //    gathered now.
  // A small state is copied right here: a millisecond of memcpy costs less than
  // waiting for the writer thread to be scheduled on busy cores.
  // Device memory (a GPU backend) is copied to host memory here too.
  const size_t arrays = 1 + static_cast<size_t>(std::count_if(
                                slots_.begin(), slots_.end(),
                                [](const OptimizerSlot& x) { return x.per_parameter; }));
  const bool copy_inline =
      !model_.backend().host_accessible() || arrays * n * sizeof(float) <= kInlineSnapshotBytes;
  sources_.clear();
  auto capture = [&](const float* live, const char* name) {
    if (!per_rank) {
      if (rank_ != 0) return;
      if (!copy_inline) {
        sources_.push_back({name, live, n});
        return;
      }
      std::vector<float>& dst = state.array(name);
      dst.resize(n);
      model_.backend().copy_to_host(dst.data(), live, n * sizeof(float));
      return;
    }
    send_buffer_.resize(n);
    model_.backend().copy_to_host(send_buffer_.data(), live, n * sizeof(float));
    gather_buffer_.resize(rank_ == 0 ? n * static_cast<size_t>(world_size_) : 0);
    comm.gather(send_buffer_.data(), n, gather_buffer_.data(), 0);
    if (rank_ != 0) return;
    for (int r = 0; r < world_size_; ++r) {
      const auto begin = gather_buffer_.begin() + static_cast<std::ptrdiff_t>(r * n);
      rank_array_name(r, name, array_key_);
      std::vector<float>& dst = state.array(array_key_);
      dst.assign(begin, begin + static_cast<std::ptrdiff_t>(n));
    }
  };
  capture(model_.params(), kParamsArray);
  for (const OptimizerSlot& slot : slots_) {
    if (slot.per_parameter) {
      capture(slot.data, slot.name);
    } else if (rank_ == 0) {
      std::vector<float>& dst = state.array(slot.name);
      dst.resize(slot.size);
      model_.backend().copy_to_host(dst.data(), slot.data, slot.size * sizeof(float));
    }
  }
  if (scaler_ != nullptr && rank_ == 0) {
    const LossScaler::Saved ls = scaler_->save();
    state.array(kLossScaleArray).assign({ls.scale, ls.good_steps});
  }
  if (rank_ == 0) {
    for (const auto& [name, values] : kept_) state.array(name) = *values;
  }
  if (model_.state_count() > 0 && rank_ == 0) {
    std::vector<float>& dst = state.array(kStateArray);
    dst.resize(model_.state_count());
    model_.get_state(dst.data());
  }
  last_saved_step_ = global_step;
  last_save_time_ = now_seconds();
  if (rank_ != 0) return;

  // 2. Cursor and identity; the background thread writes it.
  state.step = global_step;
  state.epoch = global_step / steps_per_epoch_;
  state.step_in_epoch = global_step % steps_per_epoch_;
  state.steps_per_epoch = steps_per_epoch_;
  state.global_batch = global_batch_;
  state.world_size = world_size_;
  state.strategy = config_.distributed.strategy;
  state.config_yaml = config_yaml_;
  state.architecture = architecture_;
  utc_now(state.created);
  writer_->submit(std::move(state), sources_);
  if (wait) writer_->wait();
  blocked_seconds_ += now_seconds() - t0;
}

void TrainingCheckpoints::wait_snapshot() {
  if (!writer_ || !writer_->snapshot_pending()) return;
  const double t0 = now_seconds();
  writer_->wait_snapshot();
  blocked_seconds_ += now_seconds() - t0;
}

void TrainingCheckpoints::finish() {
  if (!writer_) return;
  const double t0 = now_seconds();
  writer_->wait();
  blocked_seconds_ += now_seconds() - t0;
}

void TrainingCheckpoints::wait_idle() {
  if (!writer_) return;
  const double t0 = now_seconds();
  writer_->wait_idle();
  blocked_seconds_ += now_seconds() - t0;
}

CheckpointWriteStats TrainingCheckpoints::stats() const {
  CheckpointWriteStats s = writer_ ? writer_->stats() : CheckpointWriteStats{};
  s.blocked_seconds = blocked_seconds_;  // capture and hand-over, not only the queue wait
  return s;
}

}  // namespace hpctrain

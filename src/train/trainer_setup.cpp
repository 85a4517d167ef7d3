// Trainer set-up in three stages (set_up_trainer): local work whose failures all ranks
// agree on, one collective that cannot fail on one rank only, local work again. Then the
// loaders, made at the start of run() and, under balance auto, again for each epoch.
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>
#include <vector>

#include "comm/agreement.hpp"
#include "comm/device_group.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_env.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "h5/h5.hpp"
#include "nn/alloc_error.hpp"
#include "nn/presets.hpp"
#include "train/backend_choice.hpp"
#include "train/balance.hpp"
#include "train/input_preprocess.hpp"
#include "train/memory_check.hpp"
#include "train/model_data.hpp"
#include "train/run_plan.hpp"
#include "train/trainer.hpp"
#include "train/transfer.hpp"

namespace hpctrain {
namespace {

// The files of data.`key`; on rank 0, a warning for one that is also a file of `train` (the
// validation or test figures would be of rows the model trains on).
std::vector<std::string> split_files(const Config& config, const NameList& entries, const char* key,
                                     const std::vector<std::string>& train, int rank) {
  std::vector<std::string> files =
      expand_data_paths(entries, config.source_file + ": data." + std::string(key));
  if (rank != 0) return files;
  if (const std::string shared = shared_data_file(files, train); !shared.empty()) {
    log_warn(config.source_file + ": data." + key + ": " + shared +
             " is also a training file (data.train): the " + key +
             " figures are of rows the model trains on");
  }
  return files;
}

// `files` as one data source (null for none), checked against the training set's shape
// (`train`; null for the training set itself). A file refused names the config and the key.
std::unique_ptr<DataSource> open_split(const Config& config, const std::vector<std::string>& files,
                                       const char* key, const DatasetShape* train) {
  std::unique_ptr<DataSource> file;
  try {
    file = open_data(files);
  } catch (const UsageError& e) {
    throw UsageError(config.source_file + ": data." + key + ": " + e.what());
  }
  if (file == nullptr) return nullptr;
  if (train != nullptr) check_like_training(file->shape(), *train, file->path(), key);
  return file;
}

int compute_threads(const Config& config, const MpiEnv& env) {
  if (config.run.threads > 0) return config.run.threads;
  // A launcher that binds each rank (srun --cpus-per-task, mpiexec -bind-to) gives
  // it its own CPUs: use them all. Unbound ranks share the node's cores.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) < cores) {
    return std::max(1, CPU_COUNT(&set));
  }
  return std::max(1, cores / env.local_size());
}

// Collective: every rank runs rank 0's config, or the start is refused (exit 2). Ranks given
// different ones (an MPMD launch, a config edited while a job starts) would otherwise wait
// for each other at the first collective one of them does not make.
int agree_on_config(const Config& config, int rank) {
  const std::string mine = config_to_yaml(config);
  std::string first = mine;
  int bytes = static_cast<int>(first.size());
  HT_CHECK_MPI(MPI_Bcast(&bytes, 1, MPI_INT, 0, MPI_COMM_WORLD));
  first.resize(static_cast<size_t>(bytes));
  HT_CHECK_MPI(MPI_Bcast(first.data(), bytes, MPI_CHAR, 0, MPI_COMM_WORLD));
  return run_and_agree(MPI_COMM_WORLD, [&] {
    const std::string difference = config_first_difference(mine, first);
    if (difference.empty()) return;
    throw UsageError(config.source_file + ": rank " + std::to_string(rank) +
                     "'s config differs from rank 0's (" + difference +
                     "): every rank of a job must run the same config");
  });
}

}  // namespace

int set_up_trainer(const MpiEnv& env, const std::function<Config()>& load,
                   const std::string& resume, std::unique_ptr<Trainer>& trainer,
                   Trainer::Purpose purpose) {
  set_log_timestamps(true);
  Config config;
  int code = run_and_agree(MPI_COMM_WORLD, [&] { config = load(); });
  if (code != 0) return code;
  code = agree_on_config(config, env.rank());
  if (code != 0) return code;
  code = run_and_agree(MPI_COMM_WORLD,
                       [&] { trainer = std::make_unique<Trainer>(config, env, resume); });
  if (code != 0) return code;
  trainer->meet();
  return run_and_agree(MPI_COMM_WORLD, [&] { trainer->prepare(purpose); });
}

Trainer::Trainer(const Config& config, const MpiEnv& env, const std::string& resume)
    : config_(config),
      resume_(resume),
      rank_(env.rank()),
      world_size_(env.size()),
      threads_(compute_threads(config, env)),
      local_rank_(env.local_rank()),
      local_ranks_(env.local_size()) {
  // Opening the data files is watched too: HDF5 can loop forever on a damaged file.
  watchdog_ = std::make_unique<Watchdog>(config_.distributed.timeout_seconds);
  WatchdogScope w(*watchdog_, "start-up (opening the data files and the backend)", 0);
  // Data files and their agreement with each other; the backend.
  const std::vector<std::string> train =
      split_files(config_, config_.data.train, "train", {}, rank_);
  train_file_ = open_split(config_, train, "train", nullptr);
  const DatasetShape& shape = train_file_->shape();
  if (shape.num_classes < 2) {  // nothing to tell apart: every prediction is right
    throw UsageError(config_.source_file + ": data.train: " + train_file_->path() +
                     " has 1 class; a classifier needs 2 or more");
  }
  val_file_ = open_split(config_, split_files(config_, config_.data.val, "val", train, rank_),
                         "val", &shape);
  test_file_ = open_split(config_, split_files(config_, config_.data.test, "test", train, rank_),
                          "test", &shape);
  preprocess_ = input_preprocess(config_, *train_file_);
  num_classes_ = shape.num_classes;
  labels_per_sample_ = shape.labels_per_sample;
  for (int r : config_.cpu_ranks) {
    if (r >= world_size_) {
      throw UsageError(config_.source_file + ": cpu_ranks: " + std::to_string(r) +
                       " is not a rank of the " + std::to_string(world_size_) + " of this job");
    }
  }
  backend_ = make_backend(config_, threads_, rank_, env.local_rank());
  if (config_.distributed.algorithm == AllreduceAlgorithm::kNccl &&
      !backend_->has_device_collectives()) {
    throw UsageError(config_.source_file + ": distributed.algorithm: nccl needs the CUDA backend " +
                     "with NCCL (this run uses the " + backend_->name() + " backend)");
  }
}

void Trainer::meet() {
  comm_ = std::make_unique<Communicator>(MPI_COMM_WORLD,
                                         static_cast<size_t>(config_.distributed.ring_chunk_bytes));
  const double mine = std::string(backend_->name()) == "cuda" ? 1.0 : 0.0;
  std::vector<double> all(static_cast<size_t>(world_size_));
  comm_->allgather(&mine, 1, all.data());
  for (double d : all) devices_.push_back(d != 0.0 ? "cuda" : "cpu");
  device_ranks_ = ranks_on_my_device(*comm_, backend_->device_id());
}

void Trainer::prepare(Purpose purpose) {
  // 1. How the ranks share the batch.
  const DatasetShape& shape = train_file_->shape();
  const bool async = !exchange_strategy(config_.distributed.strategy).decl.lockstep;
  plan_ = async ? plan_for_async(config_, world_size_, shape.n, train_file_->path())
                : plan_for_run(config_, shape.n, train_file_->path(),
                               balance_weights(config_, devices_));
  steps_per_epoch_ = plan_.steps_per_epoch;
  skip_nonfinite_ = config_.train.on_nonfinite == "skip_step";  // allreduce only (the loader)
  const IntList& poisoned = config_.debug.nonfinite_steps;
  nonfinite_steps_.assign(poisoned.begin(), poisoned.end());
  std::sort(nonfinite_steps_.begin(), nonfinite_steps_.end());
  if (config_.debug.slow_rank.rank >= world_size_) {
    throw UsageError(config_.source_file +
                     ": debug.slow_rank.rank: " + std::to_string(config_.debug.slow_rank.rank) +
                     " is not a rank of the " + std::to_string(world_size_) + " of this job");
  }
  // Under balance auto a rank's batch changes from epoch to epoch, up to a cap.
  const int64_t micro_total = plan_.global_batch() / plan_.accumulate;
  const int64_t max_batch = config_.distributed.balance == "auto"
                                ? auto_batch_cap(micro_total, world_size_)
                                : plan_.batch[rank_];

  // 2. Model, optimizer; refused before they allocate when they cannot fit.
  JobShape job;
  job.rank = rank_;
  job.world_size = world_size_;
  job.steps_per_epoch = steps_per_epoch_;
  job.global_batch = update_batch();
  job.one_stored_state = exchange_strategy(config_.distributed.strategy).decl.one_stored_state;
  const Dims input_dims = {shape.c, shape.h, shape.w};
  const auto fits = [&](const ModelSize& size) {
    MemoryNeed need;
    need.model_bytes = model_bytes(size, optimizer_slots(), dtype_size(backend_->act_type()));
    need.data_bytes = data_bytes(max_batch, async);
    if (purpose == Purpose::kTrain) {
      need.checkpoint_bytes = TrainingCheckpoints::reserved_bytes(job, size.params, size.state,
                                                                  saved_optimizer_slots());
    }
    check_memory_fits(config_.source_file, need, std::string(backend_->name()) == "cpu",
                      available_memory(), local_ranks_);
    const int64_t device_free = backend_->device_free_bytes();
    if (device_free >= 0) {  // a GPU, shared by the ranks that compute on it
      check_device_memory_fits(config_.source_file, need.model_bytes, device_free, device_ranks_);
    }
  };
  ModelData data = model_data(shape);
  data.act_type = backend_->act_type();
  std::vector<std::unique_ptr<Layer>> layers =
      build_layers(config_.model, data, input_dims, config_.source_file);
  try {
    model_ = std::make_unique<Model>(*backend_, std::move(layers), input_dims, max_batch, fits);
  } catch (const std::bad_alloc& e) {
    throw UsageError(allocation_refusal(config_.source_file, e));
  }
  model_->init_params(config_.run.seed);
  const std::string one_value = model_->batchnorm_with_one_value(max_batch);
  if (purpose == Purpose::kTrain && !one_value.empty()) {
    throw UsageError(config_.source_file + ": train.batch_size: rank " + std::to_string(rank_) +
                     " trains on batches of 1 sample, at which layer " + one_value +
                     " (batchnorm) normalises one value per channel: its variance is 0, its "
                     "output beta, and nothing before it would train; give each rank a batch "
                     "of at least 2");
  }
  bool init_from_gone = false;  // refused below unless a resume replaces the parameters
  if (!config_.model.init_from.empty() && rank_ == 0) {
    std::error_code ec;
    init_from_gone = !std::filesystem::exists(config_.model.init_from, ec) && !ec;
    // Rank 0 loads; run() broadcasts rank 0's parameters to everyone.
    const std::string key = config_.source_file + ": model.init_from: ";
    try {
      if (!init_from_gone) log_info(load_initial_params(config_.model.init_from, *model_));
    } catch (const UsageError& e) {
      throw UsageError(key + e.what());
    } catch (const Error& e) {
      throw Error(key + e.what(), e.exit_code());
    }
  }
  trainable_ = trainable_ranges(*model_, config_.model.freeze, config_.source_file);
  if (purpose == Purpose::kTrain && trainable_.empty() && rank_ == 0) {
    log_warn(config_.source_file +
             ": model.freeze: every layer with parameters is frozen: training changes none");
  }
  std::vector<ParamRange> updated = trainable_;
  if (async) {
    async_layout_ = std::make_unique<AsyncLayout>(
        async_layout(config_.source_file, world_size_, config_.distributed.parameter_servers,
                     model_->param_count()));
    // A server's optimizer updates its slice; a worker's holds the state checkpoints keep.
    if (async_layout_->is_server(rank_)) {
      updated = ranges_within(trainable_, async_layout_->slices[rank_ - async_layout_->workers]);
    }
  }
  optimizer_ = make_optimizer(*backend_, config_.optimizer, model_->param_count(), updated);
  if (config_.precision == Precision::kFp16) {
    LossScaler::Options o;
    o.initial_scale = static_cast<float>(config_.train.loss_scale.initial);
    o.interval = config_.train.loss_scale.growth_interval;
    scaler_ = std::make_unique<LossScaler>(*backend_, o);
  } else if (skip_nonfinite_) {
    LossScaler::Options o;
    o.fixed = true;
    scaler_ = std::make_unique<LossScaler>(*backend_, o);
  }
  const bool async_deterministic_worker =
      async_layout_ && config_.run.deterministic && !async_layout_->is_server(rank_);
  if (skip_nonfinite_ || async_deterministic_worker) {
    step_stats_ = DeviceArray<LossStats>(*backend_, 1);
    const LossStats zero;
    backend_->copy_to_device(step_stats_.data(), &zero, sizeof(zero));
  }
  if (async_deterministic_worker) {
    taken_flags_ = DeviceArray<float>(*backend_, 2);
    const float flags[2] = {0.0f, 1.0f};  // merge_loss_stats's `skip`: taken, not taken
    backend_->copy_to_device(taken_flags_.data(), flags, sizeof(flags));
  }
  if (config_.optimizer.clip_grad_norm > 0) {
    clipper_ = std::make_unique<GradClipper>(*backend_,
                                             static_cast<float>(config_.optimizer.clip_grad_norm));
  }
  schedule_ = std::make_unique<LrSchedule>(
      config_.optimizer, steps_per_epoch_, config_.train.epochs,
      lr_scale(config_.optimizer, config_.train.batch_size, update_batch()));
  stats_ = DeviceArray<LossStats>(*backend_, 1);
  stager_ = std::make_unique<BatchStager>(*backend_, max_batch, shape.sample_elems(),
                                          shape.h * shape.w, shape.labels_per_sample, preprocess_);
  if (plan_.accumulate > 1) accumulated_ = DeviceArray<float>(*backend_, model_->param_count());

  // 3. Run directory (rank 0): one that cannot be made is bad input, as checkpoint.dir. A
  //    training run takes its lock, and checkpoint.dir's where that is another directory,
  //    before it looks for a checkpoint to resume from.
  if (rank_ == 0) {
    const auto make = [&](const std::string& dir, const char* key) {
      std::error_code ec;
      if (!make_directories(dir, ec)) {
        throw UsageError(config_.source_file + ": " + key + ": " + dir +
                         ": cannot create it: " + ec.message());
      }
    };
    make(config_.run.dir, "run.dir");
    if (purpose == Purpose::kTrain) {
      run_lock_ = std::make_unique<RunLock>(config_.run.dir, "run.dir", config_.source_file);
      // What a run killed while it committed one of these files left (they are written
      // only by the holder of the lock).
      for (const char* name :
           {"config.yaml", "metrics.csv", "summary.json", "STOPPED", "power.csv"}) {
        const std::string path = config_.run.dir + "/" + name;
        remove_stale_temporaries(path);
        // Found now, before anything of an earlier run is changed (a link is replaced).
        std::error_code ec;
        const auto type = std::filesystem::symlink_status(path, ec).type();
        if (!ec && type != std::filesystem::file_type::not_found &&
            type != std::filesystem::file_type::regular &&
            type != std::filesystem::file_type::symlink) {
          throw UsageError(config_.source_file + ": run.dir: " + path +
                           " is not a file (a directory?); remove it");
        }
      }
      const std::string& dir = config_.checkpoint.dir;
      make(dir, "checkpoint.dir");
      std::error_code ec;
      if (!std::filesystem::equivalent(dir, config_.run.dir, ec)) {
        checkpoint_lock_ = std::make_unique<RunLock>(dir, "checkpoint.dir", config_.source_file);
      }
    }
  }

  // 4. Checkpoints: what to resume from. A fixed scaler has nothing to keep.
  checkpoints_ = std::make_unique<TrainingCheckpoints>(
      config_, *model_, *optimizer_, scaler_ && !scaler_->fixed() ? scaler_.get() : nullptr, job);
  checkpoints_->keep_array(kEpochSoFarArray, &epoch_so_far_);
  checkpoints_->keep_array(kEnergySoFarArray, &energy_so_far_);
  tally_scratch_.assign(std::max(kTallyFigures, kEnergyFigures) * static_cast<size_t>(world_size_),
                        0.0);
  if (config_.distributed.balance == "auto") {
    meter_ = std::make_unique<BalanceMeter>();
    batches_.assign(plan_.batch.begin(), plan_.batch.end());
    checkpoints_->keep_array(kBatchesArray, &batches_);
  }
  {
    // Rank 0 reads the candidates (HDF5 loops on some damaged files; a file system may
    // stall) while the other ranks wait for the agreement on set-up.
    WatchdogScope w(*watchdog_, "start-up (reading the checkpoint to resume from)", 0);
    checkpoints_->prepare_resume(resume_, purpose == Purpose::kTrain);
  }
  // A run resumed after model.init_from's checkpoint was deleted (pruned by the run that
  // wrote it) goes on: its parameters come from its own checkpoint.
  if (init_from_gone && !checkpoints_->resuming()) {
    throw UsageError(config_.source_file + ": model.init_from: " + config_.model.init_from +
                     ": no such checkpoint");
  }
  choose_step_graphs();
}

int Trainer::saved_optimizer_slots() const {
  const bool adam = config_.optimizer.name != "sgd";
  return adam ? 2 : (config_.optimizer.momentum > 0 ? 1 : 0);
}

int Trainer::optimizer_slots() const {
  // One more for the exchange's buffers, one for accumulated gradients.
  return saved_optimizer_slots() + 1 + (plan_.accumulate > 1 ? 1 : 0);
}

double Trainer::data_bytes(int64_t max_batch, bool async) const {
  const double cache = static_cast<double>(config_.data.cache_mb) * 1024.0 * 1024.0;
  // An async parameter server (the last ranks) reads no training rows (make_train_loader).
  const bool trains = !async || rank_ < world_size_ - config_.distributed.parameter_servers;
  // This rank's rows of a file, as its loader will take them (make_train_loader,
  // create_loaders).
  const auto cached = [&](const DataSource* file, bool training) {
    if (file == nullptr) return 0.0;
    const DatasetShape& s = file->shape();
    const int64_t rows = !training ? shard_for_rank(s.n, rank_, world_size_).count
                         : async   ? s.n
                                   : plan_.shards[rank_].count;
    const double bytes = static_cast<double>(rows) * static_cast<double>(s.row_bytes());
    // Above data.cache_mb the rows are read per batch (Loader); the shuffled order of the
    // rows (8 bytes each) is held either way.
    return (bytes <= cache ? bytes : 0.0) + 8.0 * static_cast<double>(rows);
  };
  // Each loader's prefetch queue holds depth + 1 batches of float32 samples and int32 labels
  // whatever the stored type (create_loaders: the validation and test loaders' batches at
  // most their shard), and the batch being staged is one more. Counted as stored bytes,
  // the check let through queues 12 times larger (uint8 data, three loaders).
  const DatasetShape& shape = train_file_->shape();
  const double sample_bytes =
      4.0 * static_cast<double>(shape.sample_elems() + shape.labels_per_sample);
  const auto queue = [&](int64_t batch) {
    return static_cast<double>(batch) * sample_bytes * (config_.data.prefetch_depth + 1.0);
  };
  double buffers = trains ? queue(max_batch) + static_cast<double>(max_batch) * sample_bytes : 0.0;
  for (const DataSource* file : {val_file_.get(), test_file_.get()}) {
    if (file != nullptr) buffers += queue(eval_batch(max_batch, *file));
  }
  return buffers + (trains ? cached(train_file_.get(), true) : 0.0) +
         cached(val_file_.get(), false) + cached(test_file_.get(), false);
}

int64_t Trainer::eval_batch(int64_t batch, const DataSource& file) const {
  return std::clamp<int64_t>(shard_for_rank(file.shape().n, rank_, world_size_).count, 1, batch);
}

LoaderOptions Trainer::loader_options() const {
  LoaderOptions o;
  o.batch = plan_.batch[rank_];
  o.batches_per_epoch = steps_per_epoch_ * plan_.accumulate;
  o.epochs = config_.train.epochs;
  o.shuffle = config_.data.shuffle;
  o.seed = config_.run.seed;
  o.rank = rank_;
  o.threads = config_.data.prefetch_threads;
  o.depth = config_.data.prefetch_depth;
  o.cache_bytes = config_.data.cache_mb << 20;
  o.hooks = stager_->hooks();
  o.raw = stager_->wants_raw();
  o.preprocess = preprocess_;
  return o;
}

void Trainer::plan_restored_batches() {
  const int64_t micro_total = plan_.global_batch() / plan_.accumulate;
  const int64_t cap = auto_batch_cap(micro_total, world_size_);
  std::vector<int64_t> batches(batches_.begin(), batches_.end());
  int64_t sum = 0;
  bool fits = batches.size() == static_cast<size_t>(world_size_);
  for (int64_t b : batches) {
    fits = fits && b >= 1 && b <= cap;
    sum += b;
  }
  if (fits && sum == micro_total) {
    plan_ = plan_from_batches(train_file_->shape().n, batches, plan_.accumulate);
    plan_.steps_per_epoch = steps_per_epoch_;
  }
  batches_.assign(plan_.batch.begin(), plan_.batch.end());
}

void Trainer::rebalance(int64_t start_step) {
  const double mine = meter_->rate();
  meter_->reset();
  std::vector<double> rates(static_cast<size_t>(world_size_));
  {
    WatchdogScope w(*watchdog_, "balance measurement", start_step);
    comm_->allgather(&mine, 1, rates.data());
  }
  // A rank that timed nothing (an epoch resumed near its end) leaves the plan as it is.
  if (*std::min_element(rates.begin(), rates.end()) <= 0) return;
  const int64_t micro_total = plan_.global_batch() / plan_.accumulate;
  const std::vector<int64_t> batches =
      balanced_batches(plan_.batch, rates, auto_batch_cap(micro_total, world_size_));
  if (batches == plan_.batch) return;
  std::string line = "balance after epoch " + std::to_string(start_step / steps_per_epoch_) +
                     ": samples/s per rank";
  for (double r : rates) (line += ' ') += std::to_string(static_cast<int64_t>(r));
  line += "; next epoch's batches";
  for (int64_t b : batches) (line += ' ') += std::to_string(b);
  log_info(line);
  plan_ = plan_from_batches(train_file_->shape().n, batches, plan_.accumulate);
  plan_.steps_per_epoch = steps_per_epoch_;
  batches_.assign(plan_.batch.begin(), plan_.batch.end());
  // The new loader reads data.train through HDF5, which the checkpoint writer's thread may be
  // using: a library built without thread safety must not be called from both at once.
  if (!h5_threadsafe()) {
    WatchdogScope w(*watchdog_, "checkpoint write before data.train is read again", start_step);
    checkpoints_->wait_idle();
  }
  make_train_loader(start_step);
}

void Trainer::make_train_loader(int64_t start_step) {
  train_loader_.reset();  // its reader threads stop before the new ones start
  LoaderOptions o = loader_options();
  if (async_layout_) {
    // Servers train nothing; a worker may be handed any batch of the whole set, in the
    // same order on every worker.
    if (async_layout_->is_server(rank_)) return;
    o.on_request = true;
    o.rank = 0;
    train_loader_ = std::make_unique<Loader>(*train_file_, Shard{0, train_file_->shape().n}, o);
    return;
  }
  o.first_seq = start_step * plan_.accumulate;
  train_loader_ = std::make_unique<Loader>(*train_file_, plan_.shards[rank_], o);
}

void Trainer::create_loaders(int64_t start_step, bool training) {
  if (training) make_train_loader(start_step);
  LoaderOptions eval_opts = loader_options();
  const int64_t batch = eval_opts.batch;
  eval_opts.batches_per_epoch = 0;  // every row, last batch partial
  eval_opts.first_seq = 0;
  eval_opts.shuffle = false;
  eval_opts.threads = 1;
  eval_opts.preprocess.flip = false;  // evaluation normalises but does not augment
  eval_opts.preprocess.crop_padding = 0;
  if (val_file_) {
    int passes = training ? 0 : 1;
    for (int64_t e = start_step / steps_per_epoch_ + 1; training && e <= config_.train.epochs;
         ++e) {
      if (e % config_.train.val_every == 0 || e == config_.train.epochs) ++passes;
    }
    eval_opts.epochs = passes;
    eval_opts.batch = eval_batch(batch, *val_file_);
    val_loader_ = std::make_unique<Loader>(
        *val_file_, shard_for_rank(val_file_->shape().n, rank_, world_size_), eval_opts);
  }
  if (test_file_) {
    eval_opts.epochs = 1;
    eval_opts.batch = eval_batch(batch, *test_file_);
    test_loader_ = std::make_unique<Loader>(
        *test_file_, shard_for_rank(test_file_->shape().n, rank_, world_size_), eval_opts);
  }
}

void Trainer::choose_step_graphs() {
  const std::string& mode = config_.train.cuda_graph;
  if (mode == "off") return;
  const auto& layers = model_->layers();
  std::string why;
  if (!backend_->can_capture()) {
    why = std::string("the ") + backend_->name() + " backend records no graphs";
  } else if (plan_.accumulate != 1) {
    why = "train.accumulate_steps is " + std::to_string(plan_.accumulate);
  } else if (std::any_of(layers.begin(), layers.end(),
                         [](const auto& l) { return l->draws_random(); })) {
    why = "a dropout layer draws new masks every step";
  } else if (!nonfinite_steps_.empty()) {
    why = "debug.nonfinite_steps changes chosen steps";
  }
  graphs_allowed_ = why.empty();
  if (graphs_allowed_) return;
  if (mode == "on") throw UsageError(config_.source_file + ": train.cuda_graph: on, but " + why);
  if (backend_->can_capture()) log_info("train.cuda_graph auto: steps run eagerly: " + why);
}

bool Trainer::already_complete() {
  const int64_t total = static_cast<int64_t>(config_.train.epochs) * steps_per_epoch_;
  const std::string summary_path = config_.run.dir + "/summary.json";
  int complete = 0;
  if (rank_ == 0) {
    std::error_code ec;
    complete = global_step_ >= total && std::filesystem::exists(summary_path, ec) ? 1 : 0;
  }
  comm_->broadcast(&complete, sizeof(complete), 0);
  if (complete == 0) return false;
  if (rank_ == 0) {  // an old one: this start ends in 0, which launch.sh reads with it
    std::error_code ec;
    std::filesystem::remove(stopped_marker(), ec);
  }
  const int64_t epoch = global_step_ / steps_per_epoch_;
  log_info("the run is already complete: its final checkpoint is at epoch " +
           std::to_string(epoch) +
           (epoch > config_.train.epochs ? ", past train.epochs (" : " of ") +
           std::to_string(config_.train.epochs) + (epoch > config_.train.epochs ? ")" : "") +
           " (results in " + summary_path +
           "); nothing to train. Raise train.epochs to train further, or give another run.dir "
           "to train again");
  return true;
}

bool Trainer::params_finite() {
  double bad = 0.0;
  model_->visit_params([&](const float* p, size_t n) {
    if (!std::all_of(p, p + n, [](float v) { return std::isfinite(v); })) bad = 1.0;
  });
  if (world_size_ > 1) {
    WatchdogScope w(*watchdog_, "parameter check at the epoch's end", global_step_);
    comm_->allreduce_max(&bad, 1);
  }
  return bad == 0.0;
}

}  // namespace hpctrain

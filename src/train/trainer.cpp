// The epoch loop. One training step on one rank (DESIGN.md):
//   1. pop the next prefetched batch (its wait is data_wait),
//   2. forward, softmax cross-entropy, backward on the rank's Backend,
//   3. exchange: all-reduce the gradient arena (strategy allreduce), or average
//      the parameters every K steps (strategy average),
//   4. SGD step with the scheduled learning rate.
// Nothing in the step allocates, synchronises the device or logs, except the
// rank-0 progress line every few seconds.
#include "train/trainer.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "backend/cpu_backend.hpp"
#include "comm/mpi_env.hpp"
#include "comm/param_average.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "nn/presets.hpp"
#include "train/progress.hpp"

namespace hpctrain {
namespace {

std::unique_ptr<DatasetFile> open_split(const std::string& path, const char* key,
                                        const DatasetShape* train) {
  if (path.empty()) return nullptr;
  auto file = std::make_unique<DatasetFile>(path);
  if (train != nullptr) {
    const DatasetShape& s = file->shape();
    if (s.c != train->c || s.h != train->h || s.w != train->w) {
      throw UsageError(path + ": data." + key + " samples are " + std::to_string(s.c) + "x" +
                       std::to_string(s.h) + "x" + std::to_string(s.w) +
                       ", but data.train samples are " + std::to_string(train->c) + "x" +
                       std::to_string(train->h) + "x" + std::to_string(train->w));
    }
    if (s.num_classes > train->num_classes) {
      throw UsageError(path + ": data." + key + " has " + std::to_string(s.num_classes) +
                       " classes, more than data.train's " + std::to_string(train->num_classes));
    }
  }
  return file;
}

int compute_threads(const Config& config, const MpiEnv& env) {
  if (config.run.threads > 0) return config.run.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / env.local_size());
}

std::unique_ptr<Backend> make_backend(Device device, int threads) {
  if (device == Device::kCuda) {
    throw UsageError("device: cuda was requested, but this build of hpctrain has no CUDA backend");
  }
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace

Trainer::Trainer(const Config& config, const MpiEnv& env)
    : config_(config),
      rank_(env.rank()),
      world_size_(env.size()),
      threads_(compute_threads(config, env)) {
  // 1. Data files and their agreement with each other.
  train_file_ = open_split(config_.data.train, "train", nullptr);
  const DatasetShape& shape = train_file_->shape();
  val_file_ = open_split(config_.data.val, "val", &shape);
  test_file_ = open_split(config_.data.test, "test", &shape);
  num_classes_ = shape.num_classes;
  if (shape.n < world_size_) {
    throw UsageError(config_.data.train + ": " + std::to_string(shape.n) +
                     " samples cannot be shared by " + std::to_string(world_size_) + " ranks");
  }
  const int64_t batch = config_.train.batch_size;
  steps_per_epoch_ = steps_per_epoch(shape.n, world_size_, batch);
  if (steps_per_epoch_ < 1) {
    throw UsageError(config_.source_file + ": train.batch_size: " + std::to_string(batch) +
                     " is larger than a rank's shard (" + std::to_string(shape.n / world_size_) +
                     " samples of " + config_.data.train + ")");
  }

  // 2. Backend, model, optimizer.
  backend_ = make_backend(config_.device, threads_);
  const Dims input_dims = {shape.c, shape.h, shape.w};
  model_ = std::make_unique<Model>(*backend_, build_layers(config_.model, num_classes_), input_dims,
                                   batch);
  model_->init_params(config_.run.seed);
  sgd_ = std::make_unique<Sgd>(*backend_, config_.optimizer, model_->param_count());
  schedule_ =
      std::make_unique<LrSchedule>(config_.optimizer, steps_per_epoch_, config_.train.epochs);
  stats_ = DeviceArray<LossStats>(*backend_, 1);

  // 3. Loaders: each rank reads only its shard.
  LoaderOptions train_opts;
  train_opts.batch = batch;
  train_opts.batches_per_epoch = steps_per_epoch_;
  train_opts.epochs = config_.train.epochs;
  train_opts.shuffle = config_.data.shuffle;
  train_opts.seed = config_.run.seed;
  train_opts.rank = rank_;
  train_opts.threads = config_.data.prefetch_threads;
  train_opts.depth = config_.data.prefetch_depth;
  train_loader_ = std::make_unique<Loader>(*train_file_,
                                           shard_for_rank(shape.n, rank_, world_size_), train_opts);
  LoaderOptions eval_opts = train_opts;
  eval_opts.batches_per_epoch = 0;  // every row, last batch partial
  eval_opts.shuffle = false;
  eval_opts.threads = 1;
  if (val_file_) {
    int passes = 0;
    for (int e = 1; e <= config_.train.epochs; ++e) {
      if (e % config_.train.val_every == 0 || e == config_.train.epochs) ++passes;
    }
    eval_opts.epochs = passes;
    val_loader_ = std::make_unique<Loader>(
        *val_file_, shard_for_rank(val_file_->shape().n, rank_, world_size_), eval_opts);
  }
  if (test_file_) {
    eval_opts.epochs = 1;
    test_loader_ = std::make_unique<Loader>(
        *test_file_, shard_for_rank(test_file_->shape().n, rank_, world_size_), eval_opts);
  }

  // 4. Run directory (rank 0).
  if (rank_ == 0) {
    make_directories(config_.run.dir);
    write_file_atomic(config_.run.dir + "/config.yaml", config_to_yaml(config_));
    metrics_csv_ = std::make_unique<MetricsCsv>(config_.run.dir + "/metrics.csv");
  }
}

Trainer::~Trainer() = default;

void Trainer::exchange_gradients() {
  if (config_.distributed.strategy == Strategy::kAllreduce) {
    comm_->allreduce_sum(model_->grads(), model_->param_count(), config_.distributed.algorithm);
  }
}

void Trainer::train_epoch(int epoch, EpochMetrics& m) {
  const bool allreduce = config_.distributed.strategy == Strategy::kAllreduce;
  const int every = config_.distributed.every;
  const int64_t batch = config_.train.batch_size;
  // Summed over ranks, the gradients of per-rank means scaled by 1/N are the mean
  // over the global batch: N ranks with batch b train like one rank with N*b.
  const float grad_scale = 1.0f / static_cast<float>(batch * (allreduce ? world_size_ : 1));
  const int classes = num_classes_;
  Progress progress(rank_ == 0, config_.train.progress_seconds);
  LossStats zero;
  backend_->copy_to_device(stats_.data(), &zero, sizeof(zero));
  comm_->reset_comm_seconds();
  const double wait0 = train_loader_->wait_seconds();
  const double t0 = now_seconds();
  double lr = 0.0;

  for (int64_t step = 0; step < steps_per_epoch_; ++step) {
    const BatchBuffer& b = train_loader_->next();
    const Tensor& logits = model_->forward(b.images.data(), b.size, /*training=*/true);
    backend_->softmax_xent(logits.data, b.labels.data(), static_cast<int>(b.size), classes,
                           grad_scale, model_->dlogits(), stats_.data());
    model_->backward();
    exchange_gradients();
    lr = schedule_->at(global_step_);
    sgd_->step(model_->params(), model_->grads(), lr);
    ++global_step_;
    if (!allreduce && global_step_ % every == 0) {
      average_parameters(*comm_, *backend_, model_->params(), model_->param_count());
    }
    if (progress.due(now_seconds())) {
      LossStats s;
      backend_->copy_to_host(&s, stats_.data(), sizeof(s));
      const double now = now_seconds();
      progress.print(epoch, config_.train.epochs, step + 1, steps_per_epoch_, s.loss_sum / s.count,
                     s.correct / s.count,
                     static_cast<double>((step + 1) * batch * world_size_) / (now - t0), now);
    }
  }
  // Ranks must hold the same model before evaluating.
  if (!allreduce && global_step_ % every != 0) {
    average_parameters(*comm_, *backend_, model_->params(), model_->param_count());
  }
  backend_->synchronize();
  double times[3] = {now_seconds() - t0, train_loader_->wait_seconds() - wait0,
                     comm_->comm_seconds()};
  comm_->allreduce_max(times, 3);  // the slowest rank sets the pace

  LossStats s;
  backend_->copy_to_host(&s, stats_.data(), sizeof(s));
  double sums[3] = {s.loss_sum, s.correct, s.count};
  comm_->allreduce_sum(sums, 3);
  m.epoch = epoch;
  m.train_loss = sums[0] / sums[2];
  m.train_accuracy = sums[1] / sums[2];
  m.lr = lr;
  m.time_train_s = times[0];
  m.data_wait_s = times[1];
  m.comm_s = times[2];
  m.samples_per_second = sums[2] / times[0];
}

Trainer::EvalResult Trainer::evaluate(Loader& loader) {
  LossStats zero;
  backend_->copy_to_device(stats_.data(), &zero, sizeof(zero));
  for (int64_t i = 0; i < loader.batches_per_epoch(); ++i) {
    const BatchBuffer& b = loader.next();
    const Tensor& logits = model_->forward(b.images.data(), b.size, /*training=*/false);
    backend_->softmax_xent(logits.data, b.labels.data(), static_cast<int>(b.size), num_classes_,
                           0.0f, nullptr, stats_.data());
  }
  LossStats s;
  backend_->copy_to_host(&s, stats_.data(), sizeof(s));
  double sums[3] = {s.loss_sum, s.correct, s.count};
  comm_->allreduce_sum(sums, 3);
  EvalResult r;
  if (sums[2] > 0) {
    r.loss = sums[0] / sums[2];
    r.accuracy = sums[1] / sums[2];
  }
  return r;
}

int Trainer::run() {
  const double run_t0 = now_seconds();
  comm_ = std::make_unique<Communicator>(MPI_COMM_WORLD,
                                         static_cast<size_t>(config_.distributed.ring_chunk_bytes));
  // Every rank initialised identically from the seed; broadcasting rank 0's
  // parameters makes that a guarantee rather than an assumption.
  comm_->broadcast(model_->params(), model_->param_count() * sizeof(float), 0);

  log_info("hpctrain: " + std::to_string(world_size_) + " rank(s) x " + std::to_string(threads_) +
           " thread(s), backend " + backend_->name() + ", " +
           std::to_string(model_->param_count()) + " parameters, " +
           std::to_string(steps_per_epoch_) + " steps/epoch, global batch " +
           std::to_string(config_.train.batch_size * world_size_));

  RunSummary summary;
  double total_train = 0, total_val = 0, total_wait = 0, total_comm = 0, total_samples = 0;
  for (int epoch = 1; epoch <= config_.train.epochs; ++epoch) {
    EpochMetrics m;
    train_epoch(epoch, m);
    total_train += m.time_train_s;
    total_wait += m.data_wait_s;
    total_comm += m.comm_s;
    total_samples += m.samples_per_second * m.time_train_s;
    if (val_loader_ && (epoch % config_.train.val_every == 0 || epoch == config_.train.epochs)) {
      const double t0 = now_seconds();
      const EvalResult v = evaluate(*val_loader_);
      m.time_val_s = now_seconds() - t0;
      total_val += m.time_val_s;
      m.val_loss = v.loss;
      m.val_accuracy = v.accuracy;
      summary.val_loss = v.loss;
      summary.val_accuracy = v.accuracy;
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "epoch %d/%d  train loss %.4f acc %.4f  val loss %s acc %s  %.2fs  %.0f "
                  "samples/s  data wait %.1f%%  comm %.1f%%",
                  epoch, config_.train.epochs, m.train_loss, m.train_accuracy,
                  m.val_loss ? std::to_string(*m.val_loss).substr(0, 6).c_str() : "-",
                  m.val_accuracy ? std::to_string(*m.val_accuracy).substr(0, 6).c_str() : "-",
                  m.time_train_s, m.samples_per_second, 100.0 * m.data_wait_s / m.time_train_s,
                  100.0 * m.comm_s / m.time_train_s);
    log_info(line);
    if (metrics_csv_) metrics_csv_->append(m);
    summary.final_train_loss = m.train_loss;
    summary.final_train_accuracy = m.train_accuracy;
    summary.epochs_completed = epoch;
  }
  if (test_loader_) {
    const double t0 = now_seconds();
    const EvalResult t = evaluate(*test_loader_);
    summary.time_test_s = now_seconds() - t0;
    summary.test_loss = t.loss;
    summary.test_accuracy = t.accuracy;
    char line[128];
    std::snprintf(line, sizeof(line), "test loss %.4f acc %.4f", t.loss, t.accuracy);
    log_info(line);
  }

  summary.run_name = config_.run.name;
  summary.backend = backend_->name();
  summary.strategy = to_string(config_.distributed.strategy);
  summary.algorithm = config_.distributed.strategy == Strategy::kAllreduce
                          ? to_string(config_.distributed.algorithm)
                          : "reduce+bcast";
  summary.world_size = world_size_;
  summary.threads_per_rank = threads_;
  summary.global_batch = static_cast<int64_t>(config_.train.batch_size) * world_size_;
  summary.param_count = static_cast<int64_t>(model_->param_count());
  summary.samples_per_second = total_train > 0 ? total_samples / total_train : 0;
  summary.time_train_s = total_train;
  summary.time_val_s = total_val;
  summary.data_wait_fraction = total_train > 0 ? total_wait / total_train : 0;
  summary.comm_fraction = total_train > 0 ? total_comm / total_train : 0;
  summary.params_sha256 = model_->params_sha256();
  summary.time_total_s = now_seconds() - run_t0;
  if (rank_ == 0) write_outputs(summary);
  return kExitOk;
}

void Trainer::write_outputs(const RunSummary& summary) {
  const std::string path = config_.run.dir + "/summary.json";
  write_file_atomic(path, summary_to_json(summary));
  log_info("wrote " + path + " (params_sha256 " + summary.params_sha256.substr(0, 16) + "...)");
}

}  // namespace hpctrain

// Evaluation passes: validation after an epoch (which a stop signal may cut short), the
// test pass, and `hpctrain eval` of a checkpoint.
#include <cstdio>

#include "comm/agreement.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "train/progress.hpp"
#include "train/signals.hpp"
#include "train/trainer.hpp"

namespace hpctrain {

Trainer::EvalResult Trainer::evaluate(Loader& loader, const char* phase, bool stoppable) {
  LossStats zero;
  backend_->copy_to_device(stats_.data(), &zero, sizeof(zero));
  Progress progress(rank_ == 0, config_.train.progress_seconds);
  const int64_t batches = loader.batches_per_epoch();
  const double start = now_seconds();
  bool cut = false, watching = stoppable;
  for (int64_t i = 0; i < batches; ++i) {
    // After a stop signal this rank's pass ends, unless the rest of it (at its rate so far)
    // takes at most train.stop_validation_seconds; the other ranks learn of it below.
    if (watching && stop_signal() != 0) {
      const double limit = config_.train.stop_validation_seconds;
      const double rest = i > 0 ? (now_seconds() - start) / static_cast<double>(i) *
                                      static_cast<double>(batches - i)
                                : limit + 1.0;
      if (rest > limit) {
        cut = true;
        break;
      }
      watching = false;  // finishing
    }
    WatchdogScope watched(*watchdog_, "evaluation batch (data and compute)", global_step_);
    if (const double now = now_seconds(); progress.due(now)) progress.print(phase, i, batches, now);
    const BatchBuffer& b = loader.next();
    const BatchStager::Input in = stager_->stage(loader, b);
    const Tensor& logits = model_->forward(in.images, b.size, /*training=*/false);
    backend_->softmax_xent(logits.data, in.labels, static_cast<int>(b.size * labels_per_sample_),
                           num_classes_, 0.0f, nullptr, nullptr, stats_.data());
    stager_->release();
  }
  LossStats s;
  backend_->copy_to_host(&s, stats_.data(), sizeof(s));
  // [3]: ranks whose pass a stop signal cut short; [4]: ranks that got one (a stoppable
  // pass only).
  double sums[5] = {s.loss_sum, s.correct, s.count, cut ? 1.0 : 0.0,
                    stoppable && stop_signal() != 0 ? 1.0 : 0.0};
  {
    WatchdogScope w(*watchdog_, "evaluation reduction", global_step_);
    comm_->allreduce_sum(sums, 5);
  }
  EvalResult r;
  if (sums[2] > 0) {
    r.loss = sums[0] / sums[2];
    r.accuracy = sums[1] / sums[2];
  }
  r.cut_short = sums[3] > 0;
  r.stop = sums[4] > 0;
  return r;
}

int Trainer::evaluate_checkpoint() {
  int code = 0;
  std::optional<int64_t> step;
  {
    WatchdogScope w(*watchdog_, "start-up (checkpoint and data loading)", 0);
    step = checkpoints_->restore(*comm_);
    code = run_and_agree(comm_->get(), [&] {
      if (!step) {
        throw UsageError("eval: no valid checkpoint in " + config_.checkpoint.dir +
                         " (checkpoint.dir of " + config_.source_file + ")");
      }
      create_loaders(checkpoints_->start_step(), /*training=*/false);
    });
  }
  if (code != 0) return code;
  std::string json = "{\n  \"step\": " + std::to_string(*step) +
                     ",\n  \"world_size\": " + std::to_string(world_size_);
  auto report = [&](const char* split, Loader& loader) {
    const EvalResult r = evaluate(loader, split);
    char line[160];
    std::snprintf(line, sizeof(line), "%s loss %.4f acc %.4f", split, r.loss, r.accuracy);
    log_info(line);
    json += ",\n  \"" + std::string(split) + "_loss\": " + json_number(r.loss) + ",\n  \"" + split +
            "_accuracy\": " + json_number(r.accuracy);
  };
  if (val_loader_) report("val", *val_loader_);
  if (test_loader_) report("test", *test_loader_);
  json += ",\n  \"params_sha256\": \"" + model_->params_sha256() + "\"\n}\n";
  if (rank_ == 0) {
    remove_stale_temporaries(config_.run.dir + "/eval.json");  // of a killed eval
    write_file_atomic(config_.run.dir + "/eval.json", json);
  }
  return kExitOk;
}

}  // namespace hpctrain

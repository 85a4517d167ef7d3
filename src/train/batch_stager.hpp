// Where a batch's images and labels are read from by the backend. For host memory (the
// CPU backend) with float32 activations that is the loader's buffer itself; with 16-bit
// activations the loaders keep the stored bytes and stage() decodes them into the
// stager's own buffer. For a device backend the loaders keep the stored bytes in pinned
// buffers (hooks(), LoaderOptions::raw), and stage() uploads them into the next of two
// device slots on the backend's copy stream, beside the computation, then decodes them
// there, normalising them where the loader left that to it; release() follows the batch's
// last use and must come before the loader's next pop, which may refill the host buffer.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "data/loader.hpp"

namespace hpctrain {

class BatchStager {
 public:
  struct Input {
    const void* images;  // activations (Backend::act_type())
    const int32_t* labels;
  };

  // Device slots for batches of up to `max_batch` samples of `sample_elems` values in planes
  // of `plane` values and `labels_per_sample` labels; `preprocess`'s normalisation for the
  // raw batches of loaders that leave it to the backend.
  BatchStager(Backend& backend, int64_t max_batch, int64_t sample_elems, int64_t plane,
              int64_t labels_per_sample, const Preprocess& preprocess);

  // For LoaderOptions: pins a device backend's batch buffers; {} for host memory.
  BufferHooks hooks();
  // Whether loaders should keep stored bytes (LoaderOptions::raw).
  bool wants_raw() const { return !passes_through(); }

  Input stage(const Loader& loader, const BatchBuffer& b);
  void release();

 private:
  // Host memory and float32 activations: the loader's floats are the model's input.
  bool passes_through() const {
    return backend_.host_accessible() && backend_.act_type() == DType::kF32;
  }

  Backend& backend_;
  DeviceArray<uint8_t> raw_[2];       // stored bytes as uploaded, before decode_input
  DeviceArray<std::byte> images_[2];  // decoded (only images_[0] for host memory)
  DeviceArray<int32_t> labels_[2];
  int64_t labels_per_sample_;
  DeviceArray<float> mean_, inv_std_;  // of the normalisation, in the backend's memory
  InputNorm norm_;                     // over them; mean null without one
  int slot_ = 0;                       // the slot of the batch in use
};

}  // namespace hpctrain

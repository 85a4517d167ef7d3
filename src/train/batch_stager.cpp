#include "train/batch_stager.hpp"

namespace hpctrain {

BatchStager::BatchStager(Backend& backend, int64_t max_batch, int64_t sample_elems, int64_t plane,
                         int64_t labels_per_sample, const Preprocess& preprocess)
    : backend_(backend), labels_per_sample_(labels_per_sample) {
  if (passes_through()) return;
  if (!preprocess.mean.empty()) {
    const size_t c = preprocess.mean.size();
    mean_ = DeviceArray<float>(backend_, c);
    inv_std_ = DeviceArray<float>(backend_, c);
    backend_.copy_to_device(mean_.data(), preprocess.mean.data(), c * sizeof(float));
    backend_.copy_to_device(inv_std_.data(), preprocess.inv_std.data(), c * sizeof(float));
    norm_ = {mean_.data(), inv_std_.data(), static_cast<int>(c), static_cast<size_t>(plane)};
  }
  const size_t elems = static_cast<size_t>(max_batch * sample_elems);
  const size_t act_bytes = elems * dtype_size(backend_.act_type());
  if (backend_.host_accessible()) {
    images_[0] = DeviceArray<std::byte>(backend_, act_bytes);
    return;
  }
  for (int slot = 0; slot < 2; ++slot) {
    raw_[slot] = DeviceArray<uint8_t>(backend_, elems * sizeof(float));  // any stored type
    images_[slot] = DeviceArray<std::byte>(backend_, act_bytes);
    labels_[slot] =
        DeviceArray<int32_t>(backend_, static_cast<size_t>(max_batch * labels_per_sample));
  }
}

BufferHooks BatchStager::hooks() {
  if (backend_.host_accessible()) return {};
  Backend* b = &backend_;
  return {[b](void* p, size_t bytes) { b->pin_host(p, bytes); },
          [b](void* p) { b->unpin_host(p); }};
}

BatchStager::Input BatchStager::stage(const Loader& loader, const BatchBuffer& b) {
  if (passes_through()) return {b.images.data(), b.labels.data()};
  const DatasetShape& shape = loader.shape();
  const size_t n = static_cast<size_t>(b.size * shape.sample_elems());
  const InputNorm norm = loader.leaves_normalization() ? norm_ : InputNorm{};
  if (backend_.host_accessible()) {
    backend_.decode_input(b.images.data(), shape.type, n, norm, images_[0].data());
    return {images_[0].data(), b.labels.data()};
  }
  const int slot = slot_ ^= 1;
  backend_.upload(slot, raw_[slot].data(), b.images.data(),
                  static_cast<size_t>(b.size) * shape.sample_bytes());
  backend_.upload(slot, labels_[slot].data(), b.labels.data(),
                  static_cast<size_t>(b.size * labels_per_sample_) * sizeof(int32_t));
  backend_.uploads_ready();
  backend_.decode_input(raw_[slot].data(), shape.type, n, norm, images_[slot].data());
  return {images_[slot].data(), labels_[slot].data()};
}

void BatchStager::release() {
  if (backend_.host_accessible()) return;
  backend_.input_consumed(slot_);
  backend_.wait_uploads();
}

}  // namespace hpctrain

// A backend that records step graphs the way the CUDA backend records CUDA graphs, around
// another backend (the CPU's): between begin_capture() and end_capture() each operation
// is kept as a call with its pointers and arguments, not run; replay(id) runs the calls
// again in order. What a CUDA graph cannot hold (allocations, copies to or from host
// memory, waits for the device, input uploads) throws while recording, as it fails a
// CUDA capture. It lets the CPU tests check what the trainer records and replays
// (train.cuda_graph): a step that bakes in a value that changes from step to step gives
// other parameters than eager steps. HPCTRAIN_RECORD_CPU=1 selects it
// (train/backend_choice.cpp).
#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace hpctrain {

// With refuse_at > 0, the refuse_at-th operation of every recording is refused as one a CUDA
// graph cannot hold: tests of what follows a failed recording
// (HPCTRAIN_RECORD_CPU_REFUSE=N).
std::unique_ptr<Backend> make_recording_backend(std::unique_ptr<Backend> inner, int refuse_at = 0);

}  // namespace hpctrain

// The messages between asynchronous workers and parameter servers (train/async_sgd.hpp):
// a fixed header and a payload of one server's slice of floats, sent with non-blocking
// point-to-point calls, tagged by the server's index. Waiting polls, yielding and then
// sleeping when it lasts, so an idle rank leaves its core to the others.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace hpctrain::async_wire {

inline constexpr int kToServerTag = 7100;  // + the server's index
inline constexpr int kToWorkerTag = 7300;  // + the server's index

// What a worker sends.
enum class Kind : int64_t { kBatch = 1, kFlush = 2 };
inline constexpr int64_t kHasGrad = 1;         // the payload is the sum of gradients
inline constexpr int64_t kWantPull = 2;        // send me your slice
inline constexpr int64_t kStopSeen = 4;        // deterministic: a stop signal
inline constexpr int64_t kCheckpointSeen = 8;  // deterministic: rank 0's clock
// What a server answers.
inline constexpr int64_t kParams = 1;  // the payload is the slice's parameters
inline constexpr int64_t kTaken = 2;   // deterministic: the batch counts as trained
inline constexpr int64_t kEnd = 4;     // deterministic: the segment ends for you
inline constexpr int64_t kBye = 8;     // your flush is taken; nothing follows
// This server got a stop signal: take it as yours (note_stop). A server trains no batch, so
// only a worker can end the segment; without this the signal waited for its end (an epoch).
inline constexpr int64_t kServerStop = 16;

struct Header {
  int64_t kind = 0;
  int64_t flags = 0;
  int64_t batch = -1;   // the newest batch the message covers
  int64_t version = 0;  // worker: the version of the parameters pushed from; server: sent
  int64_t count = 0;    // batches summed in the push
};

// A message buffer: a Header and room for `floats` floats.
class Message {
 public:
  explicit Message(size_t floats)
      : words_((sizeof(Header) + floats * sizeof(float) + 7) / 8), floats_(floats) {}
  Header header() const {
    Header h;
    std::memcpy(static_cast<void*>(&h), words_.data(), sizeof(h));
    return h;
  }
  void set_header(const Header& h) { std::memcpy(words_.data(), &h, sizeof(h)); }
  float* payload() { return reinterpret_cast<float*>(words_.data() + sizeof(Header) / 8); }
  void* data() { return words_.data(); }
  // Bytes on the wire with `floats` floats of payload.
  int bytes(size_t floats) const {
    return static_cast<int>(sizeof(Header) + floats * sizeof(float));
  }
  int capacity() const { return bytes(floats_); }

 private:
  std::vector<int64_t> words_;
  size_t floats_;
};

// Polls for a peer: busy polls, then polls that yield the core, then sleeps of 50 us
// between polls (async_sgd.cpp).
class IdlePoll {
 public:
  // Called after each empty poll.
  void idle();
  // Called when something arrived.
  void reset() { polls_ = 0; }

 private:
  int64_t polls_ = 0;
  double since_ = 0;  // the first empty poll's time
};

// Waits for `request` polling (IdlePoll).
void wait(MPI_Request& request);

}  // namespace hpctrain::async_wire

// SoloCommunicator: the collectives of a group of one process, counted as the real rank's.
#include "collective/solo_communicator.h"

#include <algorithm>

#include "util/error.h"

namespace tessera::collective {

SoloCommunicator::SoloCommunicator(int rank, int size, PeerFloats peer_floats)
    : rank_(rank), size_(size), peer_floats_(std::move(peer_floats)) {
  if (size < 1 || rank < 0 || rank >= size) fail("a stand-in for rank {} of a group of {} ranks", rank, size);
}

// The time counted is none: no other rank is waited for, and the real group's cost is the planner's to predict.
void SoloCommunicator::all_reduce_sum(std::span<float> data) { count(data.size() * sizeof(float), 0.0); }

void SoloCommunicator::broadcast(std::vector<uint8_t>& bytes, int root) {
  if (root < 0 || root >= size_) fail("a broadcast from rank {} in a group of {}", root, size_);
  // As MpiCommunicator counts it: the root sends the bytes, the others receive.
  count(rank_ == root ? bytes.size() : 0, 0.0);
}

void SoloCommunicator::gather(std::span<const float> mine, std::vector<float>& all, int root) {
  if (root < 0 || root >= size_) fail("a gather to rank {} in a group of {}", root, size_);
  all.clear();
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        all.insert(all.end(), mine.begin(), mine.end());
      } else {
        all.insert(all.end(), peer_floats_ ? peer_floats_(r, mine.size()) : mine.size(), 0.0f);
      }
    }
  }
  count(mine.size() * sizeof(float), 0.0);
}

void SoloCommunicator::all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) {
  all.clear();
  for (int r = 0; r < size_; ++r) all.insert(all.end(), mine.begin(), mine.end());
  count(mine.size(), 0.0);
}

void SoloCommunicator::send(std::span<const uint8_t>, int to) {
  fail("rank {} stands alone: it has no rank {} to send to (a shard timed alone runs no pipeline)", rank_, to);
}

void SoloCommunicator::recv(std::vector<uint8_t>&, int from) {
  fail("rank {} stands alone: nothing comes from rank {} (a shard timed alone runs no pipeline)", rank_, from);
}

}  // namespace tessera::collective

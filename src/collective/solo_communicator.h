// One process standing in for rank r of a group of n, with no other process there: bench --shard-alone times a
// single shard as it would run on a machine of its own. Collectives exchange nothing: an all-reduce leaves this
// rank's partial sums, a gather or all-gather fills the other ranks' parts with stand-ins. Calls and bytes are
// counted as the real rank's would be (what it sends), so the per-token counts are the group's; the values, and so
// the logits and tokens, are not the model's.
#pragma once

#include <cstddef>
#include <functional>

#include "collective/communicator.h"

namespace tessera::collective {

class SoloCommunicator : public Communicator {
 public:
  // How many floats rank `peer` would contribute to a gather in which this rank contributes `mine` (uneven
  // vocabulary shares); unset: as many as this rank.
  using PeerFloats = std::function<size_t(int peer, size_t mine)>;

  // Throws Error unless 0 <= rank < size.
  SoloCommunicator(int rank, int size, PeerFloats peer_floats = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Leaves data as it is: this rank's partial sums (the others' are not there to add).
  void all_reduce_sum(std::span<float> data) override;
  // The root's bytes stay as they are on every rank: a stand-in for a rank other than the root is driven with the
  // root's own operations, which are already in `bytes`.
  void broadcast(std::vector<uint8_t>& bytes, int root) override;
  // On the root: this rank's floats in its place, zeros for the others (sized by peer_floats); elsewhere nothing.
  void gather(std::span<const float> mine, std::vector<float>& all, int root) override;
  // Every rank's part is a copy of this rank's.
  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override;
  // Point-to-point needs a peer: a stand-in runs no pipeline (throws Error).
  void send(std::span<const uint8_t> bytes, int to) override;
  void recv(std::vector<uint8_t>& bytes, int from) override;

 private:
  int rank_;
  int size_;
  PeerFloats peer_floats_;
};

}  // namespace tessera::collective

// The Executor: runs batches through a whole model, wherever its Stages are (one local Stage today; a pipeline of
// remote Stages later). The generation loop and the server talk only to this interface.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/model_config.h"

namespace tessera {

class Executor {
 public:
  virtual ~Executor() = default;

  virtual const ModelConfig& config() const = 0;
  virtual int64_t n_ctx() const = 0;    // positions per sequence
  virtual int64_t n_slots() const = 0;  // sequences live at once

  // Evaluates the batch; logits gets [n_outputs][n_vocab] for the tokens that want them, in batch order.
  virtual void decode(const Batch& batch, std::vector<float>& logits) = 0;

  virtual void clear_sequence(int64_t seq) = 0;
  virtual void truncate_sequence(int64_t seq, int64_t n) = 0;
  virtual int64_t sequence_length(int64_t seq) const = 0;
};

}  // namespace tessera

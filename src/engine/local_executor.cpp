// LocalExecutor: forwards batches to its single Stage.
#include "engine/local_executor.h"

namespace tessera {

LocalExecutor::LocalExecutor(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, int n_threads,
                             bool pin)
    : pool_(n_threads, pin), stage_(std::move(weights), options, pool_) {}

void LocalExecutor::decode(const Batch& batch, std::vector<float>& logits) {
  stage_.forward(batch, nullptr, out_);
  logits.swap(out_.logits);
}

}  // namespace tessera

// One head's session on a worker, apart from its connection: the stage it loaded and the replies to each message,
// so the worker's loop only moves messages and a fuzz target can drive a session with any message sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/progress.h"
#include "cluster/stage_assembler.h"
#include "cluster/stage_sampler.h"
#include "cluster/worker.h"
#include "engine/local_executor.h"
#include "net/messages.h"

namespace tessera::cluster {

class WorkerSession {
 public:
  WorkerSession(const WorkerOptions& options, ProbeCache& probe_cache, std::string head_name);
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // The replies to one message, in order (none for Clear/Truncate that succeed). What the head asked wrongly is an
  // Error reply; only a failure to allocate what was already admitted may still throw.
  std::vector<net::Message> handle(net::Message message);
  // The head said Bye, or the stage's group broke (end_reason says why).
  bool finished() const { return finished_; }
  // Why the session ends on this side ("" when the head ended it): the session closes with it as its Bye's reason.
  const std::string& end_reason() const { return end_reason_; }

 private:
  void admit_weights(const net::LoadStage& request) const;
  void finish_load(std::vector<net::Message>& replies);
  void reply_error(std::vector<net::Message>& replies, net::ErrorCode code, const std::string& message,
                   uint64_t request_id = 0);

  const WorkerOptions& options_;
  ProbeCache& probe_cache_;
  std::string head_name_;
  bool finished_ = false;
  std::string end_reason_;
  std::unique_ptr<StageAssembler> assembler_;
  net::LoadStage request_;
  // The stage: this worker's alone, or rank 0 of the group the LoadStage named (its members follow it).
  std::unique_ptr<LocalExecutor> stage_;
  std::unique_ptr<StageSampler> sampler_;
  std::unique_ptr<TransferProgress> progress_;
  StageOutput out_;
};

}  // namespace tessera::cluster

// Command-line options shared by the commands that load a model (run, perplexity, tokenize, later bench/serve),
// named as in llama.cpp, and the loading itself.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "engine/local_executor.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace plan {
struct ParallelRun;
}

struct ModelOptions {
  std::string model;  // default: the bundled stories260K
  int threads = 0;    // 0: all cores
  int64_t n_ctx = 0;  // 0: the model's training context, at most 4096
  int64_t n_batch = 512;
  std::string kv_type = "f16";
  bool repack = false;      // --repack: weights packed at load for the gemm (StageOptions::repack)
  bool mmap = false;        // --mmap: weights used in place from the mapped file (StageOptions::copy_weights off)
  bool pin = false;         // --pin: each compute thread bound to its own CPU (ThreadPool's pin)
  bool exact_gelu = false;  // --exact-gelu: StageOptions::exact_gelu
  // Tensor / expert parallelism over the ranks mpirun (or srun) started: --tp N splits every layer over N ranks,
  // --ep N places whole experts on N ranks; with both, N ranks do both.
  int tp = 1;
  int ep = 1;
  // --pp P: P groups of those ranks (or of single ranks), each holding a range of layers, as a pipeline.
  int pp = 1;
  bool parallel_ranks() const { return tp > 1 || ep > 1 || pp > 1; }
  std::string tp_shares;  // "2,1,1": uneven shares
  // --ep-redundancy: copies of other ranks' experts, as a fraction of a rank's own (a float: sent as one to workers).
  float ep_redundancy = static_cast<float>(kDefaultEpRedundancy);
  // --tp/--ep over worker daemons instead of MPI ranks (--workers with --tp/--ep; use_workers_as_ranks sets them):
  // the workers as ranks 1..N-1, the cluster key's file, the partial sums' wire type.
  std::string rank_workers;
  std::string rank_key_file;
  std::string rank_wire = "f32";
  double collective_timeout = 30;  // seconds a collective may wait for the slowest rank
  // bench --shard-alone [R] (bench_shard_alone.h): "all", a rank, or empty (off). Every other command refuses it:
  // the stand-in collectives make logits that are not the model's.
  std::string shard_alone;
  // Under --tp/--ep: also probe every rank at start for the plan (run, bench and serve set it unless --no-plan).
  bool profile_ranks = false;
  // Under --tp/--ep, after load_model: what the ranks measured at start (LoadedModel::parallel), for the plans a
  // command prints.
  std::shared_ptr<const plan::ParallelRun> parallel;
};

void add_model_options(CLI::App& app, ModelOptions& o, bool with_compute = true);
// --tp, --ep, --pp, --tp-shares, --collective-timeout, --shard-alone (part of add_model_options' compute options).
void add_parallel_options(CLI::App& app, ModelOptions& o);
// --repack, --mmap and --pin, for the commands that register their own compute options (bench, worker).
void add_repack_option(CLI::App& app, bool& repack);
void add_mmap_option(CLI::App& app, bool& mmap);
void add_pin_option(CLI::App& app, bool& pin);
void add_sampler_options(CLI::App& app, SamplerParams& p);

// The bundled model's path (built into the binary).
std::string default_model_path();

struct LoadedModel {
  std::shared_ptr<const ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  // Under --tp/--ep: the ranks' communicator (the executor shares it; it keeps MPI up); with --pp, the ranks of this
  // rank's stage, and `world` every rank.
  std::shared_ptr<collective::Communicator> comm;
  std::shared_ptr<collective::Communicator> world;
  PipelineRanks pipe;  // under --pp: this rank's stage among the others
  int stage = 0;
  // Under --tp/--ep: the collectives measured at start and (rank 0, when asked) the ranks' profiles.
  std::shared_ptr<const plan::ParallelRun> parallel;
  std::unique_ptr<LocalExecutor> executor;
  double load_seconds = 0;
  // A rank other than 0 has served rank 0's executor until it finished: the command has nothing left to do.
  bool follower_done = false;
};

// Loads weights, tokenizer and a local executor with n_slots sequences.
// with_executor false: weights and tokenizer only (the caller builds a distributed executor).
// group: a worker made a member of a group by its head (o.tp/o.ep as the head's): this rank's communicator, in place
// of MPI; the call returns once it has followed rank 0 to the end. source: the member's share received from its head
// (in place of the file o.model names).
LoadedModel load_model(const ModelOptions& o, int64_t n_slots = 1, bool with_executor = true,
                       std::shared_ptr<collective::Communicator> group = nullptr,
                       std::shared_ptr<const gguf::TensorSource> source = nullptr);
StageOptions stage_options(const ModelOptions& o, const ModelConfig& c, int64_t n_slots);
// Rank `rank`'s share under o's --tp/--ep/--tp-shares/--ep-redundancy, as every rank of the group cuts it.
ShardSpec shard_spec(const ModelOptions& o, int rank);
// The ranks' shares as a table on rank 0 (a collective: every rank calls it).
void log_shard(const LocalExecutor& e, collective::Communicator& comm, int stage = 0, std::string_view split = {});
// The log line of --repack: the memory the packed weights took, or why nothing was packed.
void log_repack(uint64_t packed_bytes, std::string_view node);
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Turns \n, \t, \r, \\, \", \' and \xNN into their characters (llama.cpp's default for -p).
std::string process_escapes(std::string_view text);

}  // namespace tessera

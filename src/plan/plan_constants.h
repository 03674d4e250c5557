// Every tunable number of the cost model and planner in one place: efficiency factors, fixed overheads, memory
// reserves and defaults for hypothetical nodes. They are estimates until `bench --check-plan` calibrates them.
#pragma once

#include <cstdint>

namespace tessera::plan {

struct PlanConstants {
  // The compute and bandwidth factors below were fitted on two 2-vCPU VMs (AVX-512 VNNI: the development VM and a
  // Zen 5), 1B Q4_K_M and moe-small, 1 and 2 threads, against `tessera probe` in the same minutes; where the two
  // differ the value lies between them (docs/planner.md, "Constants", has the table).
  //
  // Fraction of the probe's sustained streaming read that decode reaches: weights are read row by row through the
  // kernels, with dequantization in the loop, not as one sequential sweep. Measured 0.85-1.05 (development VM) and
  // 0.98-1.01 (Zen 5).
  double bandwidth_efficiency = 0.95;
  // Fraction of the probe's peak int8 dot-product rate a quantized matmul reaches at full batch: block scales,
  // nibble unpacking and activation quantization cost issue slots the probe's loop never spends. Measured: the
  // matmuls of a 512-token prefill at 0.56 (1 thread) and 0.48 (2 threads) of the probe, 0.63 and 0.57 on the Zen 5.
  double int8_efficiency = 0.56;
  // Fraction of the peak f32 FMA rate that attention (and matmuls over F32/F16/BF16 weights) reach. Measured from
  // the attention's share (pp2048 against pp512): 0.67 at 1 thread, 0.31 at 2.
  double f32_efficiency = 0.45;
  // One token per pass (the panel and row kernels) runs at this fraction of the full compute rate. A decode step
  // of a quantized model is memory-bound on these kernels, so this only has to be low enough for small models
  // whose weights sit in cache: the panels compute ~130 GFLOPS per core there (kernel benchmark), 0.3 of the
  // full rate at 1 thread.
  double small_batch_compute_factor = 0.30;
  // 2 to few_token_batch tokens per pass (batched decode, the small-batch kernels and panels) run at this fraction;
  // above it the rate grows with the logarithm of the batch up to the full rate at full_rate_batch, or at
  // full_rate_batch_packed on a node that packs its weights at load (--repack: the prefill tiles are built once,
  // not on every call). Measured (fraction of the 512-token rate, 1 / 2 threads): 4 tokens 0.34 / memory-bound;
  // 16 tokens 0.58 / 0.64, packed 0.67 / 0.57; 64 tokens 0.76 / 0.79, packed 0.97 / 0.98; on the Zen 5 at 1 thread
  // 16 tokens 0.87, 64 tokens 1.0.
  double few_token_compute_factor = 0.38;
  double few_token_batch = 8;
  double full_rate_batch = 128;
  double full_rate_batch_packed = 64;

  // Fixed time per layer per forward pass: thread-pool fork/join, norms, RoPE, softmax and other small ops.
  double layer_overhead_s = 15e-6;
  // The routed experts' weights stream at this fraction of the dense read rate: at one token a pass an MoE decodes
  // slower than its bytes say where a dense model does not, and perf finds that time inside the expert matmul kernels
  // (router, top-k and the tokens' gather under 1%): each expert is three short streams (0.9-1.3 MB). Fitted at 1
  // thread on the development VM, moe-small (qwen3moe, 96 experts of 768 rows a token, ~274 of its 464 MB) against 1b
  // in the same minutes: relative to 1b, measured / predicted 1.03-1.43 over four pairs of runs under load (median
  // 1.21), 5.3 ms of 25.3 a token: its experts' 14.9 ms read at 1 / 1.36 of the rate; on a quiet Zen 5 the experts
  // stream at 0.97 of the dense rate (docs/planner.md, "The MoE term").
  double expert_read_efficiency = 0.90;
  // Fixed time per forward pass of a stage: batch validation, scheduling, sampling on the last stage.
  double stage_overhead_s = 60e-6;
  // Fixed time per message on a link, on top of RTT/2: framing, encryption, system calls, a copy on each side.
  double message_overhead_s = 40e-6;
  // Over worker links an all-reduce of up to this many bytes (f32) is a direct exchange, larger ones a ring
  // (cluster::LinkOptions::direct_max_bytes).
  double link_direct_max_bytes = 32.0 * 1024;
  // Activations travel as f16.
  double wire_bytes_per_value = 2.0;
  // A token id message (ids, positions, sequence numbers) per sequence.
  double wire_bytes_per_token_id = 16.0;
  // A tensor-parallel group's broadcast of each pass (LocalExecutor): its header, and each sampled row's SampleSpec
  // (the sampler's parameters, no penalties or grammar). Measured: bench --shard-alone 1b --tp 3, greedy, rank 0
  // sends 138 B a token beyond the all-reduces, 16 of them the candidates' all-gather: 122 = 16 + 16 + 90.
  double step_header_bytes = 16.0;
  double sample_spec_bytes = 90.0;
  // Top-p without top-k over ranks: NucleusCut's all-gathers, usually 2 to 4 a step of at most 5 KiB a row.
  int nucleus_rounds = 3;
  double nucleus_round_bytes = 5.0 * 1024;

  // Memory a node needs beyond weights, KV cache and compute buffers: code, thread stacks, tokenizer, allocator slack.
  uint64_t node_base_bytes = uint64_t{256} << 20;
  // Fraction of a node's available memory left free: other processes, page cache, growth of the estimate's error.
  double memory_headroom = 0.05;

  // Hypothetical nodes described by their cores only (cluster.json "cores"): peak rates per logical CPU of a
  // recent x86 server with AVX-512 VNNI, as `tessera probe` would measure them. The 2-vCPU development VM probes
  // 1,275-1,290 int8 GOPS and 313-324 f32 GFLOPS with 2 threads when idle, but its vCPUs do not share cores; a
  // larger cloud VM's vCPUs are mostly hyperthread pairs, which share one core's vector units.
  double int8_gops_per_core = 400.0;
  double f32_gflops_per_core = 100.0;

  // A plan with more nodes is chosen over one with fewer only when it predicts at least this much less time: the
  // model's error is larger than a few percent, and every extra machine is one more thing to fail.
  double min_gain_to_add_nodes = 0.20;
  // Prompt micro-batch sizes a pipeline may use (at most the batch size); the planner takes the fastest.
  static constexpr int64_t kMicroBatches[] = {16, 32, 64, 128, 256, 512};
  // Above this many nodes the planner does not try every subset (2^n), only the fastest k nodes for each k.
  static constexpr int kMaxNodesForAllSubsets = 10;
};

}  // namespace tessera::plan

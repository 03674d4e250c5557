// Every tunable number of the cost model and planner in one place: efficiency factors, fixed overheads, memory
// reserves and defaults for hypothetical nodes. They are estimates until `bench --check-plan` calibrates them.
#pragma once

#include <cstdint>

namespace tessera::plan {

struct PlanConstants {
  // Fraction of the probe's streaming read bandwidth that decode reaches: weights are read row by row through the
  // kernels, with dequantization in the loop, not as one sequential sweep.
  double bandwidth_efficiency = 0.80;
  // Fraction of the probe's peak int8 dot-product rate a quantized matmul reaches: block scales, nibble unpacking,
  // activation quantization and cache misses on the weight rows all cost issue slots the probe's loop never spends.
  // Calibrated by `bench --check-plan` on the 1B Q4_K_M (1 thread, AVX-512 VNNI): 64-512 token batches ran at
  // 125-188 GFLOPS while the probe measured 380-640 int8 GOPS on the same busy machine; 0.33 centres the measured
  // over predicted ratios of four runs (docs/benchmarks.md).
  double int8_efficiency = 0.33;
  // Fraction of the peak f32 FMA rate a matmul over F32/F16/BF16 weights reaches (F16/BF16 convert on the fly).
  double f32_efficiency = 0.45;
  // One token per pass (the gemv kernels) runs at this fraction of the full compute rate: it cannot reuse a weight
  // row across activations to hide the unpacking. Calibrated by `bench --check-plan` on the 1B Q4_K_M: one token
  // runs at ~26 GFLOPS, about 0.15 of the 64-token rate, so a single-thread decode step of that model is
  // compute-bound (~85 ms) rather than memory-bound (~45 ms).
  double small_batch_compute_factor = 0.17;
  // 2 to few_token_batch tokens per pass (batched decode) run the small-batch kernels, which unpack each weight
  // block once for all tokens: about half the full rate (measured 2026-11-30, 2 threads, 1B Q4_K_M: 4 tokens 196
  // GFLOPS, 8 tokens 220, 64 tokens 418). Above it the rate ramps linearly to the full rate at full_rate_batch.
  double few_token_compute_factor = 0.5;
  double few_token_batch = 8;
  double full_rate_batch = 64;

  // Fixed time per layer per forward pass: thread-pool fork/join, norms, RoPE, softmax and other small ops.
  double layer_overhead_s = 15e-6;
  // Fixed time per forward pass of a stage: batch validation, scheduling, sampling on the last stage.
  double stage_overhead_s = 60e-6;
  // Fixed time per message on a link, on top of RTT/2: framing, encryption, system calls, a copy on each side.
  double message_overhead_s = 40e-6;
  // Activations travel as f16.
  double wire_bytes_per_value = 2.0;
  // A token id message (ids, positions, sequence numbers) per sequence.
  double wire_bytes_per_token_id = 16.0;

  // Memory a node needs beyond weights, KV cache and compute buffers: code, thread stacks, tokenizer, allocator slack.
  uint64_t node_base_bytes = uint64_t{256} << 20;
  // Fraction of a node's available memory left free: other processes, page cache, growth of the estimate's error.
  double memory_headroom = 0.05;

  // Hypothetical nodes described by their cores only (cluster.json "cores"): peak rates per logical CPU of a
  // recent x86 server core with AVX-512 VNNI, as `tessera probe` measures them (2 vCPUs: ~670 int8 GOPS, ~165 f32).
  double int8_gops_per_core = 300.0;
  double f32_gflops_per_core = 80.0;

  // A plan with more nodes is chosen over one with fewer only when it predicts at least this much less time: the
  // model's error is larger than a few percent, and every extra machine is one more thing to fail.
  double min_gain_to_add_nodes = 0.20;
  // Prompt micro-batch sizes a pipeline may use (at most the batch size); the planner takes the fastest.
  static constexpr int64_t kMicroBatches[] = {16, 32, 64, 128, 256, 512};
  // Above this many nodes the planner does not try every subset (2^n), only the fastest k nodes for each k.
  static constexpr int kMaxNodesForAllSubsets = 10;
};

}  // namespace tessera::plan

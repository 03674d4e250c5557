// Planner test fixtures shared by the parallel and pipeline plan tests: a node of the worked example's VMs (16 vCPUs
// at the per-core constants) and an 8-layer dense model whose parts are round byte counts.
#pragma once

#include <string>

#include "plan/model_shape.h"
#include "plan/node_profile.h"
#include "plan/plan_constants.h"

namespace tessera::test {

// A 16-vCPU node reading `gbps` GB/s with `mem_gb` GB free.
inline plan::NodeProfile plan_vm(const std::string& name, double gbps = 40, double mem_gb = 60) {
  const plan::PlanConstants k;
  plan::NodeProfile n;
  n.name = name;
  n.mem_available_bytes = static_cast<uint64_t>(mem_gb * 1e9);
  n.mem_read_gbps = gbps;
  n.int8_gops = 16 * k.int8_gops_per_core;
  n.f32_gflops = 16 * k.f32_gflops_per_core;
  return n;
}

// 8 dense layers of 1 GB each (q and output 0.3 GB, k and v 0.1 GB, FFN 0.6 GB), no embedding or head bytes: a
// rank's share is exactly its heads' and rows' fraction.
inline plan::ModelCost parted_model() {
  plan::ModelCost m;
  m.label = "parted";
  m.matmul_type = "q4_K";
  ModelConfig& c = m.config;
  c.arch = Arch::Llama;
  c.n_layer = 8;
  c.n_embd = 4096;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = c.head_dim_v = c.n_rot = 128;
  c.n_ff = 14336;
  c.n_vocab = 1000;
  c.n_ctx_train = 8192;
  for (int i = 0; i < 8; ++i) {
    plan::LayerCost l;
    l.weight_bytes = l.dense_bytes = 1000000000;
    l.attn_q.bytes = 300000000;
    l.attn_kv.bytes = 100000000;
    l.ffn.bytes = 600000000;
    m.layers.push_back(l);
  }
  return m;
}

}  // namespace tessera::test

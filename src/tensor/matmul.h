// Matrix products of weights (any GGUF type) with f32 activations: the hot spot of every forward pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/prefetch_choice.h"
#include "tensor/tensor_view.h"
#include "util/thread_pool.h"

namespace tessera {

// Reusable buffers for activations converted to the weight type's dot-product format.
class Kernels;

struct MatmulScratch {
  std::vector<uint8_t> act;
  std::vector<uint8_t> act2;                 // matmul_multi: a second activation format
  std::vector<uint8_t> act_each;             // matmul_each: every job's activations
  std::vector<ThreadPool::ReadAhead> ahead;  // each thread's first rows of the next call
  const Kernels* kernels = nullptr;          // chosen on first use (select_isa: TESSERA_ISA or the CPU's best)
  PrefetchChoice prefetch;                   // decode calls on layouts with several kernels: which one runs
};

// The weights of the matmul that comes next (its outputs in order), when the caller knows them: for a token or a
// few, each worker thread reads the rows it will take first into its cache while it waits between the two calls.
using NextWeights = std::span<const TensorView* const>;

// What each of `threads` threads reads first in a call on `next` with n_tokens (the start of its own range of row
// chunks, up to 256 KB, in the layout that call reads), into out; out is left empty when that call will not share
// its chunks dynamically (many tokens, one thread), where nothing is read ahead.
void read_ahead_regions(NextWeights next, int64_t n_tokens, int threads, std::vector<ThreadPool::ReadAhead>& out);

// y[t * w.rows() + r] = dot(row r of w, x[t * w.cols() ...]) for t < n_tokens.
// Quantized weights use integer dot products against activations quantized the way ggml's CPU backend does
// (Q8_0/Q8_1/Q8_K), so results track llama.cpp's; F32/F16/BF16 weights keep f32 activations.
void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch,
            NextWeights next = {});

struct MatmulOut {
  const TensorView* w;
  float* y;  // y[t * w->rows() + r], as matmul
};

// Several weights with the same input (q/k/v, gate/up): each output exactly as matmul would compute it, with the
// activations converted once per format (a third format of a mixed file once per weight that takes it). For a
// token or a few, all the row chunks share one pass of the thread pool, so a decode step pays one fork/join instead
// of one per weight; for many, the weights run one after the other, each with every thread.
void matmul_multi(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool,
                  MatmulScratch& scratch, NextWeights next = {});

struct MatmulJob {
  const TensorView* w;
  const float* x;  // n_tokens rows of w->cols()
  int64_t n_tokens;
  float* y;  // y[t * w->rows() + r], as matmul
};

// How matmul_each shares its jobs among the threads.
enum class EachSplit {
  Chunks,     // every job's row chunks, a few at a time from each thread's range: a few tokens per job (decode)
  WholeJobs,  // whole jobs, largest first: many tokens per job (prefill), where every gemm call prepares all of
              // its tokens, so fewer and larger calls pay
};

// Weights with inputs of their own (the experts that tokens chose in a MoE layer): each output exactly as matmul
// would compute it, and all of them in one pass of the thread pool, so a step pays one fork/join for every expert
// matrix together instead of one each. Jobs that share an input (same x, tokens and format) convert it once.
// next: as matmul's, read ahead when the split is Chunks.
void matmul_each(std::span<const MatmulJob> jobs, ThreadPool& pool, MatmulScratch& scratch,
                 EachSplit split = EachSplit::Chunks, NextWeights next = {});

}  // namespace tessera

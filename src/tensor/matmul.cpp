// matmul: activations converted once per call (split over threads by token), then output rows split over threads
// in chunks of 16-64 rows, each thread running the CPU's gemm kernel on its chunks for all tokens.
#include "tensor/matmul.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>

#include "tensor/kernels.h"
#include "tensor/packed_weights.h"
#include "util/error.h"

namespace tessera {

namespace {

// Row chunks are multiples of the packed layouts' row groups so every kernel works on whole panels and tiles.
constexpr int64_t kChunkRows = 64;
// A matrix of fewer than 256 rows (an MoE router has one per expert) in chunks of 16, a multiple of every panel's
// rows: with 64 a 64-row router would run on one thread while the others wait.
constexpr int64_t kSmallChunkRows = 16;
// Weight bytes per chunk at most, down to kSmallChunkRows (chunk_rows_of).
constexpr size_t kChunkBytes = size_t{64} << 10;
// Up to this many tokens a chunk's gemm call costs little beyond its weights (no per-call repacking of all the
// tokens), so threads take chunks a few at a time (run_dynamic): a thread slowed by anything else on the machine
// then does fewer chunks instead of holding everyone at the join.
constexpr int64_t kDynamicMaxTokens = 3;

struct Job {
  const TensorView* w;
  float* y;
  GemmFn gemm;
  const PackedRows* packed;  // set when w's panels or packed rows serve this call
  const uint8_t* act;
  size_t act_row;
  int64_t first_chunk;  // chunks of all jobs are numbered consecutively
  int64_t n_tokens;
  DecodeKernel kernel = DecodeKernel::L1;  // which of packed->fns's kernels (run_decode)
};

const Kernels& kernels_of(MatmulScratch& scratch) {
  if (scratch.kernels == nullptr) scratch.kernels = &Kernels::get(select_isa());
  return *scratch.kernels;
}

// Converts n_tokens rows of x into buf (resized) in the activation format; returns the bytes per row.
size_t quantize_into(const Kernels& kernels, GgmlType act_type, const float* x, int64_t n_tokens, int64_t k,
                     std::vector<uint8_t>& buf, ThreadPool& pool) {
  const size_t act_row = row_size(act_type, k);
  const ActQuantFn quantize = kernels.quantize_act(act_type);
  if (quantize == nullptr) fail("no activation kernel for {}", type_name(act_type));
  buf.resize(act_row * static_cast<size_t>(n_tokens));
  uint8_t* act = buf.data();
  if (n_tokens == 1) {
    quantize(x, act, k);
  } else {
    pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) quantize(x + t * k, act + static_cast<size_t>(t) * act_row, k);
    });
  }
  return act_row;
}

// The rows of one chunk of w: 64, halved down to 16 while a chunk holds more than kChunkBytes of weights (the
// threads' last takes are single chunks, so the wait at the join is about half of one), and 16 for a small
// matrix. Only while every packed layout's row groups (if any) divide the result.
int64_t chunk_rows_of(const TensorView& w) {
  const auto fits = [&w](int64_t rows) {
    for (const PackedRows* p : {&w.packed, &w.panels}) {
      if (!p->empty() && rows % p->fns->group_rows != 0) return false;
    }
    return true;
  };
  if (w.rows() < 4 * kChunkRows) return fits(kSmallChunkRows) ? kSmallChunkRows : kChunkRows;
  int64_t rows = kChunkRows;
  while (rows > kSmallChunkRows && static_cast<size_t>(rows) * w.row_bytes > kChunkBytes && fits(rows / 2)) rows /= 2;
  return rows;
}

void run_chunks(const Job& job, int64_t c0, int64_t c1) {
  const int64_t n_tokens = job.n_tokens;
  const int64_t n = job.w->rows();
  const int64_t rows = chunk_rows_of(*job.w);
  const int64_t r0 = c0 * rows;
  const int64_t r1 = std::min(n, c1 * rows);
  if (job.packed != nullptr) {
    const PackedRows& p = *job.packed;
    const auto group = static_cast<size_t>(r0 / p.group_rows);
    const auto gemm = job.kernel == DecodeKernel::L2             ? p.fns->gemm_l2
                      : job.kernel == DecodeKernel::Unprefetched ? p.fns->gemm_unprefetched
                                                                 : p.fns->gemm;
    return gemm(p.data + group * p.group_bytes, r1 - r0, job.act, job.act_row, n_tokens, job.w->cols(), job.y + r0, n);
  }
  job.gemm(job.w->row(r0), job.w->row_bytes, r1 - r0, job.act, job.act_row, n_tokens, job.w->cols(), job.y + r0, n);
}

int64_t chunks_of(const TensorView& w) {
  const int64_t rows = chunk_rows_of(w);
  return (w.rows() + rows - 1) / rows;
}

// Chunks per take of run_dynamic at most: half a thread's own range, so its takes halve from the first on
// (ChunkRange::take) and the threads' last takes, which even out their ends, stay single chunks. Each take costs a
// gemm call and an atomic on a line the other threads read: larger first takes and single-chunk takes both ran
// slower (docs/perf-log/threads.md).
int64_t grain_of(int64_t total_chunks, int threads) { return std::max<int64_t>(1, total_chunks / (2 * threads)); }

// The first chunk of thread t's own range in run_dynamic.
int64_t range_start(int64_t total_chunks, int t, int threads) { return total_chunks * t / threads; }

// Chunks [c0, c1) of the jobs (numbered consecutively across them), each job's part in one call.
void run_chunk_range(std::span<const Job> jobs, int64_t c0, int64_t c1) {
  auto j = static_cast<size_t>(
      std::upper_bound(jobs.begin(), jobs.end(), c0, [](int64_t c, const Job& job) { return c < job.first_chunk; }) -
      jobs.begin() - 1);
  while (c0 < c1) {
    const int64_t job_end = j + 1 < jobs.size() ? std::min(c1, jobs[j + 1].first_chunk) : c1;
    if (job_end > c0) run_chunks(jobs[j], c0 - jobs[j].first_chunk, job_end - jobs[j].first_chunk);
    c0 = job_end;
    ++j;
  }
}

// A range of chunks that its owner takes from the front and other threads from the back: front << 32 | back.
struct alignas(64) ChunkRange {
  std::atomic<uint64_t> bounds;

  static uint64_t pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }
  // Claims up to `grain` chunks at the front (owner) or the back (others) into [c0, c1); false once it is empty.
  bool take(int64_t grain, bool front, int64_t& c0, int64_t& c1) {
    uint64_t cur = bounds.load(std::memory_order_relaxed);
    for (;;) {
      const auto f = static_cast<int64_t>(cur >> 32);
      const auto b = static_cast<int64_t>(cur & 0xffffffffu);
      if (f >= b) return false;
      // Shorter takes as the range runs out: the threads' last takes, and so their wait at the join, stay short.
      const int64_t n = std::clamp<int64_t>((b - f) / 2, 1, grain);
      c0 = front ? f : b - n;
      c1 = front ? f + n : b;
      const uint64_t next = front ? pack(c1, b) : pack(f, c0);
      if (bounds.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return true;
    }
  }
};

// Every chunk of every job. Each thread owns a contiguous range (thread t: from range_start) and works through it
// front to back a grain at a time, so its kernel's prefetch runs on into its next take and what it reads first is
// known in advance (read_ahead_regions); a thread done with its own range takes from the backs of the others',
// so a thread slowed by anything else on the machine does fewer chunks instead of holding everyone at the join.
// (Takes from one shared counter interleave the threads' rows: each take then starts a new stream, which reads
// slower.)
void run_dynamic(std::span<const Job> jobs, int64_t total_chunks, ThreadPool& pool,
                 std::span<const ThreadPool::ReadAhead> ahead = {}) {
  const int threads = pool.size();
  const int64_t grain = grain_of(total_chunks, threads);
  std::unique_ptr<ChunkRange[]> ranges(new ChunkRange[static_cast<size_t>(threads)]);
  for (int t = 0; t < threads; ++t) {
    ranges[t].bounds.store(
        ChunkRange::pack(range_start(total_chunks, t, threads), range_start(total_chunks, t + 1, threads)),
        std::memory_order_relaxed);
  }
  pool.run(
      [&](int thread) {
        int64_t c0 = 0, c1 = 0;
        while (ranges[thread].take(grain, true, c0, c1)) run_chunk_range(jobs, c0, c1);
        for (int i = 1; i < threads; ++i) {
          ChunkRange& other = ranges[(thread + i) % threads];
          while (other.take(grain, false, c0, c1)) run_chunk_range(jobs, c0, c1);
        }
      },
      ahead);
}

// The caller goes on with the outputs alone (norms, rope, the next activations), and the other threads wrote about
// half of them: asking for every line at once overlaps those cross-core fetches instead of paying them one miss at
// a time as the serial code reaches each line.
void fetch_outputs(std::span<const Job> jobs) {
  constexpr int64_t kFloatsPerLine = 16;
  for (const Job& job : jobs) {
    const int64_t n = job.w->rows();
    for (int64_t t = 0; t < job.n_tokens; ++t) {
      for (int64_t i = 0; i < n; i += kFloatsPerLine) __builtin_prefetch(job.y + t * n + i, 1, 3);
    }
  }
}

// A call of a token or a few: run_dynamic on the pool (the caller alone for one thread or chunk). When a job's layout
// has several kernels, scratch.prefetch picks one by the first such layout and the call's bytes, and is told the
// call's time; every job whose layout has that kernel runs it (q, k and v may differ in format, and where the lines
// should go is the CPU's matter more than the format's).
void run_decode(std::span<Job> jobs, int64_t total_chunks, ThreadPool& pool, MatmulScratch& scratch) {
  uint64_t bytes = 0;
  for (const Job& job : jobs) {
    bytes += job.packed != nullptr ? PackedWeights::panel_bytes(*job.w, *job.packed->fns)
                                   : static_cast<uint64_t>(job.w->rows()) * job.w->row_bytes;
  }
  const PackedGemm* choice = nullptr;
  DecodeKernel kernel = DecodeKernel::L1;
  for (Job& job : jobs) {
    if (job.packed == nullptr) continue;
    const PackedGemm* fns = job.packed->fns;
    if (!has_kernel(*fns, DecodeKernel::L2) && !has_kernel(*fns, DecodeKernel::Unprefetched)) continue;
    if (choice == nullptr) {
      choice = fns;
      kernel = scratch.prefetch.pick(choice, bytes);
    }
    job.kernel = has_kernel(*fns, kernel) ? kernel : DecodeKernel::L1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (pool.size() == 1 || total_chunks == 1) {
    run_chunk_range(jobs, 0, total_chunks);
  } else {
    run_dynamic(jobs, total_chunks, pool, scratch.ahead);
    fetch_outputs(jobs);
  }
  if (choice == nullptr) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  scratch.prefetch.record(choice, bytes, kernel, static_cast<uint64_t>(ns));
}

// Many tokens: one contiguous range of chunks per thread, since every gemm call prepares all the tokens.
void run_split(const Job& job, int64_t chunks, ThreadPool& pool) {
  const int64_t threads = std::min<int64_t>(pool.size(), chunks);
  if (threads <= 1) return run_chunks(job, 0, chunks);
  pool.run([&](int t) {
    if (t < threads) run_chunks(job, chunks * t / threads, chunks * (t + 1) / threads);
  });
}

bool serves(const PackedRows& p, int64_t n_tokens) {
  return !p.empty() && n_tokens >= p.fns->min_tokens && (p.fns->max_tokens == 0 || n_tokens <= p.fns->max_tokens);
}

// The packed rows or panels when they exist and pay for this many tokens; nullptr for the plain gemm on the rows.
// Tiles packed at load (--repack) beat the panels from their own threshold on (9 tokens); panels beat building
// the tiles per call up to their max_tokens (every count for the K-quants' AVX-512 panels).
const PackedRows* packed_for(const TensorView& w, int64_t n_tokens) {
  if (serves(w.packed, n_tokens)) return &w.packed;
  if (serves(w.panels, n_tokens)) return &w.panels;
  return nullptr;
}

GemmFn gemm_for(const Kernels& kernels, const TensorView& w) {
  const GemmFn gemm = kernels.gemm(w.type);
  if (gemm == nullptr) fail("no kernel for {} weights", type_name(w.type));
  return gemm;
}

}  // namespace

// Enough to cover the wait between two calls of a decode step (norms, activations, the last thread's last take)
// at one core's share of the bandwidth, and a small part of the L2.
constexpr size_t kReadAheadBytes = size_t{256} << 10;

void read_ahead_regions(NextWeights next, int64_t n_tokens, int threads, std::vector<ThreadPool::ReadAhead>& out) {
  out.clear();
  if (next.empty() || n_tokens > kDynamicMaxTokens || threads <= 1) return;
  int64_t total = 0;
  for (const TensorView* w : next) total += chunks_of(*w);
  out.assign(static_cast<size_t>(threads), {});
  for (int t = 0; t < threads; ++t) {
    // Thread t's own range in run_dynamic, which it works through from the front, within the weight it starts in.
    int64_t c = range_start(total, t, threads);
    const int64_t range_chunks = range_start(total, t + 1, threads) - c;
    for (const TensorView* w : next) {
      const int64_t chunks = chunks_of(*w);
      if (c >= chunks) {
        c -= chunks;
        continue;
      }
      const int64_t r0 = c * chunk_rows_of(*w);
      const int64_t r1 = std::min(w->rows(), (c + range_chunks) * chunk_rows_of(*w));
      const uint8_t* data = w->row(r0);
      size_t bytes = static_cast<size_t>(r1 - r0) * w->row_bytes;
      if (const PackedRows* p = packed_for(*w, n_tokens)) {
        data = p->data + static_cast<size_t>(r0 / p->group_rows) * p->group_bytes;
        bytes = static_cast<size_t>((r1 - r0 + p->group_rows - 1) / p->group_rows) * p->group_bytes;
      }
      out[static_cast<size_t>(t)] = {data, std::min(bytes, kReadAheadBytes)};
      break;
    }
  }
}

namespace {

// One weight's product on activations already converted: a token or a few shared out dynamically (run_decode),
// many split in one contiguous range per thread.
void run_job(Job job, ThreadPool& pool, MatmulScratch& scratch, NextWeights next) {
  job.first_chunk = 0;
  const int64_t chunks = chunks_of(*job.w);
  if (job.n_tokens <= kDynamicMaxTokens) {
    read_ahead_regions(next, job.n_tokens, pool.size(), scratch.ahead);
    return run_decode({&job, 1}, chunks, pool, scratch);
  }
  if (pool.size() == 1 || chunks == 1) return run_chunks(job, 0, chunks);
  run_split(job, chunks, pool);
}

}  // namespace

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch,
            NextWeights next) {
  const Kernels& kernels = kernels_of(scratch);
  const size_t act_row = quantize_into(kernels, Kernels::act_type(w.type), x, n_tokens, w.cols(), scratch.act, pool);
  run_job(Job{&w, y, gemm_for(kernels, w), packed_for(w, n_tokens), scratch.act.data(), act_row, 0, n_tokens}, pool,
          scratch, next);
}

void matmul_multi(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool,
                  MatmulScratch& scratch, NextWeights next) {
  if (outs.empty()) return;
  const Kernels& kernels = kernels_of(scratch);
  const int64_t k = outs[0].w->cols();
  // Each activation format converted once for all the weights that take it (a prefill's q, k and v: one conversion
  // of 512 tokens instead of three). A file may give q, k and v three unrelated formats: a third is converted for
  // its weights alone.
  GgmlType formats[2] = {Kernels::act_type(outs[0].w->type), GgmlType::F32};
  int n_formats = 1;
  bool third = false;
  for (const MatmulOut& o : outs) {
    if (o.w->cols() != k) fail("matmul_multi: weights of {} and {} columns share an input", k, o.w->cols());
    const GgmlType at = Kernels::act_type(o.w->type);
    if (at == formats[0] || (n_formats == 2 && at == formats[1])) continue;
    if (n_formats == 1) {
      formats[n_formats++] = at;
    } else {
      third = true;
    }
  }
  const bool one_by_one = n_tokens > kDynamicMaxTokens || pool.size() == 1 || third || outs.size() > 8;
  // A third format's weights are run by matmul, which converts into scratch.act: the other two keep clear of it.
  size_t rows[2] = {0, 0};
  std::vector<uint8_t>* bufs[2] = {third ? &scratch.act2 : &scratch.act, third ? &scratch.act_each : &scratch.act2};
  for (int f = 0; f < n_formats; ++f) rows[f] = quantize_into(kernels, formats[f], x, n_tokens, k, *bufs[f], pool);
  const auto job_of = [&](const MatmulOut& o, int64_t first_chunk) {
    const int f = Kernels::act_type(o.w->type) == formats[0] ? 0 : 1;
    return Job{o.w,         o.y,     gemm_for(kernels, *o.w), packed_for(*o.w, n_tokens), bufs[f]->data(), rows[f],
               first_chunk, n_tokens};
  };
  if (one_by_one) {
    // Prefill spends its time inside the gemm, not in fork/join: one weight at a time, each with all threads.
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorView* following = i + 1 < outs.size() ? outs[i + 1].w : nullptr;
      const NextWeights after = following != nullptr ? NextWeights{&following, 1} : next;
      const GgmlType at = Kernels::act_type(outs[i].w->type);
      if (at != formats[0] && (n_formats == 1 || at != formats[1])) {
        matmul(*outs[i].w, x, n_tokens, outs[i].y, pool, scratch, after);
      } else {
        run_job(job_of(outs[i], 0), pool, scratch, after);
      }
    }
    return;
  }
  Job jobs[8];
  int64_t total = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    jobs[i] = job_of(outs[i], total);
    total += chunks_of(*outs[i].w);
  }
  read_ahead_regions(next, n_tokens, pool.size(), scratch.ahead);
  run_decode({jobs, outs.size()}, total, pool, scratch);
}

void matmul_each(std::span<const MatmulJob> in, ThreadPool& pool, MatmulScratch& scratch, EachSplit split,
                 NextWeights next) {
  const Kernels& kernels = kernels_of(scratch);
  // Each distinct input gets one activation buffer; a job whose input an earlier job already has shares it.
  struct Input {
    const float* x;
    int64_t n_tokens, k;
    GgmlType type;
    size_t offset, row;
    ActQuantFn quantize;
  };
  std::vector<Input> inputs;
  std::vector<size_t> input_of(in.size());
  size_t bytes = 0;
  int64_t rows = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const MatmulJob& m = in[i];
    const GgmlType type = Kernels::act_type(m.w->type);
    const int64_t k = m.w->cols();
    const auto same = std::find_if(inputs.begin(), inputs.end(), [&](const Input& x) {
      return x.x == m.x && x.n_tokens == m.n_tokens && x.k == k && x.type == type;
    });
    if (same != inputs.end()) {
      input_of[i] = static_cast<size_t>(same - inputs.begin());
      continue;
    }
    const ActQuantFn quantize = kernels.quantize_act(type);
    if (quantize == nullptr) fail("no activation kernel for {}", type_name(type));
    const size_t row = row_size(type, k);
    input_of[i] = inputs.size();
    inputs.push_back({m.x, m.n_tokens, k, type, bytes, row, quantize});
    bytes += (row * static_cast<size_t>(m.n_tokens) + 63) / 64 * 64;
    rows += m.n_tokens;
  }
  scratch.act_each.resize(bytes);
  // Every input row on its own: numbered input by input, converted in parallel when there are enough of them.
  const auto convert = [&](int64_t begin, int64_t end) {
    size_t j = 0;
    int64_t first = 0;
    for (int64_t r = begin; r < end; ++r) {
      while (r >= first + inputs[j].n_tokens) first += inputs[j++].n_tokens;
      const Input& x = inputs[j];
      const int64_t t = r - first;
      x.quantize(x.x + t * x.k, scratch.act_each.data() + x.offset + static_cast<size_t>(t) * x.row, x.k);
    }
  };
  if (rows >= 64 && pool.size() > 1) {
    pool.parallel_for(rows, convert);
  } else {
    convert(0, rows);
  }
  std::vector<Job> jobs(in.size());
  int64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const MatmulJob& m = in[i];
    const Input& x = inputs[input_of[i]];
    jobs[i] = Job{m.w,
                  m.y,
                  gemm_for(kernels, *m.w),
                  packed_for(*m.w, m.n_tokens),
                  scratch.act_each.data() + x.offset,
                  x.row,
                  total,
                  m.n_tokens};
    total += chunks_of(*m.w);
  }
  if (total == 0) return;
  if (split == EachSplit::Chunks) {
    int64_t most = 0;
    for (const MatmulJob& m : in) most = std::max(most, m.n_tokens);
    read_ahead_regions(next, most, pool.size(), scratch.ahead);
    if (most <= kDynamicMaxTokens) return run_decode(jobs, total, pool, scratch);
    return run_dynamic(jobs, total, pool, scratch.ahead);
  }
  if (pool.size() == 1) {
    for (const Job& job : jobs) run_chunks(job, 0, chunks_of(*job.w));
    return;
  }
  if (jobs.size() < 2 * static_cast<size_t>(pool.size())) {
    // Too few jobs to keep every thread busy with whole ones: each job split as matmul splits it.
    for (const Job& job : jobs) run_split(job, chunks_of(*job.w), pool);
    return;
  }
  // Largest first, each thread taking the next: the last jobs to start are the short ones.
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return jobs[a].w->rows() * jobs[a].n_tokens > jobs[b].w->rows() * jobs[b].n_tokens;
  });
  std::atomic<size_t> taken{0};
  pool.run([&](int) {
    for (size_t i = taken.fetch_add(1, std::memory_order_relaxed); i < order.size();
         i = taken.fetch_add(1, std::memory_order_relaxed)) {
      const Job& job = jobs[order[i]];
      run_chunks(job, 0, chunks_of(*job.w));
    }
  });
}

}  // namespace tessera

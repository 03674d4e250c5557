// A worker's --mem-limit counts the packed copy of its own --repack, before it is made, and its memory report
// includes it. The workers here run this CPU's kernels (no TESSERA_ISA=scalar): on AVX-512 they pack quantized
// weights, elsewhere --repack packs nothing and costs nothing.
#include <gtest/gtest.h>

#include <chrono>

#include "cluster/local_stage_endpoint.h"
#include "cluster/remote_stage_endpoint.h"
#include "model/stage.h"
#include "support/tiny_model.h"
#include "support/worker_process.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<cluster::RemoteStageEndpoint> load_all(const test::WorkerProcess& w, const ModelWeights& model,
                                                       cluster::CompletionQueue& done) {
  cluster::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F16};
  o.connect_timeout = 3000ms;
  o.measure_bytes = 0;
  o.max_batch = 16;
  return std::make_unique<cluster::RemoteStageEndpoint>("w", w.address(), nullptr, 0, model,
                                                        LayerRange{0, model.config().n_layer}, true, true, o, done);
}

TEST(WorkerMemory, MemLimitCountsThePackedCopy) {
  test::TempDir dir;
  test::write_tiny_model(dir / "m.gguf", "llama", "q8_0");
  const auto model = ModelWeights::load(dir / "m.gguf");
  StageOptions repack;
  repack.repack = true;
  const uint64_t packed = Stage::packed_bytes_for(*model, repack);
  EXPECT_EQ(packed > 0, Stage::packing_kernels().packed(GgmlType::Q8_0) != nullptr);
  cluster::CompletionQueue done;

  // Without a limit: the packing worker reports the packed copy as part of its weights.
  uint64_t plain_need = 0;
  {
    test::WorkerProcess plain, packing({"--repack"});
    const auto p = load_all(plain, *model, done);
    const auto r = load_all(packing, *model, done);
    EXPECT_EQ(r->load_report().weights_bytes, p->load_report().weights_bytes + packed);
    EXPECT_EQ(r->load_report().kv_bytes, p->load_report().kv_bytes);
    EXPECT_EQ(r->load_report().buffer_bytes, p->load_report().buffer_bytes);
    plain_need = p->load_report().weights_bytes + p->load_report().kv_bytes + p->load_report().buffer_bytes;
  }

  // A limit between the plain stage and the stage with its packed copy: only --repack pushes it over.
  const std::string limit = std::to_string(plain_need + packed / 2);
  test::WorkerProcess plain({"--mem-limit", limit});
  EXPECT_NO_THROW(load_all(plain, *model, done));
  test::WorkerProcess packing({"--repack", "--mem-limit", limit});
  if (packed == 0) {
    EXPECT_NO_THROW(load_all(packing, *model, done));  // nothing to pack on this CPU: nothing more to hold
    return;
  }
  try {
    load_all(packing, *model, done);
    FAIL() << "the stage and its packed copy should not fit in " << limit << " bytes";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not enough memory"), std::string::npos) << what;
    EXPECT_NE(what.find("packed copy"), std::string::npos) << what;
    EXPECT_NE(what.find("--mem-limit"), std::string::npos) << what;
  }
  EXPECT_TRUE(packing.running());
}

}  // namespace
}  // namespace tessera

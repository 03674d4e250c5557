// libFuzzer target for a worker's session: what an authenticated head may send, in any order. Each input loads a
// stage of stories260K (the whole model, its first layers or its last ones) as a head would, then plays a
// sequence of messages built from the input: Forwards with any ids, positions, tokens, activations and sampling
// settings, Clear/Truncate, weight chunks, new LoadStages with changed fields, and raw frames. Every message goes
// through the wire codec first (what it refuses never reaches a session). handle() must not throw, and every
// reply must be a message the codec can send.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cluster/remote_stage_endpoint.h"
#include "cluster/worker_session.h"
#include "model/model_weights.h"
#include "net/messages.h"
#include "util/error.h"

using namespace tessera;

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "worker_session_fuzz: %s\n", what);
  std::abort();
}

// Through the codec, as the transport would deliver it; nullopt when the codec refuses it.
std::optional<net::Message> delivered(const net::Message& m) {
  try {
    return net::decode_frame(net::encode_frame(m));
  } catch (const Error&) {
    return std::nullopt;
  }
}

struct Harness {
  std::shared_ptr<const ModelWeights> model = ModelWeights::load(TESSERA_SHARED_DIR "/models/stories260K.gguf");
  cluster::WorkerOptions options;
  ProbeCache probe_cache;
  Harness() {
    options.name = "fuzz";
    options.threads = 1;
    options.mem_limit = 256ull << 20;  // a stage or KV cache asked for beyond this is refused, never allocated
    options.copy_weights = false;
  }
};

class Player {
 public:
  Player(Harness& h, FuzzedDataProvider& in) : h_(h), in_(in), session_(h.options, h.probe_cache, "fuzz head") {}

  void play(const net::Message& m) {
    if (std::holds_alternative<net::ProbeRequest>(m)) return;  // measures memory for seconds: not what is fuzzed
    auto msg = delivered(m);
    if (!msg) return;
    for (const auto& reply : session_.handle(std::move(*msg))) {
      try {
        (void)net::encode_frame(reply);
      } catch (const Error&) {
        violated("a reply the codec cannot send");
      }
    }
  }

  // A head's load: LoadStage, then every chunk (the worker holds none of them).
  void load(net::LoadStage load, const cluster::StageRequest& request) {
    play(load);
    for (const auto& t : load.tensors) request.for_each_chunk(t.hash, [&](const net::WeightChunk& c) { play(c); });
  }

  net::Forward forward() {
    net::Forward f;
    f.request_id = in_.ConsumeIntegral<uint64_t>();
    const size_t n = in_.ConsumeIntegralInRange<size_t>(0, 9);
    const int32_t vocab = static_cast<int32_t>(h_.model->config().n_vocab);
    for (size_t i = 0; i < n; ++i) {
      f.seq.push_back(in_.ConsumeIntegralInRange<int32_t>(-1, 5));
      f.pos.push_back(in_.ConsumeIntegralInRange<int32_t>(-2, 600));
      f.want_output.push_back(in_.ConsumeBool() ? 1 : 0);
      if (in_.ConsumeBool()) f.tokens.push_back(in_.ConsumeIntegralInRange<int32_t>(-3, vocab + 3));
    }
    if (in_.ConsumeBool()) {
      const auto rows = in_.ConsumeIntegralInRange<uint32_t>(0, 10);
      const auto cols = in_.ConsumeBool() ? static_cast<uint32_t>(h_.model->config().n_embd)
                                          : in_.ConsumeIntegralInRange<uint32_t>(0, 100);
      std::vector<float> values(size_t{rows} * cols);
      for (auto& v : values) v = in_.ConsumeFloatingPoint<float>();
      f.activations = net::encode_activations(values, rows, cols, net::WireType::F32);
    }
    const size_t n_sampling = in_.ConsumeIntegralInRange<size_t>(0, 3);
    for (size_t i = 0; i < n_sampling; ++i) {
      net::SamplingParams s;
      s.seq = in_.ConsumeIntegralInRange<int32_t>(-1, 5);
      s.temperature = in_.ConsumeFloatingPoint<float>();
      s.top_k = in_.ConsumeIntegral<int32_t>();
      s.top_p = in_.ConsumeFloatingPoint<float>();
      s.min_p = in_.ConsumeFloatingPoint<float>();
      s.repeat_penalty = in_.ConsumeFloatingPoint<float>();
      s.repeat_last_n = in_.ConsumeIntegral<int32_t>();
      s.presence_penalty = in_.ConsumeFloatingPoint<float>();
      s.frequency_penalty = in_.ConsumeFloatingPoint<float>();
      s.seed = in_.ConsumeIntegral<uint64_t>();
      s.draws = in_.ConsumeIntegral<uint64_t>();
      const size_t n_history = in_.ConsumeIntegralInRange<size_t>(0, 8);
      for (size_t k = 0; k < n_history; ++k) s.history.push_back(in_.ConsumeIntegralInRange<int32_t>(-2, vocab + 2));
      s.logprobs = in_.ConsumeBool();
      s.top_logprobs = in_.ConsumeIntegral<uint16_t>();
      f.sampling.push_back(std::move(s));
    }
    return f;
  }

  net::LoadStage changed(net::LoadStage load) {
    switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        load.layer_end = in_.ConsumeIntegral<uint32_t>();
        break;
      case 1:
        load.n_ctx = in_.ConsumeIntegral<uint32_t>();
        break;
      case 2:
        load.n_slots = in_.ConsumeIntegral<uint32_t>();
        break;
      case 3:
        load.max_batch = in_.ConsumeIntegral<uint32_t>();
        break;
      case 4:
        if (!load.tensors.empty()) load.tensors[0].n_bytes = in_.ConsumeIntegral<uint64_t>();
        break;
      default:
        load.has_head = !load.has_head;
        break;
    }
    return load;
  }

  cluster::WorkerSession& session() { return session_; }

 private:
  Harness& h_;
  FuzzedDataProvider& in_;
  cluster::WorkerSession session_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness harness;  // the model is mapped once; every input gets a fresh session
  FuzzedDataProvider in(data, size);
  const int n_layers = static_cast<int>(harness.model->config().n_layer);
  const int cut = in.ConsumeIntegralInRange<int>(1, n_layers - 1);
  LayerRange layers{0, n_layers};
  bool embedding = true;
  bool head = true;
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 1:
      layers = {0, cut}, head = false;
      break;
    case 2:
      layers = {cut, n_layers}, embedding = false;
      break;
    default:
      break;
  }
  cluster::RemoteStageOptions options;
  options.stage.n_slots = in.ConsumeIntegralInRange<int>(1, 4);
  options.stage.n_ctx = in.ConsumeIntegralInRange<int>(16, 512);
  options.threads = 1;
  options.max_batch = 16;
  const cluster::StageRequest request = cluster::stage_request(*harness.model, layers, embedding, head, options);

  Player player(harness, in);
  if (in.ConsumeBool()) player.load(request.load, request);
  while (in.remaining_bytes() > 0 && !player.session().finished()) {
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
      case 1:
        player.play(player.forward());
        break;
      case 2:
        player.play(net::ClearSequence{in.ConsumeIntegral<int32_t>()});
        break;
      case 3: {
        const int32_t seq = in.ConsumeIntegral<int32_t>();
        player.play(net::TruncateSequence{seq, in.ConsumeIntegral<int32_t>()});
        break;
      }
      case 4:
        player.load(player.changed(request.load), request);
        break;
      case 5: {
        net::WeightChunk chunk;
        if (!request.load.tensors.empty()) chunk.hash = request.load.tensors[0].hash;
        chunk.offset = in.ConsumeIntegral<uint64_t>();
        chunk.data = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 64));
        player.play(chunk);
        break;
      }
      default: {
        const auto bytes = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 256));
        try {
          player.play(net::decode_frame(bytes));
        } catch (const Error&) {
        }
        break;
      }
    }
  }
  return 0;
}

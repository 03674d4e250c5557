// Sampling requests and sampled tokens between the pipeline's types (StageSample, SampledToken) and the wire's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cluster/stage_endpoint.h"
#include "engine/sampler.h"
#include "model/batch.h"
#include "net/messages.h"

namespace tessera::cluster {

// Random draws a sampler state from the wire may claim: more tokens than any context holds (catching up costs a
// fraction of a second), far below what would stall a worker.
constexpr uint64_t kMaxSamplerDraws = uint64_t{1} << 26;

net::SamplingParams to_wire(const StageSample& s);
StageSample from_wire(const net::SamplingParams& s);
net::SampledOutput to_wire(int32_t seq, const SampledToken& t, bool logprobs);
SampledToken from_wire(const net::SampledOutput& o);

// The tokens forward_and_sample picked (batch order of the sampled output tokens), each named by its sequence and
// with logprobs where its request asked for them.
std::vector<net::SampledOutput> sampled_to_wire(const Batch& batch, std::span<const StageSample> requests,
                                                std::span<const SampledToken> picks);

}  // namespace tessera::cluster

// The --split parser and validator. Errors say exactly which item is wrong and what the valid values are, since the
// user typed them on a command line.
#include "plan/split_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "plan/node_profile.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int64_t parse_layer(std::string_view s, std::string_view item) {
  int64_t v = -1;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 0) {
    fail("--split: '{}': '{}' is not a layer number", item, s);
  }
  return v;
}

double parse_share(std::string_view s, std::string_view item) {
  // std::from_chars for double is missing from some standard libraries still in use; strtod needs a terminator.
  const std::string str(s);
  char* end = nullptr;
  const double v = str.empty() ? NAN : std::strtod(str.c_str(), &end);
  if (str.empty() || end != str.c_str() + str.size() || !std::isfinite(v)) {
    fail("--split: '{}': '{}' is not a number", item, s);
  }
  if (v <= 0) fail("--split: '{}': a share must be positive (leave a node out instead of giving it 0 layers)", item);
  return v;
}

std::string names_text(std::span<const std::string> names) {
  std::string out;
  for (const auto& n : names) out.append(out.empty() ? "" : ", ").append(n);
  return out;
}

std::string layers_text(int64_t first, int64_t last) {
  return first == last ? fmt::format("layer {}", first) : fmt::format("layers {}-{}", first, last);
}

}  // namespace

SplitSpec parse_split(std::string_view text) {
  SplitSpec spec;
  spec.text = std::string(text);
  if (trim(text).empty()) fail("--split: empty; expected ranges like 0-15@a,16-31@b or shares like a:1,b:2");
  if (text.size() > 4096) fail("--split: {} characters is too long", text.size());
  bool any_range = false, any_share = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) fail("--split: '{}' has an empty item", text);
    SplitPart part;
    if (const size_t at = item.find('@'); at != std::string_view::npos) {
      any_range = true;
      const std::string_view range = trim(item.substr(0, at));
      part.node = std::string(trim(item.substr(at + 1)));
      const size_t dash = range.find('-');
      if (dash == std::string_view::npos) {
        part.first = part.last = parse_layer(range, item);
      } else {
        part.first = parse_layer(trim(range.substr(0, dash)), item);
        part.last = parse_layer(trim(range.substr(dash + 1)), item);
      }
      if (part.last < part.first) fail("--split: '{}': the range ends before it starts", item);
    } else if (const size_t colon = item.rfind(':'); colon != std::string_view::npos) {
      any_share = true;
      part.node = std::string(trim(item.substr(0, colon)));
      part.share = parse_share(trim(item.substr(colon + 1)), item);
    } else {
      fail("--split: '{}': expected FIRST-LAST@NODE (layers) or NODE:SHARE (proportion)", item);
    }
    validate_node_name(part.node, fmt::format("--split: '{}'", item));
    spec.parts.push_back(std::move(part));
    if (end == text.size()) break;
  }
  if (any_range && any_share) {
    fail("--split: '{}' mixes layer ranges (@) and shares (:); use one form", text);
  }
  spec.kind = any_range ? SplitSpec::Kind::Ranges : SplitSpec::Kind::Proportions;
  return spec;
}

std::vector<int64_t> proportional_counts(std::span<const uint64_t> layer_bytes, std::span<const double> weights) {
  const size_t n_runs = weights.size();
  const auto n_layer = static_cast<int64_t>(layer_bytes.size());
  std::vector<double> cum(layer_bytes.size() + 1, 0.0);
  for (size_t i = 0; i < layer_bytes.size(); ++i) cum[i + 1] = cum[i] + static_cast<double>(layer_bytes[i]);
  double total_w = 0;
  for (double w : weights) total_w += w;
  std::vector<int64_t> counts(n_runs, 0);
  if (n_runs == 0) return counts;
  int64_t prev = 0;
  double acc = 0;
  for (size_t r = 0; r + 1 < n_runs; ++r) {
    acc += weights[r];
    const double target = total_w > 0 ? cum.back() * acc / total_w : 0;
    // The edge nearest the target, never before the previous boundary.
    int64_t k = static_cast<int64_t>(std::lower_bound(cum.begin(), cum.end(), target) - cum.begin());
    k = std::min(k, n_layer);
    if (k > 0 && target - cum[static_cast<size_t>(k - 1)] < cum[static_cast<size_t>(k)] - target) --k;
    k = std::max(k, prev);
    counts[r] = k - prev;
    prev = k;
  }
  counts[n_runs - 1] = n_layer - prev;
  return counts;
}

std::vector<LayerRange> resolve_split(const SplitSpec& spec, std::span<const std::string> node_names,
                                      std::span<const uint64_t> layer_bytes) {
  const auto n_layer = static_cast<int64_t>(layer_bytes.size());
  if (n_layer <= 0) fail("--split: the model has no layers to place");
  for (size_t i = 0; i < spec.parts.size(); ++i) {
    const auto& p = spec.parts[i];
    if (std::find(node_names.begin(), node_names.end(), p.node) == node_names.end()) {
      fail("--split: unknown node '{}' (valid: {})", p.node, names_text(node_names));
    }
    for (size_t j = 0; j < i; ++j) {
      if (spec.parts[j].node == p.node) {
        fail("--split: node '{}' is named twice; a node holds one contiguous range of layers", p.node);
      }
    }
  }

  std::vector<LayerRange> out;
  if (spec.kind == SplitSpec::Kind::Ranges) {
    for (const auto& p : spec.parts) {
      if (p.last >= n_layer) {
        fail("--split: {}@{} is outside the model: it has {} layers (0-{})", layers_text(p.first, p.last), p.node,
             n_layer, n_layer - 1);
      }
      out.push_back({p.node, p.first, p.last});
    }
    std::sort(out.begin(), out.end(), [](const LayerRange& a, const LayerRange& b) { return a.first < b.first; });
    int64_t next = 0;
    for (const auto& r : out) {
      if (r.first > next) {
        fail("--split: {} are not placed on any node (the model has {} layers, 0-{})", layers_text(next, r.first - 1),
             n_layer, n_layer - 1);
      }
      if (r.first < next) {
        const auto& prev =
            *std::find_if(out.begin(), out.end(), [&](const LayerRange& o) { return o.last >= r.first && &o != &r; });
        fail("--split: {} are placed on both '{}' and '{}'", layers_text(r.first, std::min(next - 1, r.last)),
             prev.node, r.node);
      }
      next = r.last + 1;
    }
    if (next < n_layer) {
      fail("--split: {} are not placed on any node (the model has {} layers, 0-{})", layers_text(next, n_layer - 1),
           n_layer, n_layer - 1);
    }
    return out;
  }

  std::vector<double> weights;
  for (const auto& p : spec.parts) weights.push_back(p.share);
  if (static_cast<int64_t>(weights.size()) > n_layer) {
    fail("--split: {} nodes for {} layers: every node needs at least one layer", weights.size(), n_layer);
  }
  const auto counts = proportional_counts(layer_bytes, weights);
  double total = 0;
  for (double w : weights) total += w;
  int64_t first = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) {
      fail(
          "--split: the share {}:{} ({:.1f}% of the weights) rounds to 0 of the model's {} layers; give it a larger "
          "share or leave it out",
          spec.parts[i].node, spec.parts[i].share, 100.0 * spec.parts[i].share / total, n_layer);
    }
    out.push_back({spec.parts[i].node, first, first + counts[i] - 1});
    first += counts[i];
  }
  return out;
}

StageSplit split_by_speed(std::span<const uint64_t> layer_bytes, std::span<const double> speeds, double alike) {
  if (speeds.empty()) fail("internal: a split over no stages");
  const double lo = *std::min_element(speeds.begin(), speeds.end());
  const double hi = *std::max_element(speeds.begin(), speeds.end());
  StageSplit out;
  // Speeds within the probe's noise of each other split by bytes, as a run on alike machines always has.
  out.by_speed = lo > 0 && hi > lo * (1.0 + alike);
  const std::vector<double> even(speeds.size(), 1.0);
  out.counts = proportional_counts(layer_bytes, out.by_speed ? speeds : std::span<const double>(even));
  std::string rates;
  for (double v : speeds) rates += fmt::format("{}{:.1f}", rates.empty() ? "" : "/", v / 1e9);
  out.reason = out.by_speed
                   ? fmt::format("by speed: the stages read at {} GB/s, more than {:.0f}% apart", rates, 100.0 * alike)
                   : fmt::format("by bytes: the stages read at {} GB/s, alike within {:.0f}%", rates, 100.0 * alike);
  for (size_t i = 0; i < out.counts.size(); ++i) {
    if (out.counts[i] <= 0) {
      fail("a pipeline of {} stages over {} layers leaves stage {} without a layer", speeds.size(), layer_bytes.size(),
           i);
    }
  }
  return out;
}

bool stages_alike(std::span<const uint64_t> rank_machines, int stages, int group) {
  std::vector<uint64_t> first;
  for (int s = 0; s < stages; ++s) {
    std::vector<uint64_t> ids;
    for (int j = 0; j < group; ++j) ids.push_back(rank_machines[static_cast<size_t>((stages - 1 - s) * group + j)]);
    if (std::find(ids.begin(), ids.end(), uint64_t{0}) != ids.end()) return false;
    std::sort(ids.begin(), ids.end());
    if (s == 0) first = ids;
    if (ids != first) return false;
  }
  return true;
}

StageSplit split_rank_stages(std::span<const uint64_t> layer_bytes, std::span<const uint64_t> rank_machines,
                             std::span<const double> rank_read_bps, int stages, int group,
                             std::span<const double> shares) {
  if (stages_alike(rank_machines, stages, group)) {
    const std::vector<double> even(static_cast<size_t>(stages), 1.0);
    StageSplit out = split_by_speed(layer_bytes, even);
    out.reason = "by bytes: every stage runs on the same machines";
    return out;
  }
  double total = 0;
  for (int j = 0; j < group; ++j) total += shares.empty() ? 1.0 : shares[static_cast<size_t>(j)];
  std::vector<double> speeds;
  for (int s = 0; s < stages; ++s) {
    // A stage finishes a layer when its slowest share does.
    double speed = INFINITY;
    for (int j = 0; j < group; ++j) {
      const double share = shares.empty() ? 1.0 : shares[static_cast<size_t>(j)];
      speed = std::min(speed, rank_read_bps[static_cast<size_t>((stages - 1 - s) * group + j)] * total / share);
    }
    speeds.push_back(speed);
  }
  return split_by_speed(layer_bytes, speeds);
}

std::string format_ranges(std::span<const LayerRange> ranges) {
  std::string out;
  for (const auto& r : ranges) {
    out.append(out.empty() ? "" : ",")
        .append((r.first == r.last ? fmt::format("{}@{}", r.first, r.node)
                                   : fmt::format("{}-{}@{}", r.first, r.last, r.node)));
  }
  return out;
}

}  // namespace tessera::plan

// parse_place: a flat scan of comma-separated entries, each a node name or kind(name,name,...).
#include "cli/place_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "util/error.h"

namespace tessera {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

std::string valid_names(std::span<const std::string> workers) {
  std::string out = "local (this head)";
  for (const auto& w : workers) out += ", " + w;
  return out;
}

}  // namespace

std::string PlacedStage::text() const {
  if (!group()) return members.front();
  std::string out = tp && ep ? "tpep(" : tp ? "tp(" : "ep(";
  for (size_t i = 0; i < members.size(); ++i) {
    out += (i ? "," : "") + members[i];
    if (!shares.empty()) out += fmt::format(":{:g}", shares[i]);
  }
  return out + ")";
}

std::string PlacedStage::shares_text() const {
  std::string out;
  for (double s : shares) out += fmt::format("{}{:g}", out.empty() ? "" : ",", s);
  return out;
}

std::vector<PlacedStage> parse_place(const std::string& text, std::span<const std::string> workers) {
  const std::string where = fmt::format("--place '{}'", text);
  std::vector<PlacedStage> stages;
  std::vector<std::string> seen;
  // A member's share follows its name after a colon ("local:2"); a member without one holds 1 part.
  std::vector<std::optional<double>> weights;
  const auto add_member = [&](PlacedStage& stage, const std::string& token, const std::string& entry) {
    const size_t colon = token.find(':');
    const std::string name = trim(std::string_view(token).substr(0, colon));
    if (colon != std::string::npos) {
      const std::string number = trim(std::string_view(token).substr(colon + 1));
      double w = 0;
      const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), w);
      if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(w) || w <= 0) {
        fail(
            "{}: '{}' in '{}': a member's share is a positive number after its name (tp(local:2,a): local holds 2 "
            "parts of the stage's layers, a 1)",
            where, token, entry);
      }
      weights.push_back(w);
    } else {
      weights.push_back(std::nullopt);
    }
    if (name.empty()) fail("{}: an empty name in '{}'", where, entry);
    if (name != "local" && std::find(workers.begin(), workers.end(), name) == workers.end()) {
      fail("{}: '{}' is not a node here: the nodes are {} (--workers names the workers)", where, name,
           valid_names(workers));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      fail("{}: {} appears twice: each node holds one stage (or one share of a stage)", where, name);
    }
    if (name == "local" && !stage.members.empty()) {
      fail("{}: local must come first in '{}': the head leads its group (it dials its members and listens for none)",
           where, entry);
    }
    seen.push_back(name);
    stage.members.push_back(name);
  };
  size_t i = 0;
  while (i <= text.size()) {
    // One entry: up to the next comma outside parentheses.
    size_t end = i;
    int depth = 0;
    while (end < text.size() && (depth > 0 || text[end] != ',')) {
      if (text[end] == '(') ++depth;
      if (text[end] == ')' && --depth < 0) fail("{}: a ')' without its '('", where);
      ++end;
    }
    if (depth != 0) fail("{}: a '(' without its ')'", where);
    const std::string entry = trim(std::string_view(text).substr(i, end - i));
    if (entry.empty()) fail("{}: an empty stage (two commas, or one at an end)", where);
    PlacedStage stage;
    weights.clear();
    const size_t open = entry.find('(');
    if (open == std::string::npos) {
      add_member(stage, entry, entry);
      if (weights.front()) {
        fail("{}: '{}': a share is for a member of a group (tp({},b)); a stage of one node holds its layers whole",
             where, entry, entry);
      }
    } else {
      const std::string kind = trim(std::string_view(entry).substr(0, open));
      if (entry.back() != ')') fail("{}: '{}': nothing may follow a group's ')'", where, entry);
      if (kind == "tp") {
        stage.tp = true;
      } else if (kind == "ep") {
        stage.ep = true;
      } else if (kind == "tpep") {
        stage.tp = stage.ep = true;
      } else {
        fail("{}: '{}': a group is tp(...), ep(...) or tpep(...) of node names", where, entry);
      }
      const std::string inner = entry.substr(open + 1, entry.size() - open - 2);
      if (inner.find('(') != std::string::npos) fail("{}: '{}': groups do not nest", where, entry);
      size_t j = 0;
      while (j <= inner.size()) {
        const size_t comma = std::min(inner.find(',', j), inner.size());
        add_member(stage, trim(std::string_view(inner).substr(j, comma - j)), entry);
        j = comma + 1;
      }
      if (stage.members.size() < 2) {
        fail("{}: '{}' has one member: a stage of one node is written as its name", where, entry);
      }
      if (std::any_of(weights.begin(), weights.end(), [](const auto& w) { return w.has_value(); })) {
        for (const auto& w : weights) stage.shares.push_back(w.value_or(1.0));
      }
    }
    stages.push_back(std::move(stage));
    i = end + 1;
  }
  return stages;
}

std::vector<plan::PlaceStage> place_for_plan(const std::string& text, std::span<const std::string> workers,
                                             double ep_redundancy) {
  std::vector<plan::PlaceStage> out;
  for (const PlacedStage& p : parse_place(text, workers)) {
    plan::PlaceStage st;
    st.nodes = p.members;
    st.mode = p.tp && p.ep ? plan::ParallelMode::TensorExpert
              : p.ep       ? plan::ParallelMode::Expert
                           : plan::ParallelMode::Tensor;
    st.shares = p.shares;
    st.ep_redundancy = p.ep ? ep_redundancy : 0.0;
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace tessera

// The machines a plan may use: nodes by name (one of them the head, where requests arrive) and the links between
// them, with a default link for pairs not listed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/collective_model.h"
#include "plan/link_profile.h"
#include "plan/node_profile.h"

namespace tessera::plan {

class Cluster {
 public:
  // Validates every node and link: unique names, links between known nodes, the head among the nodes.
  Cluster(std::vector<NodeProfile> nodes, std::string head, std::vector<LinkProfile> links = {},
          std::optional<LinkProfile> default_link = std::nullopt);

  const std::vector<NodeProfile>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  const NodeProfile& head() const { return nodes_[head_]; }
  size_t head_index() const { return head_; }
  std::optional<size_t> find(std::string_view name) const;
  // Throws Error "unknown node 'x' (valid: local, b, c)".
  const NodeProfile& node(std::string_view name) const;
  // "local, vm2, vm3"
  std::string node_names() const;
  std::vector<std::string> node_name_list() const;
  // The link between two nodes: none (zero cost) for a node and itself, the listed pair, else the default link.
  // Throws Error when neither exists.
  LinkProfile link(std::string_view a, std::string_view b) const;
  const std::vector<LinkProfile>& links() const { return links_; }
  // Direct links between workers for tensor/expert-parallel groups, measured by the workers at the head's request:
  // a group's collectives take them, while a pipeline hop between two workers is relayed by the head (link()).
  void set_group_links(std::vector<LinkProfile> links);
  const std::vector<LinkProfile>& group_links() const { return group_links_; }
  // The link a group's collectives take between a and b: the group link when one is listed, else link(a, b).
  LinkProfile group_link(std::string_view a, std::string_view b) const;
  // Pairs whose direct link failed to open when measured: no group over both can run. Why, or nothing.
  void add_unreachable(std::string a, std::string b, std::string why);
  std::optional<std::string> unreachable(std::string_view a, std::string_view b) const;
  // Groups run over worker links (cluster::LinkCommunicator: a direct exchange up to 32 KiB, a ring above) with
  // partial sums of this many bytes a float on the wire; 0 (the default): over MPI, a ring over the slowest link.
  void set_worker_groups(int wire_bytes) { worker_wire_bytes_ = wire_bytes; }
  int worker_wire_bytes() const { return worker_wire_bytes_; }
  const std::optional<LinkProfile>& default_link() const { return default_link_; }
  // Whether a node packs its weights at load (NodeProfile::repack): a run setting, not something a profile measures,
  // so it is set where the command knows it (the head's --repack, a worker's profile for its own flag, `tessera
  // plan --repack` for every node of a cluster file).
  void set_repack(size_t node, bool repack) { nodes_.at(node).repack = repack; }
  // Collectives measured among all of the cluster's nodes (the MPI ranks, at start): a tensor/expert-parallel
  // group of every node, in order, uses them instead of a ring over its links.
  void set_collectives(CollectiveProfile c) { collectives_ = std::move(c); }
  const std::optional<CollectiveProfile>& collectives() const { return collectives_; }

 private:
  std::vector<NodeProfile> nodes_;
  size_t head_ = 0;
  std::vector<LinkProfile> links_;
  std::optional<LinkProfile> default_link_;
  std::optional<CollectiveProfile> collectives_;
  std::vector<LinkProfile> group_links_;
  struct Unreachable {
    std::string a, b, why;
  };
  std::vector<Unreachable> unreachable_;
  int worker_wire_bytes_ = 0;
};

}  // namespace tessera::plan

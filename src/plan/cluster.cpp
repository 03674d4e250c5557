// Cluster: name lookups with errors that list the valid names, and link lookup with a default.
#include "plan/cluster.h"

#include "util/error.h"

namespace tessera::plan {

Cluster::Cluster(std::vector<NodeProfile> nodes, std::string head, std::vector<LinkProfile> links,
                 std::optional<LinkProfile> default_link)
    : nodes_(std::move(nodes)), links_(std::move(links)), default_link_(std::move(default_link)) {
  if (nodes_.empty()) fail("a cluster needs at least one node");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    validate_node(nodes_[i]);
    for (size_t j = 0; j < i; ++j) {
      if (nodes_[j].name == nodes_[i].name) fail("node name '{}' appears twice", nodes_[i].name);
    }
  }
  const auto h = find(head);
  if (!h) fail("the head '{}' is not one of the nodes (valid: {})", head, node_names());
  head_ = *h;
  for (const auto& l : links_) {
    node(l.a);
    node(l.b);
    if (l.a == l.b) fail("link {} <-> {}: a link joins two different nodes", l.a, l.b);
    validate_link(l);
  }
  if (default_link_) validate_link(*default_link_);
}

std::optional<size_t> Cluster::find(std::string_view name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == name) return i;
  }
  return std::nullopt;
}

const NodeProfile& Cluster::node(std::string_view name) const {
  const auto i = find(name);
  if (!i) fail("unknown node '{}' (valid: {})", name, node_names());
  return nodes_[*i];
}

std::string Cluster::node_names() const {
  std::string out;
  for (const auto& n : nodes_) out.append(out.empty() ? "" : ", ").append(n.name);
  return out;
}

std::vector<std::string> Cluster::node_name_list() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n.name);
  return out;
}

LinkProfile Cluster::link(std::string_view a, std::string_view b) const {
  if (a == b) return LinkProfile{std::string(a), std::string(b), 0.0, 1e4, "same node"};
  for (const auto& l : links_) {
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return l;
  }
  if (default_link_) {
    LinkProfile l = *default_link_;
    l.a = std::string(a);
    l.b = std::string(b);
    return l;
  }
  fail("no link profile between '{}' and '{}' and no default network", a, b);
}

void Cluster::set_group_links(std::vector<LinkProfile> links) {
  for (const auto& l : links) {
    node(l.a);
    node(l.b);
    if (l.a == l.b) fail("group link {} <-> {}: a link joins two different nodes", l.a, l.b);
    validate_link(l);
  }
  group_links_ = std::move(links);
}

LinkProfile Cluster::group_link(std::string_view a, std::string_view b) const {
  for (const auto& l : group_links_) {
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return l;
  }
  return link(a, b);
}

void Cluster::add_unreachable(std::string a, std::string b, std::string why) {
  unreachable_.push_back({std::move(a), std::move(b), std::move(why)});
}

std::optional<std::string> Cluster::unreachable(std::string_view a, std::string_view b) const {
  for (const auto& u : unreachable_) {
    if ((u.a == a && u.b == b) || (u.a == b && u.b == a)) return u.why;
  }
  return std::nullopt;
}

}  // namespace tessera::plan

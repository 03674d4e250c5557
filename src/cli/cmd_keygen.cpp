// `tessera keygen`: write a new random cluster key file (mode 0600) that every node of a cluster shares.
#include "cli/commands.h"
#include "net/keys.h"
#include "util/log.h"

namespace tessera {

Command add_keygen_command(CLI::App& root) {
  auto out = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  CLI::App* app = root.add_subcommand("keygen", "Write a new cluster key file (copy it to every node, mode 0600)");
  app->add_option("-o,--output", *out, "Key file to write")->required();
  app->add_flag("--force", *force, "Replace an existing file (nodes holding the old key can no longer connect)");
  return {app, [out, force] {
            const net::ClusterKey key = net::ClusterKey::generate();
            net::write_cluster_key(*out, key, *force);
            log_info("keygen: wrote {} (mode 0600, fingerprint {})", *out, key.fingerprint());
            return 0;
          }};
}

}  // namespace tessera

#!/usr/bin/env bash
# Installs Tessera's build and test dependencies from Debian's packages (idempotent, quiet when done).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev          # libFuzzer + sanitizers for the fuzz targets
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev libpcre2-dev
  libssl-dev                        # TLS 1.3 with a pre-shared key for links between nodes
  libopenmpi-dev openmpi-bin        # tensor/expert parallelism over MPI (mpirun, srun)
  slurmd slurmctld slurm-client munge  # a throw-away one-node Slurm cluster for the srun test (3 MB, 12 MiB)
  libcpp-httplib-dev                # tessera serve's HTTP server (and the tests' client)
  chromium nodejs                   # the server's web page and openai-client tests (headless; npm packages go under build/)
  iproute2 jq                       # network-namespace test clusters (ip, tc); bench/run_distributed.sh's summary
  curl util-linux                   # the demo's HTTP requests; taskset for pinned benchmarks
)

# A Node.js that bundles npm (nodesource's) conflicts with Debian's npm package: ask for it only when absent.
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

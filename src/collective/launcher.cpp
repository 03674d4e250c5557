// How this process was started, from the variables mpirun and srun set for their tasks.
#include "collective/launcher.h"

#include <fmt/format.h>

namespace tessera::collective {

Launch detect_launch(const std::function<const char*(const char*)>& env, bool needs_pmix) {
  auto set = [&](const char* var) { return env(var) != nullptr; };
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE for its ranks, also where its daemons were started by srun.
  if (set("OMPI_COMM_WORLD_SIZE")) return Launch::mpirun;
  // An srun task (a Slurm batch script alone sets SLURM_PROCID, not the step's variables). srun --mpi=pmix runs a
  // PMIx server for the step; srun --mpi=pmi2 sets PMI_SIZE, which an MPICH-style library bootstraps from and Open
  // MPI as Debian builds it cannot.
  if (set("SLURM_STEP_NUM_TASKS")) {
    if (set("PMIX_RANK")) return Launch::srun;
    return needs_pmix || !set("PMI_SIZE") ? Launch::srun_without_pmix : Launch::srun;
  }
  if (set("PMIX_RANK") || set("PMI_SIZE")) return Launch::mpirun;  // another PMIx launcher, or MPICH's hydra
  return Launch::none;
}

const char* launcher_name(Launch launch) {
  return launch == Launch::srun || launch == Launch::srun_without_pmix ? "srun" : "mpirun";
}

std::string launch_hint(int ranks) {
  return fmt::format("mpirun -np {0} tessera ... (or srun -n {0} --mpi=pmix tessera ...)", ranks);
}

}  // namespace tessera::collective

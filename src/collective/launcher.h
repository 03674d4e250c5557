// Which launcher started this process, read from its environment: mpirun, srun with a PMI the MPI library can use,
// srun without one, or none. Decided before MPI starts, so that a run that cannot find its peers says how to start
// it instead of failing inside MPI_Init.
#pragma once

#include <functional>
#include <string>

namespace tessera::collective {

enum class Launch {
  none,               // no launcher: a plain process (or a Slurm batch script outside srun)
  mpirun,             // mpirun (or mpiexec): MPI_Init finds the other ranks
  srun,               // srun with a PMI the MPI library speaks (--mpi=pmix for Open MPI): MPI_Init finds them too
  srun_without_pmix,  // an srun task without PMIx (srun --mpi=none or pmi2), and an MPI that needs PMIx
};

// env: the process environment's lookup (std::getenv; tests pass a map's). needs_pmix: the MPI library bootstraps
// under srun only through PMIx (Open MPI 4 as Debian builds it: no PMI-1/PMI-2 components).
Launch detect_launch(const std::function<const char*(const char*)>& env, bool needs_pmix);

// "mpirun" or "srun", for messages about the ranks a launcher started.
const char* launcher_name(Launch launch);

// For the messages: how to start `ranks` ranks, "mpirun -np 2 tessera ... (or srun -n 2 --mpi=pmix tessera ...)".
std::string launch_hint(int ranks);

}  // namespace tessera::collective

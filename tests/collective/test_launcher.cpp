// detect_launch on the environments mpirun, srun (--mpi=pmix, none, pmi2), a Slurm batch script and a plain shell
// give a process (the variables as Open MPI 4.1 and Slurm 22.05 of Debian 12 set them).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "collective/launcher.h"

namespace tessera::collective {
namespace {

using Env = std::map<std::string, std::string>;

Launch detect(const Env& env, bool needs_pmix = true) {
  return detect_launch(
      [&](const char* var) {
        const auto it = env.find(var);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      needs_pmix);
}

const Env kSrunStep = {{"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}};

Env with(Env env, const Env& more) {
  env.insert(more.begin(), more.end());
  return env;
}

TEST(Launcher, APlainProcessOrABatchScriptHasNone) {
  EXPECT_EQ(detect({}), Launch::none);
  EXPECT_EQ(detect({{"HOME", "/root"}}), Launch::none);
  // sbatch's script itself: the job's variables and SLURM_PROCID, but no step of tasks.
  EXPECT_EQ(detect({{"SLURM_JOB_ID", "9"}, {"SLURM_PROCID", "0"}}), Launch::none);
}

TEST(Launcher, MpirunIsRecognisedAlsoInsideAnAllocation) {
  EXPECT_EQ(detect({{"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_RANK", "0"}}), Launch::mpirun);
  // mpirun in a batch script starts its daemons with srun: the ranks see the step's variables too.
  EXPECT_EQ(detect(with(kSrunStep, {{"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_RANK", "1"}})), Launch::mpirun);
  EXPECT_EQ(detect({{"PMI_SIZE", "2"}, {"PMI_RANK", "0"}}, false), Launch::mpirun);  // MPICH's hydra
}

TEST(Launcher, SrunWithPmixIsALaunch) {
  EXPECT_EQ(detect(with(kSrunStep, {{"PMIX_RANK", "1"}, {"PMIX_NAMESPACE", "slurm.pmix.12.0"}})), Launch::srun);
  EXPECT_STREQ(launcher_name(Launch::srun), "srun");
}

TEST(Launcher, SrunWithoutPmixIsNamedForAnMpiThatNeedsIt) {
  EXPECT_EQ(detect(kSrunStep), Launch::srun_without_pmix);  // --mpi=none, Slurm's default
  const Env pmi2 = with(kSrunStep, {{"PMI_FD", "11"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(detect(pmi2), Launch::srun_without_pmix);  // Debian's Open MPI has no PMI-2 client
  EXPECT_EQ(detect(pmi2, false), Launch::srun);        // an MPI that bootstraps from PMI-2 can
  EXPECT_EQ(detect(kSrunStep, false), Launch::srun_without_pmix);
  EXPECT_STREQ(launcher_name(Launch::srun_without_pmix), "srun");
}

TEST(Launcher, TheHintNamesBothLaunchers) {
  EXPECT_EQ(launch_hint(3), "mpirun -np 3 tessera ... (or srun -n 3 --mpi=pmix tessera ...)");
}

}  // namespace
}  // namespace tessera::collective

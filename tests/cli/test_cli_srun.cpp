// `srun -n N --mpi=pmix tessera run --tp N` on a throw-away one-node Slurm cluster (tests/cli/slurm_cluster.sh starts
// it and sets SLURM_CONF): the same text and logits as mpirun -np N and as one node, a clear error for srun without
// PMIx and for the wrong number of tasks, and a killed rank ends the step within seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "support/background_process.h"
#include "support/mpi_environment.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new test::MpiTestEnvironment);

std::string model() { return (test::source_dir() / "models/stories260K.gguf").string(); }

// The cluster's config: without it srun would look for a system-wide one. A failure, never a skip: CTest starts
// this binary through slurm_cluster.sh, which skips the test only where Slurm is not installed.
bool in_cluster() {
  if (std::getenv("SLURM_CONF") != nullptr) return true;
  ADD_FAILURE() << "SLURM_CONF is not set: run this test as `ctest -L slurm` (tests/cli/slurm_cluster.sh starts a "
                   "one-node cluster around it)";
  return false;
}

// --overcommit: a CI machine with one CPU still runs two tasks, as mpirun --oversubscribe does.
std::vector<std::string> srun(int n, const std::string& mpi, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {test::on_path("srun"), "--overcommit", "-n",
                                   std::to_string(n),     "--mpi=" + mpi, test::tessera_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> mpirun(int n, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {test::on_path("mpirun"), "--oversubscribe", "-np", std::to_string(n),
                                   test::tessera_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> alone(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {test::tessera_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Greedy and seeded sampling: srun's text equals mpirun's and one node's; srun's logits equal mpirun's bit for bit
// (the same ranks doing the same arithmetic), so srun changed nothing but the launcher.
TEST(Srun, TextAndLogitsEqualMpirunAndOneNode) {
  if (!in_cluster()) return;
  for (const std::vector<std::string>& sampling :
       {std::vector<std::string>{"--temp", "0"}, std::vector<std::string>{"--temp", "0.8", "--seed", "7"}}) {
    test::TempDir dir;
    const std::vector<std::string> args =
        plus({"run", "-m", model(), "-p", "Once upon a time", "-n", "16", "-t", "1", "--kv-type", "f32", "--no-plan"},
             sampling);
    const auto one = test::run_command(alone(args));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_GT(one.out.size(), std::string("Once upon a time").size() + 4) << one.out;
    const auto by_mpirun =
        test::run_command(mpirun(2, plus(args, {"--tp", "2", "--logits-out", (dir / "mpirun.f32").string()})));
    ASSERT_EQ(by_mpirun.exit_code, 0) << by_mpirun.err;
    const auto by_srun =
        test::run_command(srun(2, "pmix", plus(args, {"--tp", "2", "--logits-out", (dir / "srun.f32").string()})));
    ASSERT_EQ(by_srun.exit_code, 0) << by_srun.err;
    EXPECT_EQ(by_srun.out, one.out) << sampling.back();
    EXPECT_EQ(by_srun.out, by_mpirun.out) << sampling.back();
    EXPECT_NE(by_srun.err.find("2 ranks (tensor parallel)"), std::string::npos) << by_srun.err;
    const auto a = test::read_file(dir / "mpirun.f32");
    EXPECT_GT(a.size(), 0u);
    EXPECT_TRUE(a == test::read_file(dir / "srun.f32")) << "srun's logits differ from mpirun's";
  }
}

// A run without --tp under srun never starts MPI: one task is one plain run, whatever --mpi says.
TEST(Srun, APlainRunIsUnchanged) {
  if (!in_cluster()) return;
  const std::vector<std::string> args = {"run", "-m", model(), "-p", "Once", "-n", "8", "--temp", "0", "-t", "1"};
  const auto one = test::run_command(alone(args));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto under = test::run_command(srun(1, "none", args));
  ASSERT_EQ(under.exit_code, 0) << under.err;
  EXPECT_EQ(under.out, one.out);
}

// Slurm's default --mpi=none (and pmi2, which Debian's Open MPI cannot use) gives MPI no way to find the other ranks:
// tessera says so before MPI_Init would abort; too many tasks is an error naming srun.
TEST(Srun, WithoutPmixOrWithTooManyTasksIsAClearError) {
  if (!in_cluster()) return;
  const std::vector<std::string> args = {"run", "-m", model(), "-n", "4", "-t", "1", "--tp", "2", "--no-plan"};
  for (const char* mpi : {"none", "pmi2"}) {
    const auto r = test::run_command(srun(2, mpi, args));
    EXPECT_NE(r.exit_code, 0) << mpi;
    EXPECT_NE(r.err.find("srun started this rank without PMIx"), std::string::npos) << mpi << ": " << r.err;
    EXPECT_NE(r.err.find("srun -n 2 --mpi=pmix tessera"), std::string::npos) << mpi << ": " << r.err;
    EXPECT_EQ(r.err.find("MPI_Init"), std::string::npos) << mpi << ": " << r.err;
  }
  const auto three = test::run_command(srun(3, "pmix", args));
  EXPECT_NE(three.exit_code, 0);
  EXPECT_NE(three.err.find("needs 2 ranks, srun started 3 (srun -n 2 --mpi=pmix)"), std::string::npos) << three.err;
}

// Rank 1 killed mid-generation: srun reports the task and Slurm's PMIx plugin ends the step within seconds.
TEST(Srun, AKilledRankEndsTheStepWithinSeconds) {
  if (!in_cluster()) return;
  const std::string marker = std::to_string(::getpid());
  setenv("TESSERA_SRUN_TEST", marker.c_str(), 1);
  test::Background run(test::Background::Program{},
                       srun(2, "pmix",
                            {"run", "-m", model(), "-p", "Once upon a time", "-n", "100000", "-c", "100000",
                             "--ignore-eos", "-t", "1", "--tp", "2", "--collective-timeout", "2", "--no-plan"}));
  // Rank 1: the task of this test's srun whose SLURM_PROCID is 1.
  auto rank1 = [&marker] {
    return test::find_process([&marker](const std::string& cmdline, const std::string& env) {
      return cmdline.rfind(test::tessera_bin().string() + '\0', 0) == 0 &&
             env.find(std::string("\0SLURM_PROCID=1\0", 16)) != std::string::npos &&
             env.find("TESSERA_SRUN_TEST=" + marker + '\0') != std::string::npos;
    });
  };
  pid_t victim = -1;
  for (int i = 0; i < 300 && victim < 0; ++i) {
    std::this_thread::sleep_for(50ms);
    victim = rank1();
  }
  ASSERT_GT(victim, 0) << "rank 1 not found: " << run.output();
  std::this_thread::sleep_for(1500ms);  // generating by now
  const auto start = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  const int code = run.wait_exit(std::chrono::seconds(20));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string out = run.output();
  ASSERT_NE(code, -1) << "srun still running 20 s after rank 1 was killed: " << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(took, 10.0) << out;
  EXPECT_NE(out.find("task 1: Killed"), std::string::npos) << out;
}

}  // namespace
}  // namespace tessera

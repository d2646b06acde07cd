#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/environment.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

Environment environment_of(std::vector<EnvVar> vars) {
  return Environment(std::move(vars));
}

std::string refusal(const Environment& env, const std::optional<KnownGeometry>& known = std::nullopt) {
  auto geometry = job_geometry(env, known);
  return geometry.ok() ? "(accepted)" : geometry.error().message;
}

TEST(ModelArtsGeometry, ASingleHostNeedsNoHostCountIndexNorTaskName) {
  auto geometry = job_geometry(environment_of({{"MA_VJ_NAME", "ma-job-x"}}));
  ASSERT_TRUE(geometry.ok()) << geometry.error().message;
  EXPECT_EQ(geometry->hosts, 1u);
  EXPECT_EQ(geometry->index, 0u);
  EXPECT_EQ(geometry->task_name, "worker");
  EXPECT_EQ(geometry->nproc, std::nullopt) << "MA_NUM_GPUS unset: no count asked (one process per host)";
  EXPECT_EQ(geometry->source, "ModelArts");
  EXPECT_TRUE(geometry->all_named);
  EXPECT_EQ(geometry->peers, std::vector<std::string>{"ma-job-x-worker-0.ma-job-x"});
}

TEST(ModelArtsGeometry, PeersFollowThePlatformsDnsSchemeInHostOrder) {
  auto geometry = job_geometry(environment_of({{"MA_VJ_NAME", "ma-job-x"},
                                               {"MA_TASK_NAME", "trainer"},
                                               {"MA_NUM_HOSTS", "3"},
                                               {"MA_TASK_INDEX", "1"},
                                               {"MA_NUM_GPUS", "8"}}));
  ASSERT_TRUE(geometry.ok()) << geometry.error().message;
  EXPECT_EQ(geometry->hosts, 3u);
  EXPECT_EQ(geometry->index, 1u);
  EXPECT_EQ(geometry->job_name, "ma-job-x");
  EXPECT_EQ(geometry->nproc, 8u);
  EXPECT_EQ(job_geometry(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_GPUS", "0"}}))->nproc, 1u)
      << "a CPU host still runs one";
  EXPECT_EQ(geometry->peers, (std::vector<std::string>{"ma-job-x-trainer-0.ma-job-x", "ma-job-x-trainer-1.ma-job-x",
                                                       "ma-job-x-trainer-2.ma-job-x"}));
  EXPECT_EQ(peer_dns_name("j", "worker", 12), "j-worker-12.j");
}

TEST(ModelArtsGeometry, TheIndexFallsBackFromMaToVcToVkTaskIndex) {
  std::vector<EnvVar> base = {{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "4"}};
  auto with = [&](std::vector<EnvVar> extra) {
    std::vector<EnvVar> vars = base;
    vars.insert(vars.end(), extra.begin(), extra.end());
    return job_geometry(environment_of(std::move(vars)));
  };
  EXPECT_EQ(with({{"VK_TASK_INDEX", "3"}})->index, 3u);
  EXPECT_EQ(with({{"VK_TASK_INDEX", "3"}, {"VC_TASK_INDEX", "2"}})->index, 2u);
  EXPECT_EQ(with({{"VK_TASK_INDEX", "3"}, {"VC_TASK_INDEX", "2"}, {"MA_TASK_INDEX", "1"}})->index, 1u);
  EXPECT_EQ(with({{"MA_TASK_INDEX", ""}, {"VC_TASK_INDEX", "2"}})->index, 2u) << "empty counts as unset";
}

TEST(ModelArtsGeometry, SeveralHostsWithoutAnIndexAreRefusedRatherThanGuessed) {
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "2"}})),
            "MA_TASK_INDEX, VC_TASK_INDEX and VK_TASK_INDEX are all unset: a job of 2 hosts needs this host's index");
}

TEST(ModelArtsGeometry, AnIndexNotBelowTheHostCountIsRefusedNamingTheVariableItCameFrom) {
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "2"}, {"MA_TASK_INDEX", "2"}})),
            "MA_TASK_INDEX=2: not below the host count 2 (hosts are numbered 0..1)");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"VC_TASK_INDEX", "1"}})),
            "VC_TASK_INDEX=1: not below the host count 1 (hosts are numbered 0..0)");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "2"}, {"VK_TASK_INDEX", "-1"}})),
            "VK_TASK_INDEX=\"-1\": not a decimal number (digits only: no sign, space or fraction)");
}

TEST(ModelArtsGeometry, AHostCountThatIsZeroNotANumberOrTooLargeIsRefused) {
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "0"}})),
            "MA_NUM_HOSTS=\"0\": out of range 1..65536");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "abc"}})),
            "MA_NUM_HOSTS=\"abc\": not a decimal number (digits only: no sign, space or fraction)");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "65537"}, {"MA_TASK_INDEX", "0"}})),
            "MA_NUM_HOSTS=\"65537\": out of range 1..65536");
}

TEST(ModelArtsGeometry, TheJobNameIsRequiredAndNamesMustBeSafe) {
  EXPECT_EQ(refusal(environment_of({})), "MA_VJ_NAME is not set: the platform names the job with it");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_TASK_NAME", "a b"}})),
            "MA_TASK_NAME=\"a b\": not a safe name (1-200 of A-Z a-z 0-9 . _ -, starting with a letter or digit)");
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_GPUS", "many"}})),
            "MA_NUM_GPUS=\"many\": not a decimal number (digits only: no sign, space or fraction)");
}

TEST(ModelArtsGeometry, PeerNamesAResolverCannotLookUpAreRefused) {
  std::string long_name(60, 'a');
  std::string message = refusal(environment_of({{"MA_VJ_NAME", long_name}}));
  EXPECT_NE(message.find("is not a DNS name (labels of at most 63 bytes, 253 in all)"), std::string::npos) << message;
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", std::string(40, 'a')}})), "(accepted)");
}

// The table's count fills MA_NUM_HOSTS; the index is the platform's alone:
// peers reach host I by the platform's name for I, not by the table's order.
TEST(ModelArtsGeometry, ARankTablesCountFillsUnsetVariablesAndMustAgreeWithSetOnes) {
  KnownGeometry known{4, "the rank table /t.json, which lists 4 servers"};
  auto geometry = job_geometry(environment_of({{"MA_VJ_NAME", "j"}, {"MA_TASK_INDEX", "2"}}), known);
  ASSERT_TRUE(geometry.ok()) << geometry.error().message;
  EXPECT_EQ(geometry->hosts, 4u);
  EXPECT_EQ(geometry->index, 2u);
  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}}), known),
            "MA_TASK_INDEX, VC_TASK_INDEX and VK_TASK_INDEX are all unset: a job of 4 hosts needs this host's index");

  geometry = job_geometry(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "4"}, {"MA_TASK_INDEX", "0"}}), known);
  ASSERT_TRUE(geometry.ok()) << geometry.error().message;
  EXPECT_EQ(geometry->index, 0u);

  EXPECT_EQ(refusal(environment_of({{"MA_VJ_NAME", "j"}, {"MA_NUM_HOSTS", "2"}, {"MA_TASK_INDEX", "0"}}), known),
            "MA_NUM_HOSTS=2 disagrees with the rank table /t.json, which lists 4 servers");
}

TEST(Environment, MpiVariablesHaveThePlatformsDefaultsAndErrorsNameTheValue) {
  Environment empty = environment_of({});
  EXPECT_EQ(empty.sshd_port().value(), 36666);
  EXPECT_FALSE(empty.mpi_slots().value().has_value());
  EXPECT_EQ(empty.mpi_interfaces().value(), "eth0,bond0");
  EXPECT_FALSE(empty.home().value().has_value());

  Environment set = environment_of({{"MY_SSHD_PORT", "2222"},
                                    {"MY_MPI_SLOTS", "4"},
                                    {"MY_MPI_BTL_TCP_IF", "^docker,lo"},
                                    {"HOME", "/home/ma-user/"}});
  EXPECT_EQ(set.sshd_port().value(), 2222);
  EXPECT_EQ(set.mpi_slots().value(), 4u);
  EXPECT_EQ(set.mpi_interfaces().value(), "^docker,lo");
  EXPECT_EQ(set.home().value(), "/home/ma-user");

  EXPECT_EQ(environment_of({{"MY_SSHD_PORT", "70000"}}).sshd_port().error().message,
            "MY_SSHD_PORT=\"70000\": out of range 1..65535");
  EXPECT_EQ(environment_of({{"MY_MPI_SLOTS", "0"}}).mpi_slots().error().message,
            "MY_MPI_SLOTS=\"0\": out of range 1..1024");
  EXPECT_EQ(environment_of({{"MY_MPI_BTL_TCP_IF", "eth0 eth1"}}).mpi_interfaces().error().message,
            "MY_MPI_BTL_TCP_IF=\"eth0 eth1\": not a list of interface names (1-256 of A-Z a-z 0-9 . _ - : , ^ =)");
  EXPECT_EQ(environment_of({{"HOME", "home"}}).home().error().message, "HOME=\"home\": not an absolute path");
}

}  // namespace
}  // namespace trainit

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "os/fs.h"
#include "plan/mpi.h"
#include "plan/plan.h"
#include "plan/plan_json.h"

namespace trainit {
namespace {

const std::string kHost0 = "ma-job-x-worker-0.ma-job-x";
const std::string kHost1 = "ma-job-x-worker-1.ma-job-x";

class MpiPlanner : public ::testing::Test {
 protected:
  // The platform's variables for host `index` of `hosts`, 8 devices each.
  Result<Plan> plan(unsigned hosts, unsigned index, std::vector<EnvVar> extra = {}) {
    std::vector<EnvVar> vars = {{"PATH", "/usr/bin"},
                                {"HOME", "/home/ma-user"},
                                {"MA_VJ_NAME", "ma-job-x"},
                                {"MA_TASK_NAME", "worker"},
                                {"MA_NUM_HOSTS", std::to_string(hosts)},
                                {"MA_TASK_INDEX", std::to_string(index)},
                                {"MA_NUM_GPUS", "8"}};
    for (EnvVar& var : extra) {
      auto it = std::find_if(vars.begin(), vars.end(), [&](const EnvVar& v) { return v.name == var.name; });
      if (it != vars.end())
        vars.erase(it);
      vars.push_back(std::move(var));
    }
    PlanInput input;
    input.options = options;
    input.options.mode = Mode::kMpi;
    input.argv = {"python3", "train.py"};
    input.env = Environment(std::move(vars));
    input.fs = &fs;
    input.peer_addresses = addresses;
    input.privileges = privileges;
    return make_plan(input);
  }

  Plan planned(unsigned hosts, unsigned index, std::vector<EnvVar> extra = {}) {
    auto r = plan(hosts, index, std::move(extra));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Plan{};
  }

  std::string refusal(unsigned hosts, unsigned index, std::vector<EnvVar> extra = {}) {
    auto r = plan(hosts, index, std::move(extra));
    return r.ok() ? "(planned)" : r.error().message;
  }

  static const FileSpec* file(const Plan& plan, std::string_view path) {
    auto it = std::find_if(plan.files.begin(), plan.files.end(), [&](const FileSpec& f) { return f.path == path; });
    return it == plan.files.end() ? nullptr : &*it;
  }

  MemoryFileSystem fs;
  PlanOptions options;
  std::optional<PrivilegesPlan> privileges;  // --user's, as the caller settled them
  std::vector<std::string> addresses;
};

TEST_F(MpiPlanner, OneHostRunsMpirunHereFromALocalhostHostfileWithoutSshdOrSsh) {
  Plan p = planned(1, 0);
  EXPECT_EQ(p.mode, Mode::kMpi);
  EXPECT_EQ(p.signals, SignalPolicy::kStop);
  EXPECT_EQ(p.states,
            (std::vector<State>{State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit}));
  EXPECT_FALSE(p.sshd.has_value());
  ASSERT_TRUE(p.hosts.has_value()) << "mode mpi always says its geometry";
  EXPECT_EQ(p.hosts->hosts, 1u);
  ASSERT_TRUE(p.mpi.has_value());
  EXPECT_TRUE(p.mpi->host0);
  EXPECT_EQ(p.mpi->ssh_config_path, "");
  const FileSpec* hostfile = file(p, "/tmp/trainit-ma-job-x/hostfile");
  ASSERT_NE(hostfile, nullptr);
  EXPECT_EQ(hostfile->content, "localhost slots=8\n");
  ASSERT_EQ(p.processes.size(), 1u);
  const auto& argv = p.processes[0].argv;
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "plm_rsh_args"), argv.end()) << "no ssh for one host";
  EXPECT_EQ(argv[2], "8");
}

TEST_F(MpiPlanner, HostZeroStartsSshdMeetsItsPeersThenRunsOneMpirunOverEveryHost) {
  Plan p = planned(2, 0);
  EXPECT_EQ(p.states,
            (std::vector<State>{State::kStartSshd, State::kResolvePeers, State::kWaitPeers, State::kHostBarrier,
                                State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit}));
  ASSERT_TRUE(p.hosts.has_value());
  EXPECT_EQ(p.hosts->hosts, 2u);
  EXPECT_EQ(p.hosts->index, 0u);
  EXPECT_EQ(p.hosts->peers, (std::vector<std::string>{kHost0, kHost1}));
  EXPECT_EQ(p.hosts->control_port, 36660);
  ASSERT_TRUE(p.sshd.has_value());
  EXPECT_EQ(p.private_dir, "/tmp/trainit-ma-job-x");
  ASSERT_EQ(p.processes.size(), 1u);
  const ProcessSpec& mpirun = p.processes[0];
  EXPECT_EQ(mpirun.name, "mpirun");
  EXPECT_EQ(mpirun.group, GroupPolicy::kSession);
  EXPECT_EQ(mpirun.output, OutputPolicy::kLogAndConsole);
  EXPECT_EQ(mpirun.log_file, "/tmp/log/modelarts-job-x-mpirun.txt");
  EXPECT_EQ(mpirun.console_prefix, "[mpirun] ");
}

TEST_F(MpiPlanner, MpirunsArgvIsThePlatformScriptsPlusTheSshConfig) {
  Plan p = planned(2, 0);
  ASSERT_EQ(p.processes.size(), 1u);
  std::vector<std::string> expected = {"mpirun",
                                       "-np",
                                       "16",
                                       "-hostfile",
                                       "/tmp/trainit-ma-job-x/hostfile",
                                       "-mca",
                                       "plm_rsh_args",
                                       "-p 36666 -F /tmp/trainit-ma-job-x/ssh_config",
                                       "-tune",
                                       "/tmp/trainit-ma-job-x/mpi_tune",
                                       "-bind-to",
                                       "none",
                                       "-map-by",
                                       "slot",
                                       "-x",
                                       "NCCL_DEBUG=INFO",
                                       "-x",
                                       "NCCL_SOCKET_IFNAME=eth0,bond0",
                                       "-x",
                                       "NCCL_SOCKET_FAMILY=AF_INET",
                                       "-x",
                                       "HOROVOD_MPI_THREADS_DISABLE=1",
                                       "-mca",
                                       "pml",
                                       "ob1",
                                       "-mca",
                                       "btl",
                                       "^openib",
                                       "-mca",
                                       "plm_rsh_no_tree_spawn",
                                       "true",
                                       "python3",
                                       "train.py"};
  EXPECT_EQ(p.processes[0].argv, expected);
}

TEST_F(MpiPlanner, AsRootMpirunMayRunAsRootAndSshdTakesRootsKeyButNoPassword) {
  options.is_root = true;
  Plan p = planned(2, 0, {{"HOME", "/root"}});
  const auto& argv = p.processes.at(0).argv;
  auto allow = std::find(argv.begin(), argv.end(), "--allow-run-as-root");
  ASSERT_NE(allow, argv.end());
  EXPECT_EQ(*(allow + 1), "python3") << "just before the command";
  ASSERT_TRUE(p.sshd.has_value());
  EXPECT_NE(p.sshd->config.find("\nPermitRootLogin prohibit-password\n"), std::string::npos);
  EXPECT_NE(p.sshd->config.find("\nAllowUsers root\n"), std::string::npos);
  EXPECT_NE(p.sshd->config.find("\nAuthorizedKeysFile /root/.ssh/authorized_keys\n"), std::string::npos);
  EXPECT_EQ(p.dirs, (std::vector<std::string>{"/run/sshd", "/tmp/log"})) << "root's sshd needs /run/sshd";
}

// Root trainit, --user ma-user: mpirun's ssh logs in as ma-user, so sshd
// takes ma-user's keys by default, and mpirun needs no root permission.
TEST_F(MpiPlanner, AsRootWithUserSshdTakesTheJobUsersKeysAndMpirunIsNotAllowedRoot) {
  options.is_root = true;
  options.user = "ma-user";
  privileges.emplace();
  privileges->user = "ma-user (uid 1000, gid 100, groups 100)";
  privileges->home = "/home/ma-user";
  Plan p = planned(2, 0, {{"HOME", "/root"}});
  ASSERT_TRUE(p.sshd.has_value());
  EXPECT_NE(p.sshd->config.find("\nAllowUsers ma-user\n"), std::string::npos);
  EXPECT_NE(p.sshd->config.find("\nAuthorizedKeysFile /home/ma-user/.ssh/authorized_keys\n"), std::string::npos)
      << p.sshd->config;
  const auto& argv = p.processes.at(0).argv;
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--allow-run-as-root"), argv.end());
}

TEST_F(MpiPlanner, NotRootOnlyTrainitsOwnUserMayLogIn) {
  options.user = "ma-user";
  Plan p = planned(2, 1);
  const auto& config = p.sshd->config;
  EXPECT_NE(config.find("\nPermitRootLogin no\n"), std::string::npos);
  EXPECT_NE(config.find("\nAllowUsers ma-user\n"), std::string::npos);
  EXPECT_EQ(p.dirs, std::vector<std::string>{"/tmp/log"});

  options.user.clear();
  EXPECT_EQ(planned(2, 1).sshd->config.find("AllowUsers"), std::string::npos)
      << "an unknown non-root user: sshd, not root, can only let its own user in";
}

TEST_F(MpiPlanner, SshdIsKeyOnlyOnItsOwnPortWithHostKeysInThePrivateDir) {
  Plan p = planned(2, 1, {{"MY_SSHD_PORT", "2222"}});
  ASSERT_TRUE(p.sshd.has_value());
  const SshdPlan& sshd = *p.sshd;
  EXPECT_EQ(sshd.port, 2222);
  EXPECT_EQ(sshd.config_path, "/tmp/trainit-ma-job-x/sshd_config");
  EXPECT_EQ(sshd.host_key_dir, "/tmp/trainit-ma-job-x");
  EXPECT_EQ(sshd.host_keys, std::vector<std::string>{"/tmp/trainit-ma-job-x/ssh_host_ed25519_key"});
  EXPECT_EQ(sshd.authorized_keys, "/home/ma-user/.ssh/authorized_keys");
  for (std::string_view line :
       {"Port 2222", "ListenAddress 0.0.0.0", "HostKey /tmp/trainit-ma-job-x/ssh_host_ed25519_key", "PidFile none",
        "UsePAM no", "PubkeyAuthentication yes", "AuthorizedKeysFile /home/ma-user/.ssh/authorized_keys",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitEmptyPasswords no", "StrictModes yes"}) {
    EXPECT_NE(sshd.config.find("\n" + std::string(line) + "\n"), std::string::npos) << line;
  }
  EXPECT_EQ(sshd.process.argv,
            (std::vector<std::string>{"/usr/sbin/sshd", "-D", "-e", "-f", "/tmp/trainit-ma-job-x/sshd_config"}));
  EXPECT_EQ(sshd.process.group, GroupPolicy::kSession);
  EXPECT_EQ(sshd.process.output, OutputPolicy::kLogAndConsole);
  EXPECT_EQ(sshd.process.log_file, "/tmp/log/modelarts-job-x-sshd-1.txt");
  EXPECT_EQ(host_key_generation_argv("/k"), (std::vector<std::string>{"ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                                                                      "-C", "trainit host key", "-f", "/k"}));
}

TEST_F(MpiPlanner, OtherHostsKeepSshdUpAndStartNothingOfTheirOwn) {
  Plan p = planned(4, 3);
  EXPECT_EQ(p.states, (std::vector<State>{State::kStartSshd, State::kResolvePeers, State::kHostBarrier, State::kRunning,
                                          State::kStopping, State::kReaping, State::kExit}));
  EXPECT_TRUE(p.processes.empty());
  ASSERT_EQ(p.files.size(), 1u) << "the tune file only";
  EXPECT_EQ(p.files[0].path, "/tmp/trainit-ma-job-x/mpi_tune");
  ASSERT_TRUE(p.mpi.has_value());
  EXPECT_FALSE(p.mpi->host0);
  EXPECT_EQ(p.mpi->hostfile_path, "");
  EXPECT_TRUE(p.sshd.has_value());
  EXPECT_EQ(p.hosts->index, 3u);
}

TEST_F(MpiPlanner, SlotsComeFromMyMpiSlotsElseTheDevicesElseOne) {
  EXPECT_EQ(planned(2, 0).mpi->slots, 8u);
  EXPECT_EQ(planned(2, 0, {{"MY_MPI_SLOTS", "3"}}).mpi->slots, 3u);
  EXPECT_EQ(planned(2, 0, {{"MA_NUM_GPUS", ""}}).mpi->slots, 1u);
  EXPECT_EQ(planned(2, 0, {{"MA_NUM_GPUS", "0"}}).mpi->slots, 1u) << "a host without devices still runs one rank";
  Plan p = planned(4, 0, {{"MY_MPI_SLOTS", "3"}});
  EXPECT_EQ(p.processes.at(0).argv[2], "12");
  EXPECT_EQ(file(p, "/tmp/trainit-ma-job-x/hostfile")->content,
            "ma-job-x-worker-0.ma-job-x slots=3\nma-job-x-worker-1.ma-job-x slots=3\n"
            "ma-job-x-worker-2.ma-job-x slots=3\nma-job-x-worker-3.ma-job-x slots=3\n");
}

// Open MPI warns "-x LD_LIBRARY_PATH" of an unset variable on every run.
TEST_F(MpiPlanner, LdLibraryPathIsForwardedOnlyWhenSet) {
  auto forwards = [](const Plan& p) {
    const auto& argv = p.processes.at(0).argv;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "-x" && argv[i + 1] == "LD_LIBRARY_PATH") {
        return true;
      }
    }
    return false;
  };
  EXPECT_FALSE(forwards(planned(2, 0)));
  EXPECT_FALSE(forwards(planned(2, 0, {{"LD_LIBRARY_PATH", ""}})));
  EXPECT_TRUE(forwards(planned(2, 0, {{"LD_LIBRARY_PATH", "/usr/local/lib"}})));
}

// Every orted and rank mpirun starts opens -tune's path on its own host:
// without the file there, each prints "Unable to locate the variable file".
TEST_F(MpiPlanner, EveryHostWritesTheTuneFileAtThePathHost0sMpirunNames) {
  const Plan host0 = planned(3, 0);
  const auto& argv = host0.processes.at(0).argv;
  const auto tune = std::find(argv.begin(), argv.end(), "-tune");
  ASSERT_NE(tune, argv.end());
  ASSERT_NE(tune + 1, argv.end());
  const FileSpec* own = file(host0, *(tune + 1));
  ASSERT_NE(own, nullptr);
  for (unsigned index : {1U, 2U}) {
    const Plan other = planned(3, index);
    const FileSpec* copy = file(other, *(tune + 1));
    ASSERT_NE(copy, nullptr) << "host " << index << " has no " << *(tune + 1);
    EXPECT_EQ(copy->content.substr(0, 8), "-x PATH\n") << copy->content;
    EXPECT_EQ(copy->mode, 0600u);
    EXPECT_EQ(file(other, "/tmp/trainit-ma-job-x/hostfile"), nullptr) << "the hostfile stays host 0's";
  }
}

TEST_F(MpiPlanner, TheTuneFileForwardsThePlatformsNonEmptyVariablesByNameOnly) {
  Plan p = planned(2, 0,
                   {{"SHARED_DIR", "/s"},
                    {"S3_ENDPOINT", "e;x"},
                    {"VC_WORKER_HOSTS", "a,b"},
                    {"SCC_X", "1"},
                    {"CRED_TOKEN", "secret"},
                    {"MA_EMPTY", ""},
                    {"OTHER", "1"},
                    {"PATHS", "no"},
                    {"NOTIFY_SOCKET", "/run/n"}});
  const FileSpec* tune = file(p, "/tmp/trainit-ma-job-x/mpi_tune");
  ASSERT_NE(tune, nullptr);
  EXPECT_EQ(tune->mode, 0600u);
  EXPECT_EQ(tune->content,
            "-x PATH\n-x MA_VJ_NAME\n-x MA_TASK_NAME\n-x MA_NUM_HOSTS\n-x MA_TASK_INDEX\n-x MA_NUM_GPUS\n"
            "-x SHARED_DIR\n-x S3_ENDPOINT\n-x VC_WORKER_HOSTS\n-x SCC_X\n-x CRED_TOKEN\n");
  EXPECT_EQ(tune->content.find("secret"), std::string::npos) << "values stay in mpirun's environment";
}

TEST_F(MpiPlanner, ForwardedVariablesAreThePlatformScriptsPrefixesAndPath) {
  for (std::string_view name : {"MA_X", "SHARED_X", "S3_X", "VC_WORKER_X", "SCCX", "CREDX", "PATH"})
    EXPECT_TRUE(is_forwarded_to_ranks(name)) << name;
  for (std::string_view name : {"PATHX", "MY_SHARED_X", "VC_TASK_INDEX", "ma_x", "", "MA_A-B", "MA_A.B"})
    EXPECT_FALSE(is_forwarded_to_ranks(name)) << name;
}

TEST_F(MpiPlanner, TheSshConfigCoversOnlyThePeersOnTheSshdPort) {
  options.ssh_identity = "/etc/keys/id_ed25519";
  Plan p = planned(2, 0, {{"MY_SSHD_PORT", "2222"}});
  const FileSpec* config = file(p, "/tmp/trainit-ma-job-x/ssh_config");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->content, render_ssh_config({kHost0, kHost1}, {}, 2222, "/etc/keys/id_ed25519"));
  EXPECT_NE(config->content.find("Host " + kHost1 +
                                 "\n  Port 2222\n  StrictHostKeyChecking no\n  UserKnownHostsFile "
                                 "/dev/null\n  LogLevel ERROR\n  BatchMode yes\n  IdentityFile "
                                 "/etc/keys/id_ed25519\n  IdentitiesOnly yes\n"),
            std::string::npos)
      << config->content;
  std::string resolved = render_ssh_config({"a"}, {"10.0.0.1"}, 22, "");
  EXPECT_NE(resolved.find("\nHost a 10.0.0.1\n  Port 22\n"), std::string::npos) << resolved;
  EXPECT_EQ(resolved.find("IdentityFile"), std::string::npos) << "no --ssh-identity: ssh's own defaults";
}

TEST_F(MpiPlanner, OnceResolvedTheHostfileAndSshConfigNameThePeersByAddress) {
  EXPECT_FALSE(planned(2, 0).mpi->addresses);
  addresses = {"10.0.0.1", "10.0.0.2"};
  Plan p = planned(2, 0);
  EXPECT_TRUE(p.mpi->addresses);
  EXPECT_EQ(file(p, "/tmp/trainit-ma-job-x/hostfile")->content, "10.0.0.1 slots=8\n10.0.0.2 slots=8\n");
  EXPECT_NE(file(p, "/tmp/trainit-ma-job-x/ssh_config")->content.find("Host " + kHost1 + " 10.0.0.2\n"),
            std::string::npos);
  EXPECT_EQ(render_hostfile({"10.0.0.1", "10.0.0.2"}, 8), "10.0.0.1 slots=8\n10.0.0.2 slots=8\n");

  addresses = {"10.0.0.1"};
  EXPECT_EQ(refusal(2, 0), "1 peer addresses for a job of 2 hosts");
  addresses = {"10.0.0.1", "host; rm"};
  EXPECT_EQ(refusal(2, 0), "peer address \"host; rm\" of host 1: not an IPv4 or IPv6 address");
}

TEST_F(MpiPlanner, OptionsPlaceTheKeysThePrivateDirAndTheControlPort) {
  options.ssh_authorized_keys = "/etc/trainit/authorized_keys";
  options.private_dir = "/run/trainit/job";
  options.control_port = 40000;
  Plan p = planned(2, 0, {{"HOME", ""}});
  EXPECT_EQ(p.private_dir, "/run/trainit/job");
  EXPECT_EQ(p.hosts->control_port, 40000);
  EXPECT_EQ(p.sshd->authorized_keys, "/etc/trainit/authorized_keys");
  EXPECT_EQ(p.mpi->hostfile_path, "/run/trainit/job/hostfile");
  EXPECT_EQ(p.sshd->config_path, "/run/trainit/job/sshd_config");
}

TEST_F(MpiPlanner, PathsThatCannotStandUnquotedInConfigsOrMpirunsArgumentsAreRefused) {
  options.private_dir = "/tmp/my job";
  EXPECT_EQ(refusal(2, 0),
            "--private-dir \"/tmp/my job\": not an absolute path in normal form of A-Z a-z 0-9 / . _ - + @ (it is "
            "written unquoted into sshd and ssh configs and mpirun's arguments)");
  options.private_dir = "relative";
  EXPECT_NE(refusal(2, 0).find("--private-dir \"relative\""), std::string::npos);
  options.private_dir.clear();
  options.ssh_identity = "/a,b";
  EXPECT_NE(refusal(2, 0).find("--ssh-identity \"/a,b\""), std::string::npos);
  options.ssh_identity.clear();
  options.ssh_authorized_keys = "/keys/%u";
  EXPECT_NE(refusal(2, 0).find("--ssh-authorized-keys \"/keys/%u\""), std::string::npos);
  options.ssh_authorized_keys.clear();
  EXPECT_NE(refusal(2, 0, {{"HOME", "/home/a b"}}).find("HOME=\"/home/a b\""), std::string::npos);
  options.user = "a b";
  EXPECT_NE(refusal(2, 0).find("user \"a b\": not a user name"), std::string::npos);
}

TEST_F(MpiPlanner, BadGeometryOrMpiVariablesAreRefusedBeforeAnythingStarts) {
  EXPECT_EQ(refusal(2, 2), "MA_TASK_INDEX=2: not below the host count 2 (hosts are numbered 0..1)");
  EXPECT_EQ(refusal(2, 0, {{"MA_NUM_HOSTS", "abc"}}),
            "MA_NUM_HOSTS=\"abc\": not a decimal number (digits only: no sign, space or fraction)");
  EXPECT_EQ(refusal(2, 0, {{"MA_VJ_NAME", ""}}), "MA_VJ_NAME is not set: the platform names the job with it");
  EXPECT_EQ(refusal(2, 0, {{"MY_SSHD_PORT", "70000"}}), "MY_SSHD_PORT=\"70000\": out of range 1..65535");
  EXPECT_EQ(refusal(2, 0, {{"MY_SSHD_PORT", "36660"}}),
            "MY_SSHD_PORT=36660: the same port as the hosts' control channel (--control-port 36660)");
  EXPECT_EQ(refusal(1, 0, {{"MY_SSHD_PORT", "36660"}}), "(planned)") << "one host: no sshd, no control channel";
  EXPECT_EQ(refusal(2, 0, {{"MY_MPI_SLOTS", "x"}}),
            "MY_MPI_SLOTS=\"x\": not a decimal number (digits only: no sign, space or fraction)");
  EXPECT_EQ(refusal(2, 0, {{"HOME", ""}}),
            "HOME is not set: sshd's authorized keys are $HOME/.ssh/authorized_keys unless --ssh-authorized-keys "
            "names them");
  EXPECT_EQ(refusal(1, 0, {{"HOME", ""}}), "(planned)") << "one host: no sshd";
}

TEST_F(MpiPlanner, ThePlanJsonShowsTheGeometrySshdAndMpi) {
  options.is_root = true;
  auto doc = nlohmann::json::parse(plan_to_json(planned(2, 0)));
  EXPECT_EQ(doc["mode"], "mpi");
  EXPECT_EQ(doc["hosts"]["hosts"], 2);
  EXPECT_EQ(doc["hosts"]["index"], 0);
  EXPECT_EQ(doc["hosts"]["control_port"], 36660);
  EXPECT_EQ(doc["hosts"]["peers"], nlohmann::json::array({kHost0, kHost1}));
  EXPECT_EQ(doc["private_dir"], "/tmp/trainit-ma-job-x");
  EXPECT_EQ(doc["sshd"]["port"], 36666);
  EXPECT_EQ(doc["sshd"]["user"], "root");
  EXPECT_EQ(doc["sshd"]["host_keys"][0]["generate"][0], "ssh-keygen");
  EXPECT_EQ(doc["sshd"]["process"]["argv"][0], "/usr/sbin/sshd");
  EXPECT_EQ(doc["mpi"]["host0"], true);
  EXPECT_EQ(doc["mpi"]["peers_by"], "name");
  EXPECT_EQ(doc["processes"][0]["name"], "mpirun");

  auto other = nlohmann::json::parse(plan_to_json(planned(2, 1)));
  EXPECT_EQ(other["mpi"], nlohmann::json({{"host0", false}, {"slots", 8}}));
}

}  // namespace
}  // namespace trainit

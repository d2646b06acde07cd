// The MPI / Horovod / MindSpore-GPU launch (docs/contract.md §3): sshd on every
// host, mpirun on host 0 only.
//
// Inputs read: the job geometry (platform/geometry.h: MA_NUM_HOSTS, the task
// index, MA_VJ_NAME, MA_TASK_NAME, MA_NUM_GPUS), MY_SSHD_PORT (default
// 36666), MY_MPI_SLOTS (default MA_NUM_GPUS; 1 when that is unset or 0),
// MY_MPI_BTL_TCP_IF (NCCL_SOCKET_IFNAME, default eth0,bond0), HOME (the
// default authorized keys), MA_VJ_NAME's job id for the log names,
// MA_MOUNT_PATH (log dir), and PlanOptions' control port, ssh paths, private
// dir and user.
//
// One host: no sshd, no ssh: mpirun starts `slots` ranks here from a hostfile
// naming localhost. States spawn → running → stopping → reaping → exit.
//
// Several hosts, every host: a per-job sshd (SshdPlan) on MY_SSHD_PORT,
// key-only, started first: it needs nothing from the others, and the sooner
// it listens the sooner host 0 finds it. Then:
//
//   host 0:  start_sshd → resolve_peers → wait_peers → host_barrier → spawn
//            → running → stopping → reaping → exit
//   others:  start_sshd → resolve_peers → host_barrier → running → stopping
//            → reaping → exit
//
// Host 0 resolves every peer (the hostfile holds addresses, as the
// reference's does), waits until each peer's sshd accepts connections, meets
// the others at the barrier, then starts one process:
//
//   mpirun -np <hosts×slots> -hostfile <f> -mca plm_rsh_args "-p <port> -F <ssh config>"
//          -tune <f> -bind-to none -map-by slot -x NCCL_DEBUG=INFO
//          -x NCCL_SOCKET_IFNAME=<MY_MPI_BTL_TCP_IF> -x NCCL_SOCKET_FAMILY=AF_INET
//          -x HOROVOD_MPI_THREADS_DISABLE=1 [-x LD_LIBRARY_PATH] -mca pml ob1
//          -mca btl ^openib -mca plm_rsh_no_tree_spawn true [--allow-run-as-root] COMMAND...
//
// (-x LD_LIBRARY_PATH only when it is set: Open MPI warns about an unset one.)
//
// in its own session, its output through the log relay into
// <logdir>/<job id>-mpirun.txt and the console ("[mpirun] "). The other
// hosts start nothing of their own: in running they keep sshd up for
// mpirun's ranks until host 0 releases them (the control channel) or a stop
// comes; the job's exit code is host 0's. (The reference parks them in
// `sleep 365d` and kills that through a second mpirun.)
//
// Plan::files: the tune file on every host (each orted and rank opens the
// path mpirun gives it on its own host), and on host 0 the hostfile and the
// ssh client config, all in Plan::private_dir. Until the plan is made again with
// PlanInput::peer_addresses (after resolve_peers), the hostfile and the ssh
// config name the peers by DNS name (MpiPlan::addresses false).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"

namespace trainit {

[[nodiscard]] Result<Plan> plan_mpi(const PlanInput& input);

// The MPI hostfile: "<host> slots=<slots>\n" for each of `hosts` (addresses
// after resolve_peers, DNS names before), in host order.
[[nodiscard]] std::string render_hostfile(const std::vector<std::string>& hosts, unsigned slots);

// mpirun's -tune file: "-x NAME" for each variable of `env` forwarded to the
// ranks (is_forwarded_to_ranks) whose value is not empty, in `env`'s order.
// Names only: each rank gets the value mpirun itself has (the reference
// writes "-x NAME=value", which a value with a newline or a ';' breaks).
[[nodiscard]] std::string render_tune_file(const std::vector<EnvVar>& env);

// MA_*, SHARED_*, S3_*, VC_WORKER_*, SCC*, CRED* and PATH, as the platform's
// script forwards them; and only names of A-Z a-z 0-9 _ (what Open MPI's tune
// file reader takes).
[[nodiscard]] bool is_forwarded_to_ranks(std::string_view name) noexcept;

// ssh's client config for mpirun's ssh (ssh -F): one "Host" entry per peer,
// matching its DNS name and, when known, its address (`addresses` empty or
// one per name): Port, no host key checks (each host makes new keys per
// job), no prompts, errors only, and IdentityFile + IdentitiesOnly when
// `identity` is not empty.
[[nodiscard]] std::string render_ssh_config(const std::vector<std::string>& names,
                                            const std::vector<std::string>& addresses, std::uint16_t port,
                                            std::string_view identity);

// The command that makes the missing host key `key_path`
// (ssh-keygen -q -t ed25519 -N "" -C <comment> -f <key_path>).
[[nodiscard]] std::vector<std::string> host_key_generation_argv(std::string_view key_path);

}  // namespace trainit

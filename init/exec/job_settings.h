// The job phases' settings, as the command line gives them: plain data that
// Options holds (exec/cli.h), that the option table's rows read values into
// (exec/options.cpp: a row points at its field here), and that the phases
// take as they are (job/spawn.h, job/arena_watch.h, job/hosts.h). Each
// default is written here, once.
//
// Exec mode parses these options too (one table for every mode), so the
// structs live beside the parser; nothing here knows the job's code.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "base/time.h"

namespace trainit {

// --preflight, --preflight-timeout, --device-check.
struct PreflightSettings {
  bool devices = false;  // --preflight devices (else none)
  // --preflight-timeout: the bound of the devices' checks and of the arena's
  // preflight.
  Duration timeout = std::chrono::seconds(10);
  std::string device_check;  // --device-check; empty: found (job/device_preflight.h)
};

// --coll-arena, --hang-timeout, --hang-action.
struct ArenaSettings {
  std::optional<size_t> heap = size_t{32} << 20;  // trainit_alloc's heap shared by a host's ranks; nullopt: off
  Duration hang_timeout{0};                       // 0: no hang detection
  bool hang_stop = false;                         // --hang-action stop (else report)
};

// What a start of the job needs beyond its plan (job/spawn.h).
struct SpawnSettings {
  PreflightSettings preflight;
  ArenaSettings arena;
};

// Several hosts and --mode mpi: --peer-timeout, --barrier-timeout,
// --peer-loss, --job-secret-file (job/hosts.h).
struct PeerSettings {
  Duration peer_timeout = std::chrono::seconds(600);      // names resolved, every sshd answering
  Duration barrier_timeout = std::chrono::seconds(1800);  // every host checked in
  Duration peer_loss = std::chrono::seconds(10);          // a host not heard from this long is lost
  std::string job_secret_file;                            // empty: the secret is TRAINIT_JOB_SECRET's
};

}  // namespace trainit

// The device preflight (--preflight devices, docs/modes/device-preflight.md):
// before a start's ranks, one trainit-device-check (init/tools/device_check.cpp)
// per local device, each with the environment the plan gives the rank of that
// device, proves that the devices open, allocate, meet and sum a known
// pattern exactly through the collective library. A device that fails, is
// killed, hangs past the bound or sums wrong fails the job before any rank
// starts (exit 79), in one line naming the device and the step.
//
// PID 1 stays static and loads nothing: only the checks load the backend.
// It trusts nothing they say: it reads a bounded amount of each pipe, takes
// only the fixed step names in their order from stdout, and keeps one line
// of stderr, made printable, as the reason. Nothing of it waits: the checks
// are sources of PID 1's loop (DevicePreflight), ended within the bound.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "base/time.h"
#include "exec/job_settings.h"
#include "exec/pid1.h"
#include "job/device_check_log.h"
#include "loop/loop.h"
#include "plan/plan.h"
#include "platform/environment.h"

namespace trainit {

// --- the plan's side -------------------------------------------------------

// The device a rank of the plan uses, as the fake device reads it
// (device_number() in src/coll/device_check.h).
[[nodiscard]] std::string device_of(const ProcessSpec& rank);

// The backend the checks load: TRAINIT_COLL_BACKEND from the job's
// environment; unset, "ascend" on the platform's Ascend hosts (modes ascend,
// msrun, msrun-exec, or ASCEND_VISIBLE_DEVICES set), else "cuda".
[[nodiscard]] std::string preflight_backend(const Environment& env, Mode mode);

// trainit-device-check: `given` (--device-check) when set, else beside
// trainit's own binary (`self`'s directory), else `installed`. The error
// names where it looked.
[[nodiscard]] Result<std::string> find_device_check(const std::string& given, const std::string& self,
                                                    const std::string& installed);
// The same for this trainit: /proc/self/exe, and the path it was built to
// install the check at.
[[nodiscard]] Result<std::string> find_device_check(const std::string& given);

// --- the run ----------------------------------------------------------------

struct DevicePreflightSettings {
  std::string check;    // trainit-device-check's path
  std::string backend;  // what the checks load
  Duration bound = PreflightSettings{}.timeout;
};

// One check per rank (each with its environment and working directory, as
// the job's user), run from the loop: their pipes, their ends (pidfds) and
// the bound are its sources, so signals, heartbeats and control frames are
// taken meanwhile. `done` is called once, from the loop, when every check
// ended: ok, or exit_code::kDeviceFailed and the failure line. A check still
// running at the bound is killed; one not reaped kKillGrace after its
// SIGKILL (asleep in a driver) is left to the job's stop. Destroying the
// preflight kills every check still running: its group, and the check by
// its pidfd (one that left its group too); the loop reaps them.
class DevicePreflight {
 public:
  using DoneFn = std::function<void(Result<void>)>;

  DevicePreflight(Loop& loop, const Pid1& pid1, DevicePreflightSettings settings, DoneFn done);
  DevicePreflight(const DevicePreflight&) = delete;
  DevicePreflight& operator=(const DevicePreflight&) = delete;
  ~DevicePreflight();

  // Starts the checks. The error (exit_code::kOsError) when one could not
  // start; `done` is not called then.
  [[nodiscard]] Result<void> start(const std::vector<const ProcessSpec*>& ranks);

 private:
  struct Check;

  Result<void> start_one(const ProcessSpec& rank, std::vector<std::string> argv);
  template <typename Feed>
  void read_pipe(Fd& fd, SourceHandle& watch, Feed feed);
  [[nodiscard]] CheckEnd end_of(const Check& c, int status) const;
  void on_end(Check& c, int status);
  void report(Check& c, int status);
  void kill(Check& c) noexcept;
  void stop_others();
  void finish_if_done();

  Loop& loop_;
  const Pid1& pid1_;
  DevicePreflightSettings settings_;
  DoneFn done_;
  std::vector<std::unique_ptr<Check>> checks_;
  std::vector<CheckEnd> ends_;
  SourceHandle bound_, give_up_;
  Clock::time_point started_;
  bool finished_ = false;
};

}  // namespace trainit

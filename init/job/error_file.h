// A rank's own account of its failure: TORCHELASTIC_ERROR_FILE.
//
// torchrun's agent gives each worker a file of its own in that variable; a
// script whose entry point is decorated with PyTorch's @record
// (torch.distributed.elastic.multiprocessing.errors) writes its uncaught
// exception there as JSON:
//
//   {"message": {"message": "ValueError: boom",
//                "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1763771234"},
//                "errorCode": 1}}    <- errorCode: added when an agent passes a child's on
//
// or, in its newer form, {"message": "text", "timestamp": N}. The torchrun
// modes plan the variable (<private dir>/error-<rank>.json, plan/frameworks.h);
// when a rank fails, the runner reads the file and names the exception and
// its innermost frame in the job's cause, as torchrun's "Root Cause (first
// observed failure)" does.
//
// The file is the rank's, not trusted: it is read only from the job's
// private directory (trainit's own, made by the runner before the ranks
// start: nobody else can put anything there; with --user the job's user
// writes only the files trainit made for it), at most kMaxErrorFile bytes of a regular file of one
// name, without following a link and without waiting on a FIFO, only when
// written since this start began, and parsed without exceptions; whatever
// does not fit the format is ignored, and what is shown of it is cut and
// kept to one line.
#pragma once

#include <time.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"

namespace trainit {

inline constexpr std::string_view kErrorFileVariable = "TORCHELASTIC_ERROR_FILE";
inline constexpr std::size_t kMaxErrorFile = std::size_t{64} << 10;

struct RootCause {
  std::string exception;  // "ValueError: boom", one line
  std::string frame;      // the innermost frame, "/w/train.py:10 in main"; empty: none given
};

// The root cause an error file's text gives, or nullopt when it gives none.
[[nodiscard]] std::optional<RootCause> parse_error_file(std::string_view text);

// "ValueError: boom at /w/train.py:10 in main".
[[nodiscard]] std::string describe(const RootCause& cause);

// The wall clock as file times read it (CLOCK_REALTIME_COARSE: the kernel
// stamps a write with the coarse clock, which may lag the fine one by a
// tick).
[[nodiscard]] struct timespec file_clock_now();

// The file at `path` read as the header says, when it was last written at
// or after `since`; nullopt when there is none, or nothing usable in it.
[[nodiscard]] std::optional<RootCause> read_error_file(const std::string& path, const struct timespec& since);

// ": ValueError: boom at /w/train.py:10 in main" for a process of the plan
// whose error file holds a root cause written at or after `since` (when this
// start began); "" otherwise (no such variable, one naming a file outside
// the plan's `private_dir`, no file, an older one, nothing usable).
[[nodiscard]] std::string root_cause_of(const ProcessSpec& spec, const std::string& private_dir,
                                        const struct timespec& since);

// Before a start, once the runner made `private_dir`: each process's error
// file of the last start is removed, so that a file found after a failure
// is this start's. When the processes run as another user (`for_the_job`),
// who cannot create files in trainit's directory, each file is made for
// them instead, anew and empty, and handed to that user (trainit keeps
// CAP_CHOWN for it while restarts may come), through base/safe_fs.h. Only
// files directly in `private_dir` are the plan's: a variable the job's
// environment set to anything else is left alone, and never read. A file
// that cannot be made is one warning; the job goes on.
void prepare_error_files(const std::string& private_dir, const std::vector<ProcessSpec>& processes,
                         bool for_the_job = false);

}  // namespace trainit

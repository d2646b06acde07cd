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
// private directory (mode 0700, trainit's user: nobody else can put anything
// there), at most kMaxErrorFile bytes of a regular file of one name, without
// following a link and without waiting on a FIFO, and parsed without
// exceptions; whatever does not fit the format is ignored, and what is shown
// of it is cut and kept to one line.
#pragma once

#include <cstddef>
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

// The file at `path` read as the header says; nullopt when there is none,
// or nothing usable in it.
[[nodiscard]] std::optional<RootCause> read_error_file(const std::string& path);

// ": ValueError: boom at /w/train.py:10 in main" for a process of the plan
// whose error file holds a root cause; "" otherwise (no such variable, one
// naming a file outside the plan's `private_dir`, no file, nothing usable).
[[nodiscard]] std::string root_cause_of(const ProcessSpec& spec, const std::string& private_dir);

// Before a start: the private directory the error files live in is made
// (mode 0700, as plan/plan.h says), and each process's file of the last
// start is removed, so that a file found after a failure is this start's.
// Only files directly in `private_dir` are the plan's: a variable the
// job's environment set to anything else is left alone, and never read.
// When the directory cannot be made, the processes lose the variable (the
// job runs; its causes only lack the exceptions) and a warning says why.
void prepare_error_files(const std::string& private_dir, std::vector<ProcessSpec>& processes);

}  // namespace trainit

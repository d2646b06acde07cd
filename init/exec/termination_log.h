// Kubernetes' termination message (the file a container's
// terminationMessagePath names): how the job, or exec mode's PROGRAM, ended,
// in one line, written once at the end by every mode.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trainit {

// Kubernetes' termination message: at most 4096 bytes of the file the
// container's terminationMessagePath names (/dev/termination-log).
inline constexpr std::size_t kTerminationLogMax = 4096;
inline constexpr const char* kDefaultTerminationLog = "/dev/termination-log";

// Writes `line` (its secrets hidden, base/redact.h, then cut to
// kTerminationLogMax with its newline, controls and malformed bytes as \xNN)
// to the file at
// `path` in one write from its start, replacing what it held. Only a file
// that is there: nothing is created, a symbolic link, a FIFO, a device or a
// file with other names is refused, and nothing here blocks. Errors name the
// path; errnum ENOENT when there is no such file.
Result<void> write_termination_log(const std::string& path, std::string_view line);

}  // namespace trainit

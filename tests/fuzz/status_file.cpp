// Fuzz target: `trainit status` reading a status file (init/cmd/status_cmd.h),
// which anyone who can write where it lies may have written.
//
// The input: the file's bytes.
//
// Properties, besides no sanitizer finding: parse_status() accepts the
// input or names the path in one line; what it accepts renders as whole
// lines without a control byte but '\n', and its exit status is 0 until the
// job ended, then the job's code (or 65 when the file has none); a status
// file trainit writes (status_file.h) of what was read parses back to the
// same state, host and exit code.
#include "job/status_file.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cmd/status_cmd.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  static fuzz::CheckedLog log;
  constexpr std::string_view kPath = "/tmp/trainit-status-fuzz.json";
  auto status = parse_status(fuzz::as_text(data, size), kPath);
  if (!status) {
    FUZZ_CHECK(fuzz::one_line(status.error().message), status.error().message);
    FUZZ_CHECK(status.error().message.find(kPath) != std::string::npos, status.error().message);
    return 0;
  }
  const std::string text = render_status(*status, 1.8e9);
  FUZZ_CHECK(text.empty() || text.back() == '\n', text);
  for (char c : text) {
    FUZZ_CHECK(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f), text);
  }
  const int code = status_exit_code(*status);
  if (status->state != "exit") {
    FUZZ_CHECK(code == 0, std::to_string(code));
  } else {
    FUZZ_CHECK(status->exit_code ? code == *status->exit_code : code == 65, std::to_string(code));
  }
  return 0;
}

// Fuzz target: what a device check writes to PID 1 during the device
// preflight (init/job/device_check_log.h): its stdout, where only the step names
// belong, and its stderr, of which one line is the reason.
//
// The input: a first byte that says where the stdout ends (its value times
// the input's size / 256), the rest the two streams.
//
// Properties, besides no sanitizer finding: the step read is one of the
// steps or none, whatever pieces the bytes come in (all at once or one byte
// at a time give the same step and the same verdict); a stdout with more
// than StepLog::kMaxBytes is broken; the reason is one printable line of
// bounded size; the failure line made of the ends is one line that names
// the device and the step.
#include "coll/device_check.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "job/device_check_log.h"

namespace trainit {
namespace {

void check_steps(std::string_view out) {
  StepLog whole;
  whole.feed(out);
  StepLog bytewise;
  for (char c : out) {
    bytewise.feed(std::string_view(&c, 1));
  }
  FUZZ_CHECK(whole.step() >= -1 && whole.step() < coll::kDeviceCheckStepCount, std::to_string(whole.step()));
  FUZZ_CHECK(whole.step() == bytewise.step(), "the pieces changed the step");
  FUZZ_CHECK(whole.broken().has_value() == bytewise.broken().has_value(), "the pieces changed the verdict");
  if (out.size() > StepLog::kMaxBytes) {
    FUZZ_CHECK(whole.broken().has_value(), "more than kMaxBytes on stdout is no check's");
  }
  if (whole.broken()) {
    FUZZ_CHECK(fuzz::one_line(*whole.broken()), *whole.broken());
  }
}

std::string check_reason(std::string_view err) {
  ReasonLog log;
  log.feed(err);
  std::string reason = log.reason();
  FUZZ_CHECK(fuzz::one_line(reason), reason);
  FUZZ_CHECK(reason.size() <= 4 * ReasonLog::kMaxLine, reason);
  for (char c : reason) {
    FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, reason);
  }
  return reason;
}

void check_failure_line(std::string_view out, const std::string& reason, uint8_t how) {
  StepLog steps;
  steps.feed(out);
  std::vector<CheckEnd> ends(2);
  ends[0].device = "0";
  ends[0].how = static_cast<CheckEnd::How>(how % 6);
  ends[0].status = how;
  ends[0].step = std::string(steps.step_name());
  ends[0].reason = reason;
  ends[1].device = "1";
  ends[1].how = static_cast<CheckEnd::How>((how / 6) % 6);
  ends[1].step = "open";
  const auto line = preflight_failure(ends, std::chrono::seconds(10));
  const bool any_failed = ends[0].how != CheckEnd::How::kPassed || ends[1].how != CheckEnd::How::kPassed;
  FUZZ_CHECK(line.has_value() == any_failed, "a failure line without a failure, or none for one");
  if (line) {
    FUZZ_CHECK(fuzz::one_line(*line), *line);
    FUZZ_CHECK(line->find("device preflight failed: device ") == 0, *line);
  }
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static trainit::fuzz::CheckedLog log;
  if (size == 0) {
    return 0;
  }
  const std::string_view rest = trainit::fuzz::as_text(data + 1, size - 1);
  const size_t split = rest.size() * data[0] / 256;
  const std::string_view out = rest.substr(0, split);
  const std::string_view err = rest.substr(split);
  trainit::check_steps(out);
  const std::string reason = trainit::check_reason(err);
  trainit::check_failure_line(out, reason, data[0]);
  return 0;
}

// The static build's terminate handler.
//
// libstdc++'s default one demangles the exception's type name for its
// message, which links the whole demangler (~50 KiB of code) into trainit;
// and in a static PID 1 every 64 KiB of code is resident memory. Defining the
// handler variable here keeps libstdc++'s definition, and the demangler, out.
// Only for the static build: a shared libstdc++ has its own definition.
#include <unistd.h>

#include <cstdlib>
#include <exception>

#include "base/log.h"

namespace {

[[noreturn]] void trainit_terminate() noexcept {
  constexpr char kMessage[] = "trainit: fatal: std::terminate (an unhandled exception)\n";
  trainit::log_flush(100);  // what the console holds first, briefly
  (void)trainit::write_now(STDERR_FILENO, {kMessage, sizeof(kMessage) - 1});
  std::abort();
}

}  // namespace

namespace __cxxabiv1 {
// NOLINTNEXTLINE(bugprone-reserved-identifier,readability-identifier-naming)
std::terminate_handler __terminate_handler = trainit_terminate;
}  // namespace __cxxabiv1

// Secrets trainit never writes: the hosts' shared secret and the values of
// variables whose names say they are secret (see init/exec/privileges.h). They are
// registered once, at start-up, before anything is logged; redact() hides
// each wherever it occurs in text trainit writes: its log lines (log.cpp),
// the status file, `trainit plan`'s output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trainit {

inline constexpr std::string_view kRedactedText = "<redacted>";
// Shorter values are not secrets worth the name, and hiding them would blank
// ordinary words and numbers of every line ("1", "true").
inline constexpr std::size_t kMinSecretSize = 4;

// Names that say their value is secret: holding KEY, TOKEN, SECRET, PASSWORD
// or CREDENTIAL, or starting with CRED, compared without regard to case.
[[nodiscard]] bool is_secret_name(std::string_view name) noexcept;

// Registers the values of the variables of `envp` ("NAME=value", null-
// terminated) whose names look secret (is_secret_name) but name no setting
// (`is_setting`), or match one of `patterns`: globs, '*' for any run of
// characters and '?' for one ("WANDB_*").
void register_secret_variables(const char* const* envp, const std::vector<std::string>& patterns,
                               bool (*is_setting)(std::string_view name) noexcept);
// Whether `name` matches the glob `pattern`, as above.
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view name) noexcept;

// Registers `value` (and its JSON-escaped form, where it differs). Not for
// use once other threads log.
void add_secret(std::string_view value);
[[nodiscard]] bool has_secrets() noexcept;

// `text` with every registered secret replaced by kRedactedText.
[[nodiscard]] std::string redact(std::string_view text);
// The same into `out` (at most `size` bytes, cut there): no allocation, for
// the logger. Returns the length written.
std::size_t redact_into(std::string_view text, char* out, std::size_t size) noexcept;

}  // namespace trainit

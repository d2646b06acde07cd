// Lexical path rules. Nothing here touches the file system.
#pragma once

#include <string>
#include <string_view>

namespace trainit {

[[nodiscard]] bool is_absolute_path(std::string_view path) noexcept;

// The lexical normal form of an absolute path: repeated and trailing slashes
// dropped, "." components removed, ".." taking back one component (never
// above "/"). "/a//b/./c/../" -> "/a/b". A relative path is returned as is.
[[nodiscard]] std::string normalize_path(std::string_view path);

// `dir` + "/" + `name`, without doubling a slash when `dir` is "/". `name` is
// one component the caller has already checked or built itself.
[[nodiscard]] std::string join_path(std::string_view dir, std::string_view name);

}  // namespace trainit

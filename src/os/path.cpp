#include "os/path.h"

#include <vector>

namespace trainit {

bool is_absolute_path(std::string_view path) noexcept {
  return !path.empty() && path[0] == '/';
}

std::string normalize_path(std::string_view path) {
  if (!is_absolute_path(path))
    return std::string(path);
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/')
      ++i;
    std::size_t end = path.find('/', i);
    if (end == std::string_view::npos)
      end = path.size();
    std::string_view part = path.substr(i, end - i);
    i = end;
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  if (parts.empty())
    return "/";
  std::string out;
  out.reserve(path.size());
  for (std::string_view part : parts) {
    out += '/';
    out += part;
  }
  return out;
}

std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/')
    out += '/';
  out += name;
  return out;
}

}  // namespace trainit

// Splitting comma-separated flag values ("a,b,c"); empty items are dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tailscope {

inline std::vector<std::string> split_list(std::string_view text, char sep = ',') {
  std::vector<std::string> items;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(sep, pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) items.emplace_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return items;
}

}  // namespace tailscope

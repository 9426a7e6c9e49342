// The console's web files (broker/console/*), compiled into the broker: CMake turns each into
// a byte array of the generated console_assets.cc (cmake/embed_files.cmake), so the broker
// serves them with no file on disk and nothing downloaded.
#pragma once

#include <span>
#include <string_view>

namespace tokimq::broker::console {

struct Asset {
  std::string_view name;  // file name, e.g. "index.html"
  std::string_view body;
};

std::span<const Asset> ConsoleAssets();

}  // namespace tokimq::broker::console

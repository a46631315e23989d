// The task prompts of src/flows/prompts/, compiled into the library (cmake/EmbedFiles.cmake).
#pragma once

#include <span>
#include <string_view>

namespace gemlet::flows {

struct PromptFile {
  std::string_view path;          // "/polish.txt"
  std::string_view content_type;  // unused here (the embedder's table has it)
  std::string_view body;
};

std::span<const PromptFile> PromptFiles();

}  // namespace gemlet::flows

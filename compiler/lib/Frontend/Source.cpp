//===- Source.cpp - Source files and locations in them --------------------===//

#include "tessel/Frontend/Source.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace tessel {

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n')
      lineStarts_.push_back(i + 1);
}

std::string_view SourceFile::line(uint32_t line) const {
  if (line == 0 || line > lineStarts_.size())
    return {};
  size_t begin = lineStarts_[line - 1];
  size_t end = text_.find('\n', begin);
  if (end == std::string::npos)
    end = text_.size();
  if (end > begin && text_[end - 1] == '\r')
    --end;
  return std::string_view(text_).substr(begin, end - begin);
}

int SourceManager::addFile(std::string path, std::string text) {
  files_.push_back(std::make_unique<SourceFile>(std::move(path), std::move(text)));
  return static_cast<int>(files_.size()) - 1;
}

int SourceManager::readFile(const std::string &path, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = "no such file";
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not a .model file";
    return -1;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot be opened for reading";
    return -1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    error = "could not be read";
    return -1;
  }
  return addFile(path, text.str());
}

int SourceManager::findFile(const std::string &path) const {
  for (size_t i = 0; i < files_.size(); ++i)
    if (files_[i]->path() == path)
      return static_cast<int>(i);
  return -1;
}

} // namespace tessel

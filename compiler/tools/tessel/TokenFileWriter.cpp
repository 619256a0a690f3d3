//===- TokenFileWriter.cpp - Writing token files --------------------------===//

#include "TokenFileWriter.h"

#include "common/data/TokenFiles.h"

#include "llvm/Support/Error.h"

namespace tessel {

using namespace llvm;
namespace tf = tokenfiles;

TokenFileWriter::TokenFileWriter(std::string path, bool wide, Kind kind, uint32_t padId)
    : path_(std::move(path)), wide_(wide), kind_(kind), padId_(padId) {
  if (kind_ == Kind::Examples)
    starts_.push_back(0);
}

TokenFileWriter::~TokenFileWriter() {
  out_.reset();
  if (temp_)
    consumeError(temp_->discard());
}

bool TokenFileWriter::open(std::string &error) {
  Expected<sys::fs::TempFile> temp = sys::fs::TempFile::create(path_ + ".tmp-%%%%%%");
  if (!temp) {
    error = "cannot write '" + path_ + "': " + toString(temp.takeError());
    return false;
  }
  temp_.emplace(std::move(*temp));
  out_ = std::make_unique<raw_fd_ostream>(temp_->FD, /*shouldClose=*/false);
  out_->SetBufferSize(1 << 20);
  if (kind_ == Kind::Stream) { // The header, filled in by finish().
    std::string header(tf::kHeaderBytes, '\0');
    out_->write(header.data(), header.size());
  }
  return true;
}

void TokenFileWriter::encode(const std::vector<uint32_t> &ids) {
  for (uint32_t id : ids) {
    bytes_.push_back(static_cast<char>(id & 0xFF));
    bytes_.push_back(static_cast<char>((id >> 8) & 0xFF));
    if (wide_) {
      bytes_.push_back(static_cast<char>((id >> 16) & 0xFF));
      bytes_.push_back(static_cast<char>(id >> 24));
    }
  }
}

bool TokenFileWriter::append(const std::vector<uint32_t> &ids, std::string &error) {
  if (count_ + ids.size() > tf::kLlmcMaxTokens) {
    error = "'" + path_ + "' would hold more than " + std::to_string(tf::kLlmcMaxTokens) +
            " tokens, the most an llm.c token file counts; give fewer inputs per output file";
    return false;
  }
  bytes_.clear();
  encode(ids);
  out_->write(bytes_.data(), bytes_.size());
  count_ += ids.size();
  return true;
}

bool TokenFileWriter::appendExample(const std::vector<uint32_t> &ids,
                                    const std::vector<uint8_t> &trained, std::string &error) {
  // An example's first token is predicted from nothing: never a trained target.
  if (ids.size() != trained.size() || ids.size() < 2 || trained[0] != 0) {
    error = "an example needs 2 or more tokens and a mask byte for each, the first 0";
    return false;
  }
  encode(ids);
  mask_.insert(mask_.end(), trained.begin(), trained.end());
  count_ += ids.size();
  starts_.push_back(count_);
  return true;
}

bool TokenFileWriter::finish(std::string &error) {
  if (kind_ == Kind::Stream) {
    unsigned char header[12];
    tf::writeLe32(wide_ ? tf::kLlmcMagic32 : tf::kLlmcMagic16, header);
    tf::writeLe32(wide_ ? tf::kLlmcVersion32 : tf::kLlmcVersion16, header + 4);
    tf::writeLe32(static_cast<uint32_t>(count_), header + 8);
    out_->seek(0);
    out_->write(reinterpret_cast<const char *>(header), sizeof(header));
  } else {
    const tf::ExampleLayout layout = tf::exampleLayout(wide_ ? 4 : 2, padId_, examples(), count_);
    std::vector<unsigned char> head(layout.tokensOffset);
    tf::writeExampleHeader(layout, head.data());
    for (size_t i = 0; i < starts_.size(); ++i)
      tf::writeLe64(starts_[i], head.data() + layout.startsOffset + 8 * i);
    out_->write(reinterpret_cast<const char *>(head.data()), head.size());
    out_->write(bytes_.data(), bytes_.size());
    out_->write(reinterpret_cast<const char *>(mask_.data()), mask_.size());
  }
  out_->flush();
  if (out_->has_error()) {
    error = "cannot write '" + path_ + "': " + out_->error().message();
    out_->clear_error();
    return false;
  }
  out_.reset();
  Error kept = temp_->keep(path_);
  temp_.reset();
  if (kept) {
    error = "cannot write '" + path_ + "': " + toString(std::move(kept));
    return false;
  }
  return true;
}

} // namespace tessel

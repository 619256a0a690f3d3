//===- TokenizeTexts.cpp - The tokenizer library on texts, for tests -------===//
//
// tessel-tokenize-texts: the Tessel side of the tokenizer parity test and of the throughput
// benchmark (test/Integration/Tokenizer, benchmarks/tokenizer_rate.sh).
//
//   tessel-tokenize-texts --tokenizer T FILE...       one JSON line per file (each one text, its
//                                                     bytes as they are): its ids without and
//                                                     with special tokens, and the decodings of
//                                                     the ids with and without special tokens
//   tessel-tokenize-texts --tokenizer T --decode F    F: a JSON array of id arrays; one JSON
//                                                     line of decodings per array
//   tessel-tokenize-texts --tokenizer T --time R --jsonl F
//                                                     encodes every "text" of JSON-lines file F
//                                                     on one thread, R times, and prints the
//                                                     fastest pass: bytes, tokens, seconds
//
//===----------------------------------------------------------------------===//

#include "common/support/JsonString.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Tokenizer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace tessel;

namespace {

bool readAll(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

void appendIds(std::string &out, const std::vector<uint32_t> &ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  out += ']';
}

int usage() {
  std::cerr << "usage: tessel-tokenize-texts --tokenizer PATH (FILE... | --decode IDS.json | "
               "--time REPEATS --jsonl TEXTS.jsonl)\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string tokenizerPath, decodeFile, jsonlFile;
  int repeats = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--tokenizer")
      tokenizerPath = value();
    else if (arg == "--decode")
      decodeFile = value();
    else if (arg == "--jsonl")
      jsonlFile = value();
    else if (arg == "--time")
      repeats = std::atoi(value().c_str());
    else if (arg.rfind("--", 0) == 0)
      return usage();
    else
      files.push_back(arg);
  }
  if (tokenizerPath.empty())
    return usage();
  std::string error;
  std::unique_ptr<tok::Tokenizer> tokenizer = tok::Tokenizer::load(tokenizerPath, error);
  if (!tokenizer) {
    std::cerr << "tessel-tokenize-texts: " << error << "\n";
    return 1;
  }

  if (repeats > 0) {
    std::string text;
    if (!readAll(jsonlFile, text))
      return usage();
    std::vector<std::string> documents;
    size_t bytes = 0;
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find('\n', begin);
      end = end == std::string::npos ? text.size() : end;
      tok::JsonDocument line;
      if (end > begin && line.parse(std::string_view(text).substr(begin, end - begin), error) &&
          line.root().find("text").isString()) {
        documents.emplace_back(line.root().find("text").string());
        bytes += documents.back().size();
      }
      begin = end + 1;
    }
    double best = 1e30;
    size_t tokens = 0;
    std::vector<uint32_t> ids;
    for (int r = 0; r < repeats; ++r) {
      tokens = 0;
      auto start = std::chrono::steady_clock::now();
      for (const std::string &d : documents) {
        ids.clear();
        tokenizer->encodeAppend(d, false, ids);
        tokens += ids.size();
      }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best = std::min(best, took.count());
    }
    std::printf("{\"documents\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f}\n",
                documents.size(), bytes, tokens, best);
    return 0;
  }

  if (!decodeFile.empty()) {
    std::string text;
    tok::JsonDocument doc;
    if (!readAll(decodeFile, text) || !doc.parse(text, error) || !doc.root().isArray()) {
      std::cerr << "tessel-tokenize-texts: " << decodeFile << ": not a JSON array " << error
                << "\n";
      return 1;
    }
    for (size_t i = 0; i < doc.root().size(); ++i) {
      tok::JsonValue list = doc.root().at(i);
      std::vector<uint32_t> ids;
      for (size_t k = 0; k < list.size(); ++k)
        ids.push_back(static_cast<uint32_t>(list.at(k).integer()));
      std::string out = "{\"ids\": ";
      appendIds(out, ids);
      out += ", \"decoded\": ";
      appendJsonString(out, tokenizer->decode(ids, false));
      out += ", \"decoded_skip\": ";
      appendJsonString(out, tokenizer->decode(ids, true));
      std::cout << out << "}\n";
    }
    return 0;
  }

  for (const std::string &file : files) {
    std::string text;
    if (!readAll(file, text)) {
      std::cerr << "tessel-tokenize-texts: cannot read " << file << "\n";
      return 1;
    }
    std::vector<uint32_t> ids = tokenizer->encode(text, false);
    std::vector<uint32_t> special = tokenizer->encode(text, true);
    std::string out = "{\"file\": ";
    appendJsonString(out, file);
    out += ", \"ids\": ";
    appendIds(out, ids);
    out += ", \"ids_special\": ";
    appendIds(out, special);
    out += ", \"decoded\": ";
    appendJsonString(out, tokenizer->decode(special, false));
    out += ", \"decoded_skip\": ";
    appendJsonString(out, tokenizer->decode(special, true));
    std::cout << out << "}\n";
  }
  return 0;
}

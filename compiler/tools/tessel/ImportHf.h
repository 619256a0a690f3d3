//===- ImportHf.h - tessel import-hf -----------------------------*- C++ -*-===//
//
// `tessel import-hf DIR -o NAME.model` reads a Hugging Face model folder (config.json and its
// safetensors) and writes a `.model` spec of the same architecture whose parameters are loaded
// from the folder (docs/pretrained.md).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_IMPORTHF_H
#define TESSEL_TOOLS_IMPORTHF_H

namespace tessel {

/// Whether the command line named `import-hf`.
bool importHfRequested();
/// Runs `tessel import-hf`; returns the exit status (1: the folder cannot be imported).
int runImportHf();

} // namespace tessel

#endif // TESSEL_TOOLS_IMPORTHF_H

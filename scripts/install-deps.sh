#!/usr/bin/env bash
# Installs the Debian packages Tessel builds and tests with. Idempotent: packages already present
# are skipped by apt; safe to run on every CI start.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  antlr4 libantlr4-runtime-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
  libxxhash-dev                       # XXH3, the checksum of plans and checkpoints
  libpcre2-dev                        # the tokenizers' pre-tokenizer patterns (PCRE2, JIT)
  libsentencepiece-dev                # SentencePiece tokenizer.model files
  sentencepiece python3-sentencepiece # spm_train and Python's SentencePiece for their tests
  python3-xxhash                      # the same checksum for the tests that edit plans
  python3-jinja2                      # the chat templates' reference (Hugging Face's renderer)
  iproute2                            # network namespaces as hosts for the multi-host tests
  libtcmalloc-minimal4 libjemalloc2   # allocators the benchmark tries for each side
  googletest libgtest-dev
  python3-torch python3-numpy
  clang libclang-rt-14-dev
  fortunes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

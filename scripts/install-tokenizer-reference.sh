#!/usr/bin/env bash
# Installs what the tokenizer parity test compares Tessel with (test/Integration/Tokenizer/parity.test):
# Hugging Face's tokenizers as its Node binding (npm `tokenizers`) and js-tiktoken, whose GPT-2
# and cl100k ranks the test's tokenizer files are made from. Pinned versions, from the npm
# registry, into DIR (default build/tokenizer-reference, which git ignores); nothing else ever
# downloads them. Idempotent: an install of the pinned versions is kept.
# Usage: scripts/install-tokenizer-reference.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/tokenizer-reference}
# The versions the parity figures in docs/tokenizers.md were measured against.
tokenizers_version=0.23.2
tiktoken_version=1.0.21

if ! command -v npm > /dev/null || ! command -v node > /dev/null; then
  echo "install-tokenizer-reference: skipped: Node.js and npm are not installed"
  exit 0
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# One install at a time (test.sh and the lit test may both ask).
exec 9> "$dir/.lock"
flock 9
installed() {
  node -e "process.exit(require('$dir/node_modules/$1/package.json').version === '$2' ? 0 : 1)" \
    2> /dev/null
}
if installed tokenizers "$tokenizers_version" && installed js-tiktoken "$tiktoken_version"; then
  exit 0
fi
echo "install-tokenizer-reference: npm install tokenizers@$tokenizers_version js-tiktoken@$tiktoken_version into $dir"
[ -f "$dir/package.json" ] || echo '{"name": "tessel-tokenizer-reference", "private": true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
  "tokenizers@$tokenizers_version" "js-tiktoken@$tiktoken_version"
# The binding is a native module: it must load on this machine.
node -e "require('$dir/node_modules/tokenizers')"

#!/usr/bin/env bash
# Tokenizer throughput on one core: Tessel's tokenizers (tessel-tokenize-texts --time, the
# library's encode of each document, and `tessel tokenize`, the whole command: reading JSON lines,
# encoding, writing the token file) against Hugging Face's tokenizers (its Node binding, the
# version scripts/install-tokenizer-reference.sh pins) at the faster of its two configurations
# (an encode per document, or one encodeBatch), on the same ~10 MB of text: every fortune, then
# the Python standard library's sources until 10 MB (English prose and code). Every process is
# pinned to one CPU, and RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false keep the reference
# on one thread. The tokenizers are GPT-2's, and Llama 3's and Qwen2's layouts on cl100k's
# vocabulary (test/Integration/Tokenizer/make_tokenizers.js). Each figure is the fastest of REPEATS passes;
# both sides must give the same number of tokens. Prints a Markdown table: MB/s and the ratio
# Tessel / reference (above 1: Tessel is faster).
#
#   benchmarks/tokenizer_rate.sh [BUILD_DIR] [REPEATS] [CPU]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
repeats=${2:-3}
cpu=${3:-0}
python=${PYTHON:-/usr/bin/python3}
reference="$build/tokenizer-reference"
"$root/scripts/install-tokenizer-reference.sh" "$reference" > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - "$work/texts.jsonl" <<'PY'
import glob, json, os, sys
limit, total = 10_000_000, 0
with open(sys.argv[1], "w") as out:
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith((".dat", ".u8")) or not os.path.isfile(path):
            continue
        for fortune in open(path, encoding="utf-8", errors="replace").read().split("\n%\n"):
            if fortune.strip():
                out.write(json.dumps({"text": fortune}) + "\n")
                total += len(fortune.encode())
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "**", "*.py"), recursive=True)):
        if total >= limit:
            break
        text = open(path, encoding="utf-8", errors="replace").read()
        out.write(json.dumps({"text": text}) + "\n")
        total += len(text.encode())
PY
node -e "
const m = require('$root/test/Integration/Tokenizer/make_tokenizers.js');
m.gpt2Files('$reference', '$work/tok');
m.cl100kFiles('$reference', '$work/tok');"

pin=(taskset -c "$cpu")
one=(env RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false)
field() { node -e "console.log(JSON.parse(process.argv[1])['$1'])" "$2"; }
version=$(node -e "console.log(require('$reference/node_modules/tokenizers/package.json').version)")
bytes=$(stat -c %s "$work/texts.jsonl")
echo "| tokenizer | tokens | Tessel encode MB/s | tessel tokenize MB/s | reference encode MB/s | reference encodeBatch MB/s | ratio (best against best) |"
echo "|---|---|---|---|---|---|---|"
for name in gpt2 llama3 qwen2; do
  dir="$work/tok/$name"
  ours=$("${pin[@]}" "$build/bin/tessel-tokenize-texts" --tokenizer "$dir" --time "$repeats" --jsonl "$work/texts.jsonl")
  # The whole command, best of the repeats (its own progress line gives the rate over the text).
  whole=0
  for _ in $(seq "$repeats"); do
    start=$(date +%s.%N)
    "${pin[@]}" "$build/bin/tessel" tokenize --tokenizer "$dir" "$work/texts.jsonl" -o "$work/out.bin" --quiet \
      --add-special-tokens=false --append-eos=false
    took=$(echo "$(date +%s.%N) - $start" | bc -l)
    whole=$(echo "if ($whole == 0 || $took < $whole) $took else $whole" | bc -l)
  done
  encode=$("${pin[@]}" "${one[@]}" node "$root/benchmarks/tokenizer_rate.js" "$reference" "$dir/tokenizer.json" "$work/texts.jsonl" "$repeats" encode)
  batch=$("${pin[@]}" "${one[@]}" node "$root/benchmarks/tokenizer_rate.js" "$reference" "$dir/tokenizer.json" "$work/texts.jsonl" "$repeats" batch)
  text_bytes=$(field bytes "$ours")
  tokens=$(field tokens "$ours")
  written=$("$python" -c "import struct,sys; print(struct.unpack('<3i', open(sys.argv[1],'rb').read(12))[2])" "$work/out.bin")
  for other in "$(field tokens "$encode")" "$(field tokens "$batch")" "$written"; do
    if [ "$other" != "$tokens" ]; then
      echo "tokenizer_rate: $name: Tessel gives $tokens tokens, a peer $other" >&2
      exit 1
    fi
  done
  node -e "
const [b, t, w, e, x, n, tokens] = process.argv.slice(1).map(Number);
const mbs = (s) => b / 1e6 / s;
const best = Math.max(mbs(e), mbs(x));
console.log('| $name | ' + tokens + ' | ' + mbs(t).toFixed(1) + ' | ' + mbs(w).toFixed(1) + ' | ' +
  mbs(e).toFixed(2) + ' | ' + mbs(x).toFixed(2) + ' | ' + (mbs(t) / best).toFixed(1) + ' |');
" "$text_bytes" "$(field seconds "$ours")" "$whole" "$(field seconds "$encode")" "$(field seconds "$batch")" 0 "$tokens"
done
echo
echo "$text_bytes bytes of text in $(wc -l < "$work/texts.jsonl") documents ($bytes bytes of JSON lines); tokenizers $version (Node binding, Node $(node --version)); fastest of $repeats passes; each process pinned to CPU $cpu"

#!/bin/sh
# Fine-tuning end to end, on what this machine holds: a chat model folder is written
# (make_model.py: a Qwen3-architecture model with random weights and a tokenizer learned from
# local text, as no model can be downloaded here), imported, fine-tuned on chats made from
# Debian's fortune files with the loss on the assistant's turns only, asked to finish a
# saying, and exported back to a Hugging Face folder.
#
#   examples/finetune/run.sh [WORK_DIR] [--short]
#
# WORK_DIR (default runs/finetune) receives every file. --short trains a few steps only (what
# CI runs). Needs tessel on PATH or built in build/bin, and the fortunes package.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=runs/finetune
steps=400
for arg in "$@"; do
  case "$arg" in
    --short) steps=8 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) work=$arg ;;
  esac
done
PATH="$root/build/bin:$PATH"
python=/usr/bin/python3
fortunes=/usr/share/games/fortunes/fortunes
[ -f "$fortunes" ] || { echo "run.sh: $fortunes is missing (Debian: fortunes)" >&2; exit 1; }
mkdir -p "$work"
cd "$work"

echo "== 1. chats and a model folder"
"$python" "$here/make_chats.py" --fortunes "$fortunes" --out chats.jsonl --text sayings.txt \
  --limit 128
rm -rf model
"$python" "$here/make_model.py" --out model --text sayings.txt

echo "== 2. import the folder as a spec"
tessel import-hf model -o chat.model --seq 96 --batch 16 --micro-batch 16 --steps "$steps" \
  --data train.bin

echo "== 3. the chats as examples, the loss on the assistant's turns"
tessel tokenize --tokenizer model chats.jsonl -o train.bin --val-fraction 0.05 --val-out val.bin

echo "== 4. fine-tune"
tessel compile chat.model -o chat
rm -rf ck
# The folder's weights are random, so the rate is a pretraining one rather than the spec's
# fine-tuning 2e-5.
./chat --eval-data val.bin --eval-every 100 --lr 3e-3 --warmup 20 --checkpoint-dir ck

echo "== 5. ask it to finish a saying it was tuned on, in the chats' words"
first=$("$python" -c 'import json, sys; m = json.loads(open(sys.argv[1]).readline())["messages"]; print(m[1]["content"]); print(m[2]["content"])' chats.jsonl)
echo "user:      $(echo "$first" | sed -n 1p)"
echo "tuned on:  $(echo "$first" | sed -n 2p)"
printf "answer:    "
./chat --generate --chat --checkpoint ck --system "You finish sayings." \
  --prompt "$(echo "$first" | sed -n 1p)" --temperature 0.01 --tokens 40

echo "== 6. back to a Hugging Face folder"
rm -rf exported
./chat --export-hf exported --checkpoint ck
ls exported

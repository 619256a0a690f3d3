#!/usr/bin/env bash
# Checkpoint save and load time for GPT-2 124M with its AdamW state (1.5 GB of f32), on one
# rank: what a save and a resume add to a run, as the runner reports them ("saved in", "loaded
# in"), against PyTorch's torch.save and torch.load of the same tensors (parameters, exp_avg,
# exp_avg_sq) to the same disk, synced as Tessel's save is, in whichever of torch.save's two
# formats is faster (torch.load's mmap option is newer than Debian's PyTorch 1.13). The model is
# examples/gpt2_small.model at seq 64 and batch 1 in fp32 (the state is the same size at any
# batch) on the test text; each figure is the best of RUNS. The files go to DIR (default: a
# temporary directory; name one on the disk that matters).
#
#   benchmarks/checkpoint_io.sh [BUILD_DIR] [RUNS] [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
runs=${2:-3}
work=$(mktemp -d ${3:+-p "$3"})
trap 'rm -rf "$work"' EXIT
sed -e 's/^    seq = 1024$/    seq = 64/' -e '/^parallel {/,/^}/d' \
    -e 's/^  batch = 512 .*/  batch = 1/' -e 's/^  micro_batch = 16 .*/  micro_batch = 1/' \
    -e '/^  precision = bf16 /d' -e 's/^  tokenizer = tokens .*/  tokenizer = byte/' \
    -e '/^  eval {/d' -e '/^  checkpoint {/d' \
    "$root/examples/gpt2_small.model" > "$work/gpt2.model"
(cd "$root" && "$build/bin/tessel" compile "$work/gpt2.model" -o "$work/gpt2" > /dev/null)
run=("$work/gpt2" --data "$root/test/Integration/Parity/Inputs/text.txt" --threads 2 --log-every 1000)
for _ in $(seq "$runs"); do
  rm -rf "$work/ck"
  saved=$("${run[@]}" --steps 1 --checkpoint-dir "$work/ck" | sed -n 's/.*(saved in \([0-9.]*\) s).*/\1/p')
  loaded=$("${run[@]}" --steps 2 --resume "$work/ck" | sed -n 's/.*(loaded in \([0-9.]*\) s).*/\1/p')
  echo "$saved $loaded"
done > "$work/times"
bytes=$(du -sb "$work/ck" | cut -f1)
best() { sort -n | head -n 1; }
tessel_save=$(cut -d' ' -f1 "$work/times" | best)
tessel_load=$(cut -d' ' -f2 "$work/times" | best)
# The peer: the same tensors as the checkpoint holds, by name and shape, saved and loaded by
# PyTorch.
read -r torch_save save_format torch_load load_format < <("${PYTHON:-/usr/bin/python3}" - "$work/ck" "$work/torch.pt" "$runs" <<'PY'
import json, os, sys, time
import torch
ck, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
latest = open(os.path.join(ck, "latest")).read().strip()
manifest = json.load(open(os.path.join(ck, latest, "manifest.json")))
state = {}
for kind in ("params", "optimizer"):
    for name, t in manifest[kind].items():
        state[name] = torch.randn(t["shape"]) if t["dtype"] == "F32" else torch.zeros(t["shape"], dtype=torch.int64)
# PyTorch at its best here: both of torch.save's formats (the zip file, its default since 1.6,
# and the legacy one), each loaded back by torch.load; the fastest of each is kept and named.
save, load = {}, {}
for _ in range(runs):
    for zipped in (True, False):
        name = "zip" if zipped else "legacy"
        start = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(state, f, _use_new_zipfile_serialization=zipped)
            f.flush()
            os.fsync(f.fileno())
        save[name] = min(save.get(name, 1e9), time.perf_counter() - start)
        start = time.perf_counter()
        torch.load(path)
        load[name] = min(load.get(name, 1e9), time.perf_counter() - start)
best_save = min(save, key=save.get)
best_load = min(load, key=load.get)
print("%.2f %s %.2f %s" % (save[best_save], best_save, load[best_load], best_load))
PY
)
printf "checkpoint %.2f GB on %s, best of %d:\n" "$(echo "$bytes / 1000000000" | bc -l)" \
  "$(df -P "$work" | awk 'NR == 2 { print $1 }')" "$runs"
printf "  save: Tessel %s s, PyTorch torch.save (%s format) %s s, ratio %.2f\n" "$tessel_save" \
  "$save_format" "$torch_save" \
  "$(echo "$torch_save / $tessel_save" | bc -l)"
printf "  load: Tessel %s s, PyTorch torch.load (%s format) %s s, ratio %.2f\n" "$tessel_load" \
  "$load_format" "$torch_load" \
  "$(echo "$torch_load / $tessel_load" | bc -l)"
echo "  (ratio = PyTorch's time / Tessel's: above 1, Tessel is faster)"

"""Compares `tessel estimate --cluster ... --json` with a published training throughput.

The Megatron-LM papers report "achieved teraFLOP/s per GPU" counted with their own formula
(Narayanan et al. 2021, §5.1, with activation recomputation, hence 4 passes of the forward):

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))     FLOPs per iteration

for batch B, sequence s, l layers, hidden size h and vocabulary V. The published step time is
then F / (n × X) for n GPUs at X FLOP/s each. This script works that out, reads the predicted
step, and prints both with the gap. The goal is |gap| <= 10%; a row that misses it says so
with the gap, and the test checks that line, so a change of the model shows up either way.

usage: check_published.py NAME ESTIMATE.json B s l h V n TFLOPS_PER_GPU
"""
import json
import sys


def main():
    name, path = sys.argv[1], sys.argv[2]
    B, s, l, h, V, n = (float(x) for x in sys.argv[3:9])
    published_tflops = float(sys.argv[9])
    F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    published = F / (n * published_tflops * 1e12)
    e = json.load(open(path))
    if e["world_size"] != n:
        sys.exit(f"{name}: the layout has {e['world_size']} ranks, the paper {n:.0f}")
    predicted = e["prediction"]["step"]
    gap = predicted / published - 1
    verdict = "within the 10% goal" if abs(gap) <= 0.10 else "MISSES the 10% goal"
    print(f"{name}: published {published_tflops:.0f} TFLOP/s per GPU = step {published:.2f} s; "
          f"predicted step {predicted:.2f} s = {F / (n * predicted) / 1e12:.0f} TFLOP/s; "
          f"gap {100 * gap:+.0f}%: {verdict}")


if __name__ == "__main__":
    main()

"""Replaces the `parallel { ... }` section of a .model file with the one `tessel tune --write`
wrote, and its train.micro_batch with the one that section's comment names.

usage: splice_parallel.py MODEL SECTION > OUT
"""
import re
import sys

model, section = open(sys.argv[1]).read(), open(sys.argv[2]).read()
start = model.index("parallel {")
depth, end = 0, start
for i in range(start, len(model)):
    depth += {"{": 1, "}": -1}.get(model[i], 0)
    if depth == 0 and model[i] == "}":
        end = i + 1
        break
micro = re.search(r"micro_batch = (\d+)", section).group(1)
rest = re.sub(r"micro_batch = \d+", "micro_batch = " + micro, model[end:], count=1)
print(model[:start] + section + rest)

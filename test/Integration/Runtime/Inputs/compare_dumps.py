"""Compares the --dump-dir outputs of two runs of the same model (accumulation.test, and the
GPU window's runs against the CPU).

  compare_dumps.py DIR_A DIR_B --tol T

DIR_A comes from a run that accumulates over micro-batches, DIR_B from one big batch with the
same seed; or both from one plan on two devices. Checks, printing one line each and exiting 1 on
the first failure:
  * init.safetensors: the initial weights are bit-identical;
  * batches.safetensors: the rows of A's micro-batches of step 1, in order, are B's batch (or,
    for the same plan, the batches are the same);
  * metrics.jsonl (the run's --metrics file, if the directory has one): the step-1 losses
    agree within T (relative);
  * grads.safetensors: the same tensors, and for each ||a - b|| / ||b|| <= T. A gradient that
    is zero in exact arithmetic (the attention key bias: softmax does not see it) holds only
    rounding noise, so where ||b|| is below 1e-6 of the global norm the bound is absolute:
    ||a - b|| <= T * global norm (as test/Integration/Parity/check_parity.py does).
Last line: "DUMPS MATCH tensors=N max_rel_err=E".
"""
import json
import math
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[8 + n + begin:8 + n + end]
        code = {"F32": "f", "I32": "i"}[entry["dtype"]]
        out[name] = (entry["shape"], struct.unpack("<%d%s" % (len(raw) // 4, code), raw))
    return out


def fail(message):
    print("DUMPS DIFFER: " + message)
    sys.exit(1)


def norm(values):
    return math.sqrt(sum(v * v for v in values))


def main(argv):
    if len(argv) != 5 or argv[3] != "--tol":
        fail("usage: compare_dumps.py DIR_A DIR_B --tol T")
    a_dir, b_dir, tol = argv[1], argv[2], float(argv[4])

    a_init, b_init = load(a_dir + "/init.safetensors"), load(b_dir + "/init.safetensors")
    if a_init != b_init:
        fail("the initial weights differ")
    print("init: %d tensors, identical" % len(a_init))

    a_batches, b_batches = load(a_dir + "/batches.safetensors"), load(b_dir + "/batches.safetensors")
    micro = sorted((k for k in a_batches if k.startswith("tokens.1.")),
                   key=lambda k: int(k.rsplit(".", 1)[1]))
    if len(micro) == 1 and sorted(a_batches) == sorted(b_batches):
        # The same plan on two devices: the same batches.
        if a_batches != b_batches:
            fail("the batches differ")
        print("batches: %d tensors, identical" % len(a_batches))
    elif len(micro) < 2:
        fail("run A has %d micro-batches in step 1, expected at least 2" % len(micro))
    else:
        for kind in ("tokens", "targets"):
            rows_a = []
            for k in micro:
                rows_a.extend(a_batches[kind + k[len("tokens"):]][1])
            rows_b = b_batches[kind + ".1.0"][1]
            if rows_a != list(rows_b):
                fail("step 1's %s: A's %d micro-batches in order are not B's batch"
                     % (kind, len(micro)))
        print("batches: A's %d micro-batches of step 1 in order == B's batch (%d tokens)"
              % (len(micro), len(b_batches["tokens.1.0"][1])))

    losses = []
    for d in (a_dir, b_dir):
        try:
            with open(d + "/metrics.jsonl") as f:
                lines = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            break
        step1 = [m["loss"] for m in lines if m.get("step") == 1 and "loss" in m]
        if len(step1) != 1:
            fail("%s/metrics.jsonl has %d step-1 losses, expected 1" % (d, len(step1)))
        losses.append(step1[0])
    if len(losses) == 2:
        err = abs(losses[0] - losses[1]) / abs(losses[1])
        if not err <= tol:
            fail("step-1 loss %.9g vs %.9g: relative error %.3g exceeds %g"
                 % (losses[0], losses[1], err, tol))
        print("loss: step 1 %.9g vs %.9g, relative error %.2e" % (losses[0], losses[1], err))

    a_grads, b_grads = load(a_dir + "/grads.safetensors"), load(b_dir + "/grads.safetensors")
    if sorted(a_grads) != sorted(b_grads):
        fail("the gradient tensors differ: %s vs %s" % (sorted(a_grads), sorted(b_grads)))
    global_norm = norm([v for _, values in b_grads.values() for v in values])
    if not global_norm > 0:
        fail("B's gradients are all zero (or not finite)")
    worst = 0.0
    for name in sorted(a_grads):
        (shape_a, a), (shape_b, b) = a_grads[name], b_grads[name]
        if shape_a != shape_b:
            fail("%s: shape %s vs %s" % (name, shape_a, shape_b))
        diff = norm([x - y for x, y in zip(a, b)])
        ref = norm(b)
        if ref < 1e-6 * global_norm:
            err = diff / global_norm
            what = "zero gradient, |diff| / global norm"
        else:
            err = diff / ref
            what = "relative"
            worst = max(worst, err)
        if not err <= tol:  # also catches NaN
            fail("%s: %s error %.3g exceeds %g" % (name, what, err, tol))
    print("DUMPS MATCH tensors=%d max_rel_err=%.2e" % (len(a_grads), worst))


if __name__ == "__main__":
    main(sys.argv)

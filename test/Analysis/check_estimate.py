"""Holds `tessel estimate --json` to ZeRO's analytical model (Rajbhandari et al., 2020).

With Ψ parameters, N data-parallel ranks and Adam in fp32 (4-byte parameters, gradients and
two moments), each rank holds per ZeRO stage:
  0: 4Ψ + 4Ψ + 8Ψ = 16Ψ       1: 4Ψ + 4Ψ + 8Ψ/N      2: 4Ψ + (4Ψ + 8Ψ)/N      3: 16Ψ/N
and sends over dp per step 2Ψ(N-1)/N gradient elements of 4 bytes (an all-reduce, or a
reduce-scatter plus an all-gather), 1.5 times that under stage 3 (the gradients'
reduce-scatter and two gathers of every parameter).

Under bf16 Tessel's plan holds that state and the parameters' bf16 working copies: the
parameters are the fp32 master weights, gradients are accumulated and reduced over dp in fp32,
the moments are fp32, and each parameter that a kernel reads has a persistent bf16 copy
(-tessel-mixed-precision), 2Ψ more, split like its parameter: 18Ψ in all under stage 0 and
18Ψ/N under stage 3. Stage 3 gathers those copies, not the masters, so its two gathers move
2-byte elements and the gradients' reduce-scatter 4-byte ones: (2·2 + 4)Ψ(N-1)/N bytes. That
differs from the paper's mixed-precision layout (2Ψ bf16 parameters and 2Ψ bf16 gradients
held, the fp32 master partitioned with the moments, K = 12), whose figures the estimate does
not report because the plan does not allocate them; the check also asks that the arena is
smaller than under fp32 (16-bit activations).

usage: check_estimate.py STAGE PRECISION ESTIMATE.json [FP32-ESTIMATE.json]
"""
import json
import sys


def main():
    stage, precision, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    e = json.load(open(path))
    psi, n = e["parameter_count"], e["world_size"]
    p = 4  # bytes of a parameter or gradient element (the fp32 master under bf16)
    o = 8  # optimizer bytes per element: two fp32 moments
    expect_state = {
        0: p * psi + p * psi + o * psi,
        1: p * psi + p * psi + o * psi / n,
        2: p * psi + (p * psi + o * psi) / n,
        3: (p + p + o) * psi / n,
    }[stage]
    half = precision != "fp32"
    if half:
        expect_state += 2 * psi / (n if stage == 3 else 1)
    # Gradients: an all-reduce, or a reduce-scatter and an all-gather, of 4-byte elements;
    # stage 3 gathers the parameters twice instead (their working copies under bf16).
    gathered = 2 if half else p
    expect_dp = psi * (n - 1) / n * (p + 2 * gathered if stage == 3 else 2 * p)
    failed = False
    for r in e["ranks"]:
        state = r["parameters"] + r["gradients"] + r["optimizer"]
        if abs(state - expect_state) > 1e-9 * expect_state:
            print(f"rank {r['rank']}: state {state} bytes, formula {expect_state}")
            failed = True
    dp = e["communication"].get("dp", 0.0)
    # Besides the gradients, dp carries the loss and the gradient norm's partial sums: a few
    # scalars per step.
    if abs(dp - expect_dp) > 1e-4 * expect_dp:
        print(f"dp traffic {dp} bytes, formula {expect_dp}")
        failed = True
    if len(sys.argv) > 4:
        # Under 16-bit precision the activations (the arena) shrink against fp32's.
        full = json.load(open(sys.argv[4]))
        for r, f in zip(e["ranks"], full["ranks"]):
            if not r["activations"] < f["activations"]:
                print(f"rank {r['rank']}: activations {r['activations']} bytes, not below "
                      f"fp32's {f['activations']}")
                failed = True
    print(f"zero {stage} {precision}: Ψ = {psi:.0f}, N = {n}: state {state:.0f} bytes "
          f"(formula {expect_state:.0f}), dp {dp:.0f} bytes (formula {expect_dp:.0f})")
    sys.exit(1 if failed else 0)


main()

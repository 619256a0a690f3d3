"""Holds `tessel estimate --json` to ZeRO's analytical model (Rajbhandari et al., 2020).

With Ψ parameters, N data-parallel ranks and mixed-precision Adam (16-bit parameters and
gradients, fp32 master weights and moments), each rank holds per ZeRO stage:
  0: 2Ψ + 2Ψ + 12Ψ = 16Ψ      1: 2Ψ + 2Ψ + 12Ψ/N      2: 2Ψ + (2Ψ + 12Ψ)/N      3: 16Ψ/N
and sends over dp per step 2Ψ(N-1)/N elements (an all-reduce of the gradients, or a
reduce-scatter plus an all-gather), 1.5 times that under stage 3 (two gathers of every
parameter). In fp32 the parameters and gradients take 4 bytes and there is no master copy.

usage: check_estimate.py STAGE PRECISION ESTIMATE.json
"""
import json
import sys


def main():
    stage, precision, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    e = json.load(open(path))
    psi, n = e["parameter_count"], e["world_size"]
    p = 2 if precision != "fp32" else 4          # bytes of a parameter or gradient element
    o = 12 if precision != "fp32" else 8         # optimizer bytes per element
    expect_state = {
        0: p * psi + p * psi + o * psi,
        1: p * psi + p * psi + o * psi / n,
        2: p * psi + (p * psi + o * psi) / n,
        3: (p + p + o) * psi / n,
    }[stage]
    expect_dp = 2 * psi * (n - 1) / n * p * (1.5 if stage == 3 else 1.0)
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
    print(f"zero {stage} {precision}: Ψ = {psi:.0f}, N = {n}: state {state:.0f} bytes "
          f"(formula {expect_state:.0f}), dp {dp:.0f} bytes (formula {expect_dp:.0f})")
    sys.exit(1 if failed else 0)


main()

"""Holds `tessel tune --layout ... --json` to the published memory formulas, exactly.

korthikanti LAYOUT.json s b h a t sp recompute
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
    (arXiv:2205.05198), Table 2, activation bytes per transformer layer:
      no parallelism                 s b h (34 + 5 a s / h)
      tensor parallel                s b h (10 + 24 / t + 5 a s / (h t))
      tensor + sequence parallel     s b h / t (34 + 5 a s / h)
      tp, selective recompute        s b h (10 + 24 / t)
      tp + sp, selective recompute   34 s b h / t
      full recompute                 2 s b h
zero LAYOUT.json PARAMS DP STAGE
    Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
    Models" (arXiv:1910.02054), Figure 1 / §5: model-state bytes per device for Ψ parameters,
    N_d data-parallel devices and K = 12 (mixed-precision Adam):
      baseline (2 + 2 + K) Ψ;  P_os 2Ψ + 2Ψ + KΨ/N_d;  P_os+g 2Ψ + (2 + K)Ψ/N_d;
      P_os+g+p (2 + 2 + K)Ψ/N_d.
    It also prints the paper's figure for Ψ = 7.5B and N_d = 64 (120, 31.4, 16.6, 1.88 GB) from
    the tool's bytes per parameter, so the table itself is checked.
"""
import json
import sys


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1)


def main():
    kind, path = sys.argv[1], sys.argv[2]
    got = json.load(open(path))[0]
    if kind == "korthikanti":
        s, b, h, a, t = (float(x) for x in sys.argv[3:8])
        sp, recompute = sys.argv[8] == "sp", sys.argv[9]
        sbh = s * b * h
        if recompute == "full":
            want = 2 * sbh
        elif recompute == "selective":
            want = 34 * sbh / t if sp else sbh * (10 + 24 / t)
        elif t == 1:
            want = sbh * (34 + 5 * a * s / h)
        elif sp:
            want = sbh / t * (34 + 5 * a * s / h)
        else:
            want = sbh * (10 + 24 / t + 5 * a * s / (h * t))
        ok = close(got["activations_per_layer"], want)
        print(f"korthikanti t={t:.0f} {'sp' if sp else 'no-sp'} {recompute}: "
              f"{want / 2**20:.2f} MiB per layer {'ok' if ok else 'WRONG: tool says %r' % got['activations_per_layer']}")
    else:
        psi, nd, stage = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
        k = 12
        want = {0: (2 + 2 + k) * psi, 1: 4 * psi + k * psi / nd, 2: 2 * psi + (2 + k) * psi / nd,
                3: (2 + 2 + k) * psi / nd}[stage]
        ok = close(got["model_states"], want)
        # The paper's table: Ψ = 7.5B, N_d = 64, in GB (10^9 bytes), at the tool's bytes per
        # parameter.
        table = got["model_states"] / psi * 7.5e9 / 1e9 if nd == 64 else float("nan")
        print(f"zero {stage}: {'ok' if ok else 'WRONG: tool says %r, formula %r' % (got['model_states'], want)}; "
              f"at 7.5B parameters on 64 devices {table:.3g} GB")


if __name__ == "__main__":
    main()

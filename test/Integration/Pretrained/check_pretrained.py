#!/usr/bin/python3
"""Parity of `tessel import-hf` with transformers' forward and backward pass.

    check_pretrained.py --arch {gpt2,llama,llama31,qwen2,qwen3} --tessel TESSEL --work DIR
                        [--dtype f32|bf16|f16] [--shards N] [--tied|--untied] [--tol 1e-5]
                        [--precision fp32|bf16] [--gpt2-layout hub|save_pretrained]
                        [--store-tied-head] [--buffers] [--config-style v4|v5]
                        [--examples N [--mask-last]]

  1. writes a Hugging Face folder with random weights, DIR/hf (Inputs/make_hf_model.py), and
     random token ids as an llm.c token file, DIR/tokens.bin (with --examples N, instead N
     random examples with loss masks as a Tessel example file, DIR/examples.bin, made by
     test/Integration/Sft/Inputs/example_file.py: some shorter than a row, some longer; the reference
     then ignores the targets the masks and the padding leave out, as Tessel must);
  2. imports it: TESSEL import-hf DIR/hf -o DIR/model.model --seq T --batch B
     --micro-batch B --data DIR/tokens.bin (and --precision P when given);
  3. compiles the spec and runs one step with --dump-dir: DIR/dump/init.safetensors (the
     parameters as initialised, Tessel's names), batches.safetensors (tokens.S.U and
     targets.S.U per step S and micro-batch U), grads.safetensors (step 1's gradients, summed
     over its micro-batches) and DIR/metrics.jsonl (a JSON line per step with its loss);
  4. finds, by value and without reading the importer's names, the Hugging Face tensor each
     Tessel parameter was initialised from (below);
  5. runs the reference (Inputs/hf_reference.py) on the batches of step 1 and compares the
     loss and every gradient: ||g_tessel - g_ref|| / ||g_ref|| <= tol per parameter, the
     Tessel gradient rearranged as its values were.

The mapping (4): a Tessel parameter's initial values, widened to f32, must equal bit for bit
the values of exactly one Hugging Face tensor, or of one of the three equal parts of GPT-2's
fused c_attn weight or bias (split along its last dim: q, k, v), in some arrangement:
  - the same values in the same order under another shape (a reshape: [heads * head, embed]
    as [heads, head, embed]),
  - or in the order of an axis permutation of the Tessel parameter, possibly against the
    transposed matrix (Tessel's `x @ w` contracts [embed, heads, head] where nn.Linear keeps
    [out, in]),
  - or the first rows of a table (a position table [n_positions, embed] cut to [seq, embed]).
Every tensor of the folder must be used exactly once (a fused c_attn as a whole or all three
parts; a tied head, stored or not, is one tensor with the embedding), except the buffers
older conversions saved (GPT-2's attn.bias / attn.masked_bias, Llama's rotary_emb.inv_freq),
which must not be. Anything unmatched,
ambiguous, unused or used twice fails the check.

A gradient that is zero in exact arithmetic (GPT-2's key bias: softmax does not see a shift
shared by every key) is rounding noise on both sides; when its reference norm is below 1e-6 of
the global norm it is held to ||g_tessel - g_ref|| <= tol * global norm instead.

Prints a table of every parameter and a last line `PARITY OK arch=... max_rel_err_loss=...
max_rel_err_grad=...` or `PARITY FAIL ...`; exits 1 on any failure, including a tessel without
`import-hf`, a command that fails, or a file it should have written and did not. Nothing is
reported as passing unless it was compared.

The command line is here; the rest is in the modules beside this file (their names are
importable from here too): check_pretrained_io.py (running the commands, reading the metrics,
dumps and token file), check_pretrained_mapping.py (step 4) and check_pretrained_compare.py
(steps 4 and 5).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
# check_pretrained_io puts Inputs/ and ../Sft/Inputs/ on sys.path.
from check_pretrained_io import (  # noqa: E402,F401
    ParityError, expect_file, read_dump, read_step_loss, read_token_file, require_import_hf, run,
    step_batches)
from check_pretrained_mapping import (  # noqa: E402,F401
    Match, View, bits, find_match, hf_views, map_parameters, unmatched_hint)
from check_pretrained_compare import Outcome, compare  # noqa: E402,F401
import example_file  # noqa: E402,F401
import hf_reference as ref  # noqa: E402,F401
import make_hf_model  # noqa: E402


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, choices=make_hf_model.ARCHS)
    p.add_argument("--tessel", required=True, help="the tessel compiler")
    p.add_argument("--work", required=True, help="a folder for the model, spec and dumps")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    p.add_argument("--shards", type=int, default=1)
    tie = p.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=None)
    tie.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--gpt2-layout", choices=["hub", "save_pretrained"],
                   default="save_pretrained")
    p.add_argument("--store-tied-head", action="store_true")
    p.add_argument("--buffers", action="store_true",
                   help="the folder also holds the buffers older conversions saved")
    p.add_argument("--config-style", choices=["v4", "v5"], default="v4")
    p.add_argument("--seed", type=int, default=0, help="the weights' and tokens' seed")
    p.add_argument("--seq", type=int, default=24)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--micro-batch", type=int, help="default: --batch")
    p.add_argument("--tokens", type=int, default=4096, help="ids in the token file")
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="passed to import-hf (default: not passed, the importer chooses; it "
                        "trains weights stored in 16 bits in bf16)")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--examples", type=int, default=0,
                   help="train on N random examples with loss masks instead of a stream")
    p.add_argument("--mask-last", action="store_true",
                   help="with --examples: every example's last token untrained too")
    p.add_argument("--threads", type=int, help="--threads for the executable")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed to each command")
    args = p.parse_args(argv)
    micro_batch = args.micro_batch or args.batch
    try:
        work = os.path.abspath(args.work)
        hf, tokens = os.path.join(work, "hf"), os.path.join(work, "tokens.bin")
        examples = os.path.join(work, "examples.bin") if args.examples else None
        spec, exe = os.path.join(work, "model.model"), os.path.join(work, "model")
        dump, metrics = os.path.join(work, "dump"), os.path.join(work, "metrics.jsonl")
        # Nothing from an earlier run may stand in for what this one fails to write.
        for path in (hf, dump):
            shutil.rmtree(path, ignore_errors=True)
        for path in (tokens, spec, exe, metrics) + ((examples,) if examples else ()):
            if os.path.exists(path):
                os.remove(path)
        os.makedirs(dump)

        make = [sys.executable, os.path.join(HERE, "Inputs", "make_hf_model.py"),
                "--arch", args.arch, "--out", hf, "--dtype", args.dtype,
                "--shards", str(args.shards), "--seed", str(args.seed),
                "--gpt2-layout", args.gpt2_layout, "--config-style", args.config_style,
                "--tokens", str(args.tokens), "--token-file", tokens]
        if args.tied is not None:
            make.append("--tied" if args.tied else "--untied")
        if args.store_tied_head:
            make.append("--store-tied-head")
        if args.buffers:
            make.append("--buffers")
        run(make, "make_hf_model.py", args.timeout)
        if examples:
            with open(os.path.join(hf, "config.json")) as f:
                vocab = int(json.load(f)["vocab_size"])
            # Lengths around the row's seq + 1: padded rows, cut rows and rows just full.
            run([sys.executable, os.path.join(HERE, "..", "Sft", "Inputs", "example_file.py"),
                 "--out", examples, "--vocab", str(vocab), "--examples", str(args.examples),
                 "--min-len", "3", "--max-len", str(args.seq + args.seq // 2),
                 "--pad", str(vocab - 1), "--seed", str(args.seed)]
                + (["--mask-last"] if args.mask_last else []), "example_file.py", args.timeout)
        tessel = args.tessel
        if os.path.sep not in tessel:
            tessel = shutil.which(tessel) or tessel
        require_import_hf(tessel)
        imp = [tessel, "import-hf", hf, "-o", spec, "--seq", str(args.seq), "--batch",
               str(args.batch), "--micro-batch", str(micro_batch), "--data",
               examples or tokens]
        if args.precision:
            imp += ["--precision", args.precision]
        run(imp, "tessel import-hf", args.timeout)
        expect_file(spec, "the spec (tessel import-hf -o)")
        with open(spec) as f:
            if "precision = bf16" in f.read():
                print("note: the imported spec trains in bf16; the reference is fp32, so "
                      "expect errors near bf16's 2^-8, not fp32's")
        run([tessel, "compile", spec, "-o", exe], "tessel compile", args.timeout)
        expect_file(exe, "the executable (tessel compile -o)")
        cmd = [exe, "--steps", "1", "--seed", "1", "--eval-every", "0", "--quiet",
               "--dump-dir", dump, "--metrics", metrics]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        run(cmd, os.path.basename(exe), args.timeout)

        outcome = compare(hf, dump, metrics, args.seq, args.batch, args.tol, args.arch,
                          None if examples else tokens, examples)
        print()
        print(f"PARITY {'OK' if outcome.ok else 'FAIL'} {outcome.summary}")
        return 0 if outcome.ok else 1
    except ParityError as e:
        print(f"PARITY FAIL arch={args.arch}: {e}")
        return 1
    except Exception as e:  # a bug here must not look like a pass either
        import traceback
        traceback.print_exc()
        print(f"PARITY FAIL arch={args.arch}: internal error: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())

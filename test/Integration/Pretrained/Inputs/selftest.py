#!/usr/bin/python3
"""Checks of the pretrained-parity tooling that need no Tessel: the safetensors and token-file
formats, the reference's forward pass against a second, loop-by-loop implementation, its
gradients against finite differences, its equivalences between architectures, and
check_pretrained.py's mapping and comparison on dumps made to look like Tessel's (from
test/Integration/Parity/reference.py, Tessel's own PyTorch reference, where it has the architecture).

    selftest.py [--only NAME]

Prints `ok: ...` per check and `SELFTEST OK` at the end; exits 1 at the first failure.

The checks are in the modules beside this file, registered in the order they run:
selftest_formats.py, selftest_reference.py and selftest_compare.py, on the harness of
selftest_support.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import selftest_support as support
# The checks register themselves (support.CHECKS) as they are imported, in this order.
import selftest_formats  # noqa: F401
import selftest_reference  # noqa: F401
import selftest_compare  # noqa: F401
# The stand-in tessel's executable calls selftest.fake_step.
from selftest_compare import fake_step  # noqa: F401


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="run only the check of this name")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    support.TMP = tempfile.mkdtemp(prefix="tessel-pretrained-selftest-")
    try:
        for name, fn in support.CHECKS:
            if args.only and name != args.only:
                continue
            try:
                print(f"ok: {name}: {fn()}", flush=True)
            except support.Failure as e:
                print(f"FAIL: {name}: {e}")
                return 1
        print("SELFTEST OK")
        return 0
    finally:
        if args.keep:
            print(f"kept {support.TMP}")
        else:
            import shutil
            shutil.rmtree(support.TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

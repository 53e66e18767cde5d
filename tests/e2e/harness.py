"""What the Python end-to-end tests share: where the source tree and the dflash binary are,
and the PASS/FAIL tally that decides the exit status (a run that checked nothing fails)."""
import os
import sys

SRC = os.environ.get("DFLASH_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BIN = os.environ.get("DFLASH_BIN") or os.path.join(SRC, "build", "dflash")

_tally = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)
    _tally["passed" if ok else "failed"] += 1
    return ok


def finish():
    passed, failed = _tally["passed"], _tally["failed"]
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or passed == 0 else 0)

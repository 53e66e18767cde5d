"""The Qwen3.5 hybrid PyTorch reference checks itself (tools/reference/qwen35_selfcheck.py):
whole-sequence against step-by-step forwards with carried conv and recurrent states, the two
checkpoint forms against each other, the recurrence against an independent matrix form, the
zero-centered norms' +1 applied once. The engine's hybrid family will be compared with this
reference, so the reference is tested first."""
import os
import subprocess
import sys

src = os.environ.get("DFLASH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
p = subprocess.run([sys.executable, os.path.join(src, "tools", "reference", "qwen35_selfcheck.py")],
                   capture_output=True, text=True, timeout=600)
sys.stdout.write(p.stdout[-4000:])
sys.stderr.write(p.stderr[-4000:])
if p.returncode != 0:
    sys.exit(f"test_qwen35_reference: the self-check failed (exit {p.returncode})")
if " passed, 0 failed" not in p.stdout:
    sys.exit("test_qwen35_reference: the self-check printed no summary")
print("test_qwen35_reference: passed")

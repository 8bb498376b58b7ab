#!/usr/bin/env python3
"""What the wait-counter probes cost a compile, from the kernel's own count of tprof's BPF
programs (docs/BENCHMARKS.md, docs/torch-compile.md).

On torch 2.6 (the trixie root) and torch 2.14 (the sid root), a target compiles one function
(backend "eager", dynamic=False) for a new shape at every step: every step is a recompile, whose
compile wait counters carry the guard that failed. tprof attaches before the first step; after
the steps, while it is still attached, `bpftool prog show` gives each of its wait-counter
programs' run count and run time (tprof enables the kernel's BPF statistics while it runs). Also
the mean time of a recompile with tprof attached and without it (the same steps in a fresh
process), which the probes' few microseconds hide in the noise of a compile.

Usage (root): /usr/bin/python3 bench/recompile_probes.py [--steps N] [--markdown FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import REPO, TPROF, Attached, print_report  # noqa: E402

TARGET = r'''import os, sys, time
import torch
import torch._dynamo.config as config
for limit in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
    if hasattr(config, limit):
        setattr(config, limit, 1 << 20)
config.automatic_dynamic_shapes = False

@torch.compile(backend="eager", dynamic=False)
def f(x):
    return x.sin() + 1

steps = int(sys.argv[1])
f(torch.ones(1))  # the first compile, whose stack shows tprof dynamo's _compile
print("READY", os.getpid(), flush=True)
sys.stdin.readline()
start = time.perf_counter()
for n in range(2, steps + 2):
    f(torch.ones(n))
print("DONE", (time.perf_counter() - start) / steps * 1e6, flush=True)
sys.stdin.readline()
'''

PROGRAMS = ("wait_counter_building", "wait_counter_built", "wait_counter_start", "wait_counter_stop")


def program_stats():
    """run_cnt and run_time_ns of tprof's wait-counter programs (named in full from BTF, or by the kernel's first 15
    characters)."""
    shown = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    stats = {}
    for program in shown:
        for name in PROGRAMS:
            if program.get("name") in (name, name[:15]):
                stats[name] = (program.get("run_cnt", 0), program.get("run_time_ns", 0))
    return stats


def run_target(root, script, steps, attach):
    target = subprocess.Popen(["chroot", root, "python3", script, str(steps)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    ready = target.stdout.readline().split()
    if not ready or ready[0] != "READY":
        raise SystemExit(f"the target did not start in {root}")
    tprof = Attached([TPROF, "attach", ready[1], "--output", os.path.join(root, script.lstrip("/") + ".json"),
                      "--no-et"]) if attach else None
    target.stdin.write("go\n")
    target.stdin.flush()
    done = target.stdout.readline().split()
    stats = program_stats() if tprof else {}
    if tprof:
        tprof.close()
    target.stdin.write("end\n")
    target.stdin.flush()
    target.wait(timeout=120)
    return float(done[1]), stats


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args()
    if not shutil.which("bpftool"):
        raise SystemExit("bpftool missing: run scripts/install-deps.sh")
    lines = [f"Recompile probes ({args.steps} recompiles, backend eager, one run):"]
    for suite, torch_name in (("trixie", "torch 2.6"), ("sid", "torch 2.14")):
        made = subprocess.run(["bash", os.path.join(REPO, "scripts", "make-torch-root.sh"), suite],
                              capture_output=True, text=True)
        if made.returncode != 0:
            lines.append(f"- {torch_name}: NOT MEASURED (scripts/make-torch-root.sh {suite} failed)")
            continue
        root = made.stdout.strip()
        with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp")) as scratch:
            with open(os.path.join(scratch, "recompiles.py"), "w") as out:
                out.write(TARGET)
            script = "/tmp/" + os.path.basename(scratch) + "/recompiles.py"
            untraced_us, _ = run_target(root, script, args.steps, attach=False)
            traced_us, stats = run_target(root, script, args.steps, attach=True)
        programs = ", ".join(f"{name} {count} runs, {time_ns / max(count, 1) / 1000:.2f} us each"
                             for name, (count, time_ns) in sorted(stats.items()))
        lines.append(f"- {torch_name} ({suite} chroot): a recompile takes {untraced_us / 1000:.2f} ms untraced, "
                     f"{traced_us / 1000:.2f} ms with tprof attached; BPF: {programs or 'no wait-counter program ran'}")
    print_report(lines, args.markdown)


if __name__ == "__main__":
    main()

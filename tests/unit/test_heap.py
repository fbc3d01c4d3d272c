"""chalicelib/heap.py: the long-lived heap frozen out of full collections, once per process, after
the replay runner's first run. In a process of its own: freezing is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_settle_collects_then_freezes_once() -> None:
    script = textwrap.dedent(
        """
        import gc, weakref
        from chalicelib import heap

        class Node:
            pass

        cycle = Node(); cycle.me = cycle; gone = weakref.ref(cycle); del cycle
        kept = [Node() for _ in range(1000)]
        before = gc.get_freeze_count()  # CPython 3.12 starts with a few hundred
        assert heap.settle() is True
        assert gone() is None  # collected first: no garbage is frozen
        frozen = gc.get_freeze_count()
        assert frozen >= before + 1000, (before, frozen)
        assert heap.settle() is False and gc.get_freeze_count() == frozen  # once
        later = Node(); later.me = later; seen = weakref.ref(later); del later
        gc.collect()
        assert seen() is None  # objects made after it are collected as before
        gc.disable()
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_disabled_collector_is_left_alone() -> None:
    script = "import gc\nfrom chalicelib import heap\ngc.disable()\nn = gc.get_freeze_count()\n"
    script += "assert heap.settle() is False and gc.get_freeze_count() == n\nprint('ok')"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr

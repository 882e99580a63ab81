"""What the rest of the machine is doing, from /proc (bench/run and
bench/daemon): measurements on a shared machine say how many cores other
work took while they ran."""

from __future__ import annotations

import os
import platform

HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is in user)
    return (sum(v[:8]) - v[3] - v[4]) / HZ


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"

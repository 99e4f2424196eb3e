#!/usr/bin/env python3
"""A psutil-based system sampler collecting the same metrics as smdebug-profiler's sampler
(per-core and total CPU %, I/O wait %, host memory, disk read/write bytes, network bytes in/out),
written as JSON lines the way SageMaker's profiler did; the peer in the sampler-cost comparison.

    python3 benches/psutil_sampler.py INTERVAL_S DURATION_S OUT_FILE

Prints the sampler's own CPU time (user + system of this process) over its wall time.
"""
import json
import os
import sys
import time

import psutil

interval, duration, out_path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
node = os.uname().nodename
start_cpu = time.process_time()
start = time.monotonic()
samples = 0
with open(out_path, "w") as out:
    psutil.cpu_percent(percpu=True)
    while time.monotonic() - start < duration:
        time.sleep(interval)
        ts = time.time()
        times = psutil.cpu_times_percent(percpu=True)
        records = []
        for i, t in enumerate(times):
            records.append(("cpu", f"cpu{i}", "CPUUtilization", 100.0 - t.idle))
            records.append(("cpu", f"cpu{i}", "I/OWaitPercentage", getattr(t, "iowait", 0.0)))
        mem = psutil.virtual_memory()
        records.append(("memory", "total", "MemoryUsedPercent", mem.percent))
        disk = psutil.disk_io_counters()
        records.append(("i/o", "disk", "ReadBytes", disk.read_bytes))
        records.append(("i/o", "disk", "WriteBytes", disk.write_bytes))
        net = psutil.net_io_counters()
        records.append(("network", "total", "ReceiveBytes", net.bytes_recv))
        records.append(("network", "total", "TransmitBytes", net.bytes_sent))
        for typ, name, dim, value in records:
            out.write(json.dumps({"Type": typ, "Name": name, "Dimension": dim, "Value": value,
                                  "NodeId": node, "Timestamp": ts}) + "\n")
        out.flush()
        samples += 1
cpu = time.process_time() - start_cpu
wall = time.monotonic() - start
print(f"psutil sampler: interval {interval*1000:.0f} ms, {samples} samples in {wall:.1f} s, "
      f"CPU {cpu*1000:.1f} ms = {100*cpu/wall:.3f}% of one core")

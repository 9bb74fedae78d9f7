"""tests/monitor_app.py run as it is, on a clock moved to a given time: ``python tests/monitor_walk_app.py START_NS
MODEL_BASE_URL N OUT.jsonl`` makes the app's spans start at START_NS (then as the real clock goes on), so a test can
send one batch of real traffic into one window of the Monitoring page's series and the next batch into the next
without waiting an hour. Only the wall clock moves (time.time_ns, time.time, read by the OpenTelemetry SDK for span
times); monotonic clocks (timeouts, batching) are the real ones."""
from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

APP = str(Path(__file__).resolve().parent / "monitor_app.py")

if __name__ == "__main__":
    start = int(sys.argv.pop(1))
    real_ns = time.time_ns
    offset = start - real_ns()
    time.time_ns = lambda: real_ns() + offset  # before the SDK imports it (``from time import time_ns``)
    time.time = lambda: (real_ns() + offset) / 1e9
    sys.argv[0] = APP
    runpy.run_path(APP, run_name="__main__")

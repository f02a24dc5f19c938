"""The center's memory does not grow with its workers: experiments/bench/bench_memory.cpp
runs a CenterService in its own process for a 20M-parameter vector (80 MB, 20 chunks of 4 MiB)
and 2, then 8, synthetic workers over tcp://127.0.0.1 that push their exchanges all at once.
Before exchanges were streamed the center held one to two more copies of the vector per worker
(10M parameters: adag 3.7 copies at 2 workers, 6.9 at 4; diloco 8.1 and 11.2), so 6 more
workers cost 6 to 12 vectors; now each costs only its chunks in flight, for an asynchronous and
a synchronous rule alike. The bound, 3 vectors for the 6, leaves room for the allocator: a
process's peak moves by up to 2 vectors between runs (what it freed stays mapped), which
chunks in flight are not."""
import json
import subprocess
import sys

bench = sys.argv[1]
result = subprocess.run([bench, "--elements", "20000000", "--clients", "2,8", "--strategies", "adag,diloco",
                         "--exchanges", "2", "--limit-gb", "4", "--json"],
                        capture_output=True, text=True, timeout=240)
assert result.returncode == 0, result.stderr
cells = json.loads(result.stdout)["cells"]
by = {(c["strategy"], c["workers"]): c for c in cells}
for cell in cells:
    assert not cell["over_limit"] and not cell["error"], cell
    print(f'{cell["strategy"]:8s} {cell["workers"]:2d} workers: {cell["exchange_copies"]:.2f} copies while exchanging, '
          f'{cell["copies"]:.2f} at the end')
for strategy in ("adag", "diloco"):
    few, many = by[(strategy, 2)], by[(strategy, 8)]
    growth = many["exchange_copies"] - few["exchange_copies"]
    assert growth <= 3.0, f"{strategy}: {growth:.2f} more copies of x~ at 8 workers than at 2 (at most 3)"
print("ok")

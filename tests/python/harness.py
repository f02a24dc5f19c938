"""What the Python test scripts share: a registry of cases, threads that report their
exceptions, and a main that runs every case and prints one line per case."""
import threading

CASES = []


def case(f):
    CASES.append(f)
    return f


def run_threads(count, body):
    """body(i) on `count` threads; fails naming each thread's exception."""
    errors = []

    def work(i):
        try:
            body(i)
        except Exception as e:  # noqa: BLE001 (reported below, with its thread)
            errors.append(f"worker {i}: {e!r}")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def main():
    failed = 0
    for f in CASES:
        try:
            f()
            print(f"ok   {f.__name__}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {f.__name__}: {e!r}")
    print(f"{len(CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0

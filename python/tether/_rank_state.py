"""A rank's own training state across a launcher's restarts (Worker.from_env(state=...)): what
tether's center does not hold, its optimizer, scheduler or scaler, with the step the rank had
reached, kept in the run directory and given back to the rank's next attempt."""
import os
import sys
import time

import torch


class RankState:
    """``objects``: names to objects with ``state_dict()`` and ``load_state_dict()`` (a
    torch.optim optimizer, an LR scheduler, a GradScaler, a user's own), kept at ``path`` at most
    every ``seconds`` (the center's checkpoint_seconds; 0: only at finish()), right after an exchange, when the
    parameters are x~'s again, and at finish(). Written to a temporary file and renamed: a
    rank killed while writing leaves the previous file whole."""

    def __init__(self, objects, path, seconds):
        if not isinstance(objects, dict) or not objects:
            raise TypeError(f"Worker.from_env(state=...): a dict of names to objects with state_dict() and "
                            f"load_state_dict() (e.g. {{'optimizer': optimizer}}), got {type(objects).__name__}")
        for name, o in objects.items():
            if not (callable(getattr(o, "state_dict", None)) and callable(getattr(o, "load_state_dict", None))):
                raise TypeError(f"Worker.from_env(state={{{name!r}: ...}}): a {type(o).__name__} has no state_dict() "
                                "and load_state_dict(); give the optimizer, scheduler or an object of your own that has")
        self.objects, self.path, self.seconds = objects, path, seconds
        self.saved_at = time.monotonic()

    def restore(self):
        """Loads the kept state into the objects; returns the step it was kept at (None: no
        file, the objects untouched)."""
        if not os.path.exists(self.path):
            return None
        # Its own file, written by save(): the objects' state_dicts may hold any picklable value.
        kept = torch.load(self.path, map_location="cpu", weights_only=False)
        missing = sorted(set(self.objects) - set(kept["objects"]))
        if missing:
            raise ValueError(f"{self.path}: keeps {sorted(kept['objects'])}, not {missing}: the state= of another "
                             "script; give the same names, or remove the file to start them afresh")
        for name, o in self.objects.items():
            o.load_state_dict(kept["objects"][name])
        return int(kept["step"])

    def save_if_due(self, step):
        if self.seconds > 0 and time.monotonic() - self.saved_at >= self.seconds:
            self.save(step)

    def save(self, step):
        kept = {"step": step, "objects": {name: o.state_dict() for name, o in self.objects.items()}}
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            torch.save(kept, temporary)
            os.replace(temporary, self.path)
        except (OSError, RuntimeError) as e:  # a full disk (torch.save raises either) must not end the run
            print(f"tether: {self.path}: the rank's state not kept: {e}; the previous one stays", file=sys.stderr)
            try:
                os.remove(temporary)
            except OSError:
                pass
        self.saved_at = time.monotonic()

"""tether for PyTorch: a model's parameters as one worker of a tether run.

    worker = tether.torch.Worker(model, "tcp://HOST:PORT", strategy="adag", workers=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)   # after Worker(): see below
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step(); optimizer.zero_grad()
        worker.step(len(x))
    worker.finish()

``Worker`` moves every parameter of the model into one flat float32 tensor, once (each
parameter becomes a view of it), so tether exchanges one buffer in place, without copies.
Create the optimizer after the Worker, or at least do not hold references to the old
``param.data`` tensors. CPU and CUDA tensors both work (CUDA needs a CUDA build of tether).
"""
import torch

import tether


def flatten_parameters(parameters):
    """Moves ``parameters`` (a module or an iterable of tensors) into one contiguous float32
    tensor and makes each parameter a view of it; returns that tensor."""
    if isinstance(parameters, torch.nn.Module):
        parameters = parameters.parameters()
    parameters = [p for p in parameters]
    if not parameters:
        raise ValueError("tether.torch: the model has no parameters")
    devices = {p.device for p in parameters}
    if len(devices) != 1:
        raise ValueError(f"tether.torch: all parameters must live on one device, got {sorted(map(str, devices))}")
    if any(p.dtype != torch.float32 for p in parameters):
        raise TypeError("tether.torch: every parameter must be float32 (tether exchanges float32)")
    total = sum(p.numel() for p in parameters)
    flat = torch.empty(total, dtype=torch.float32, device=parameters[0].device)
    offset = 0
    with torch.no_grad():
        for p in parameters:
            n = p.numel()
            flat[offset:offset + n].copy_(p.reshape(-1))
            p.data = flat[offset:offset + n].view_as(p)
            offset += n
    return flat


class Worker:
    """One tether worker over a PyTorch model's parameters; call ``step()`` after
    ``optimizer.step()``. ``center`` (a tether.CenterService in this process) or ``address``."""

    def __init__(self, model, address=None, strategy="aeasgd", workers=1, center=None, **options):
        self.flat = flatten_parameters(model)
        if center is not None:
            if self.flat.is_cuda:
                raise ValueError("tether.torch: an in-process center takes CPU tensors; connect CUDA ones by address")
            self._client = center.connect_worker(self.flat.numpy())
        elif address is not None:
            self._client = tether.connect_pointer(address, self.flat.data_ptr(), self.flat.numel(), self.flat,
                                                  cuda=self.flat.is_cuda, strategy=strategy, workers=workers, **options)
        else:
            raise ValueError("tether.torch.Worker: give the center's address, or center=CenterService(...)")

    @property
    def id(self):
        return self._client.id

    def step(self, samples=0):
        """After each local optimizer step; returns True when it exchanged with the center."""
        return self._client.step(samples)

    def finish(self):
        """The final exchange (nothing trained is lost) and goodbye; returns the worker's counters."""
        return self._client.finish()

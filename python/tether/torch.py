"""tether for PyTorch: a model's parameters as one worker of a tether run.

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    worker = tether.torch.Worker(model, "tcp://HOST:PORT", strategy="adag", workers=4)
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step(); optimizer.zero_grad()
        worker.step(len(x))
    worker.finish()

``Worker`` hands tether the model's parameter tensors themselves (a list of buffers: no flat
copy, the tensors stay what they were, so the optimizer may be made before or after it);
tether reads and writes them in place at each exchange, and the strategy sees them as one
vector in ``model.parameters()`` order. CPU and CUDA tensors both work (CUDA needs a CUDA
build of tether; all parameters on one kind of device). For the center's x~(0) and to load
its result, ``torch.nn.utils.parameters_to_vector`` and ``vector_to_parameters`` give the
same order.
"""
import torch

import tether


def _parameters(parameters):
    if isinstance(parameters, torch.nn.Module):
        parameters = parameters.parameters()
    parameters = list(parameters)
    if not parameters:
        raise ValueError("tether.torch: the model has no parameters")
    if any(p.dtype != torch.float32 for p in parameters):
        raise TypeError("tether.torch: every parameter must be float32 (tether exchanges float32)")
    return parameters


def flatten_parameters(parameters):
    """Moves ``parameters`` (a module or an iterable of tensors) into one contiguous float32
    tensor and makes each parameter a view of it; returns that tensor. For code that wants one
    flat buffer (``Worker`` no longer needs it)."""
    parameters = _parameters(parameters)
    devices = {p.device for p in parameters}
    if len(devices) != 1:
        raise ValueError(f"tether.torch: all parameters must live on one device, got {sorted(map(str, devices))}")
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


class Worker(tether.WorkerClient):
    """One tether worker over a PyTorch model's parameters (a module or an iterable of
    tensors); call ``step()`` after ``optimizer.step()``. ``center`` (a tether.CenterService in
    this process) or ``address`` with ``strategy``, ``workers`` and options as the center's;
    ``overlap_exchange=True`` overlaps each exchange with the next window's steps. ``step``,
    ``finish`` and ``id`` are tether.WorkerClient's."""

    def __init__(self, model, address=None, strategy="aeasgd", workers=1, center=None, **options):
        self.parameters = _parameters(model)
        if center is not None:
            super().__init__(center, self.parameters)
        elif address is not None:
            super().__init__(address, self.parameters, strategy=strategy, workers=workers, **options)
        else:
            raise ValueError("tether.torch.Worker: give the center's address, or center=CenterService(...)")

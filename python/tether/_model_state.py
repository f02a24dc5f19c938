"""How a PyTorch model's state maps onto tether's two vectors (tether.torch's ModelState)."""
import collections
import collections.abc

import numpy
import torch


class ModelState:
    """How a model's state_dict maps onto tether's two vectors: x (the parameters, for the
    strategy) and b (the floating buffers, then one float32 shadow of the integer buffers)."""

    def __init__(self, model):
        if isinstance(model, torch.nn.Module):
            self.entries = model.state_dict(keep_vars=True)
            parameters = list(model.named_parameters())
            buffers = list(model.named_buffers())
        elif isinstance(model, collections.abc.Mapping):
            self.entries = collections.OrderedDict(model)
            if not any(isinstance(v, torch.nn.Parameter) for v in self.entries.values()):
                raise TypeError("tether.torch: this state_dict does not say which entries are parameters; pass the "
                                "module itself, or model.state_dict(keep_vars=True)")
            parameters, buffers, seen = [], [], set()
            for name, t in self.entries.items():
                if torch.is_tensor(t) and id(t) not in seen:
                    seen.add(id(t))
                    (parameters if isinstance(t, torch.nn.Parameter) else buffers).append((name, t))
        else:
            raise TypeError(f"tether.torch: expected a torch.nn.Module or a state_dict, got {type(model).__name__}")
        if not parameters:
            raise ValueError("tether.torch: the model has no parameters")
        self.parameters = [_checked(name, p, "parameter") for name, p in parameters]
        self.float_buffers, self.int_buffers = [], []
        for name, b in buffers:
            if b.is_floating_point():
                self.float_buffers.append(_checked(name, b, "buffer"))
            elif b.is_complex():
                raise TypeError(f"tether.torch: buffer '{name}' is {b.dtype}; tether averages real buffers")
            else:
                self.int_buffers.append(_checked(name, b, "buffer", any_dtype=True))
        _refuse_overlaps(parameters + buffers)
        # Where each tensor's elements are: id -> (vector "x" or "b", offset, count); the shadow
        # of the integer buffers is the end of b.
        self.where, offset = {}, 0
        for p in self.parameters:
            self.where[id(p)] = ("x", offset, p.numel())
            offset += p.numel()
        offset = 0
        for b in self.float_buffers + self.int_buffers:
            self.where[id(b)] = ("b", offset, b.numel())
            offset += b.numel()
        self.buffer_count = offset
        device = self.parameters[0].device
        self.shadow = torch.zeros(sum(b.numel() for b in self.int_buffers), dtype=torch.float32, device=device)
        self._int_views = [b.reshape(-1) for b in self.int_buffers]  # views: they follow the buffers

    def parameter_vector(self):
        return torch.cat([p.detach().reshape(-1).cpu() for p in self.parameters]).numpy()

    def buffer_vector(self):
        self.refresh_shadow()
        parts = [b.detach().reshape(-1).cpu() for b in self.float_buffers] + [self.shadow.cpu()]
        return torch.cat(parts).numpy()

    def buffer_tensors(self):
        """What tether reads and writes in place: the floating buffers, then the shadow."""
        return self.float_buffers + ([self.shadow] if self.int_buffers else [])

    def refresh_shadow(self):
        if self.int_buffers:
            self.shadow.copy_(torch.cat(self._int_views))  # one cat and one cast for all of them

    def take_shadow(self):
        """The integer buffers <- the shadow, rounded (after tether wrote b~ into it)."""
        offset = 0
        with torch.no_grad():
            for view in self._int_views:
                view.copy_(self.shadow[offset:offset + view.numel()].round())
                offset += view.numel()

    def shadow_changed(self):
        return bool(self.int_buffers) and not torch.equal(self.shadow, torch.cat(self._int_views).to(torch.float32))

    def state_dict(self, x, b):
        """A complete state_dict with the model's keys, shapes, dtypes and devices, built from x
        (x~) and b (b~); entries that are no tensors of the model's state (extra state) as the
        model's own."""
        out = collections.OrderedDict()
        vectors = {"x": x, "b": b}
        for name, t in self.entries.items():
            if not torch.is_tensor(t) or id(t) not in self.where:
                out[name] = t
                continue
            vector, offset, count = self.where[id(t)]
            values = torch.from_numpy(numpy.array(vectors[vector][offset:offset + count], dtype=numpy.float32))
            if not t.is_floating_point():
                values = values.round()
            out[name] = values.reshape(t.shape).to(device=t.device, dtype=t.dtype)
        return out


def _checked(name, t, what, any_dtype=False):
    if not any_dtype and t.dtype != torch.float32:
        raise TypeError(f"tether.torch: {what} '{name}' is {t.dtype}; tether exchanges float32 (make the model "
                        "float32: model.float())")
    if not t.is_contiguous():
        raise TypeError(f"tether.torch: {what} '{name}' is not contiguous (shape {tuple(t.shape)}, strides "
                        f"{t.stride()}); tether reads and writes it in place; make it contiguous before, e.g. "
                        f"p.data = p.data.contiguous()")
    return t


def _refuse_overlaps(named):
    """Two entries sharing memory (a view of another parameter, a buffer aliasing one) would be
    exchanged twice and written twice; a tied parameter (the same tensor) comes once already."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), name, t.device)
                   for name, t in named if t.numel() > 0)
    for (start_a, end_a, a, dev_a), (start_b, _, b, dev_b) in zip(spans, spans[1:]):
        if dev_a == dev_b and start_b < end_a:
            raise ValueError(f"tether.torch: '{a}' and '{b}' share memory; tether exchanges every parameter and "
                             "buffer once, so give the model tensors of their own (or tie them as one Parameter)")

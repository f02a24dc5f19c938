"""Leases as a PyTorch batch sampler (Worker.batches): the data come block by block from the
center instead of a fixed shard, so a fast rank trains more of them, a rank that joins takes
work at once, and what a lost rank leased and had not exchanged is trained by another."""

import torch


class LeasedBatches:
    """Lists of row indices of a data set of ``size`` rows, ``batch_size`` at a time, for
    ``torch.utils.data.DataLoader(dataset, batch_sampler=...)``. Each block is a lease of one
    window's rows (``steps`` minibatches; the strategy's communication window by default) of the
    run's stream, in which position q is row q mod size of pass q // size, each pass in an order
    drawn from ``seed`` alike on every rank (torch.randperm). The next block is asked for while
    the block's last minibatch is trained. Iteration ends when the center has no work left (the
    budget, or ``epochs`` passes, handed out) or says the budget is trained."""

    def __init__(self, client, size, batch_size, epochs=1, seed=0, steps=None):
        if size <= 0 or batch_size <= 0 or epochs <= 0:
            raise ValueError(f"Worker.batches(size={size}, batch_size={batch_size}, epochs={epochs}): each must be "
                             "positive")
        steps = client.communication_window if steps is None else int(steps)
        if steps <= 0:
            raise ValueError(f"Worker.batches(steps={steps}): a lease is at least one minibatch")
        self.client, self.size, self.batch_size, self.seed = client, int(size), int(batch_size), int(seed)
        self.want, self.total = self.batch_size * steps, self.size * int(epochs)
        self._pass, self._order = None, None

    def _row(self, position):
        p = position // self.size
        if p != self._pass:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + p)
            self._pass, self._order = p, torch.randperm(self.size, generator=generator).tolist()
        return self._order[position % self.size]

    def __iter__(self):
        while self.client.running:
            start, count = self.client.lease(self.want, self.total)
            if count == 0:
                return
            rows = [self._row(q) for q in range(start, start + count)]
            for first in range(0, count, self.batch_size):
                if first + self.batch_size >= count and self.client.running:  # the block's last minibatch: the next one travels meanwhile
                    self.client.ask_lease(self.want, self.total)
                yield rows[first:first + self.batch_size]

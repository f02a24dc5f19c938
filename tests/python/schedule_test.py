#!/usr/bin/python3
"""tether.LearningRateSchedule: the C++ schedules (<tether/schedule.hpp>) from a dict or JSON
text, their errors as TetherError naming the key, and torch's LambdaLR driven by one, as
docs/python.md shows. Run by meson test with PYTHONPATH=build/python."""
import math

import tether


def check_values():
    cosine = tether.LearningRateSchedule({"name": "cosine", "final_scale": 0.0}, 100)
    assert cosine.scale(0) == 1.0
    assert math.isclose(cosine.scale(25), (1 + math.cos(math.pi / 4)) / 2)
    assert math.isclose(cosine.scale(50), 0.5)
    assert cosine.total_steps == 100 and cosine.warmup_steps == 0
    warm = tether.LearningRateSchedule('{"name": "step", "milestones": [2], "factor": 0.5}', 50, steps_per_epoch=10,
                                       warmup_steps=4)
    assert [warm(s) for s in (0, 3, 19, 20)] == [0.25, 1.0, 1.0, 0.5]
    same = tether.LearningRateSchedule({"name": "step", "milestones": [2], "factor": 0.5}, 50, 10, 4)
    assert all(same.scale(s) == warm.scale(s) for s in range(60))


def check_errors():
    for schedule, steps_per_epoch, message in [
            ({"name": "step", "every_epochs": 1, "final_scale": 0.0}, 10, "schedule.final_scale: unknown key"),
            ({"name": "cosin"}, 10, 'did you mean "cosine"'),
            ({"name": "step", "every_epochs": 1}, 0, "steps_per_epoch > 0"),
            ("{not json", 10, "schedule: not valid JSON")]:
        try:
            tether.LearningRateSchedule(schedule, 100, steps_per_epoch)
        except tether.TetherError as e:
            assert message in str(e), (message, str(e))
        else:
            raise AssertionError(f"{schedule!r} accepted")


def check_lambda_lr():
    import torch
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = tether.LearningRateSchedule({"name": "cosine", "final_scale": 0.1}, 20, warmup_steps=5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    for step in range(25):
        assert math.isclose(optimizer.param_groups[0]["lr"], 0.1 * schedule.scale(step)), step
        model(torch.ones(1, 3)).sum().backward()
        optimizer.step()
        scheduler.step()
    assert math.isclose(optimizer.param_groups[0]["lr"], 0.1 * 0.1)
    scheduler.load_state_dict(scheduler.state_dict())  # a checkpoint of the scheduler round-trips


if __name__ == "__main__":
    for check in (check_values, check_errors, check_lambda_lr):
        check()  # a failure raises, and the test fails with its traceback
        print(f"ok   {check.__name__}")

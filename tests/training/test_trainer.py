"""The trainer's training loop: one trace for every loop of a run."""

import pytest

from official_repro.training import trainer as trainer_lib


@pytest.mark.slow
@pytest.mark.parametrize(
    'optimizer_bindings',
    [
        ["optimization.optimizer = 'lamb'"],  # gin/pretrain/electra.gin's
        ["optimization.optimizer = 'adamw'"],
    ],
)
def test_every_training_loop_reuses_the_first_trace(
    run_tiny_electra, tmp_path, monkeypatch, optimizer_bindings
):
  """The heads and the optimizer create their variables before the loop.

  Fails if the heads or the optimizer create variables inside the first
  loop: TensorFlow then traces the loop twice before it runs ([2, 2, 2]).
  """
  traces_after_each_loop = []
  train_loop_end = trainer_lib.Trainer.train_loop_end

  def counting_train_loop_end(self):
    loop_fn = self._train_loop_fn  # pylint: disable=protected-access
    traces_after_each_loop.append(loop_fn.experimental_get_tracing_count())
    return train_loop_end(self)

  monkeypatch.setattr(
      trainer_lib.Trainer, 'train_loop_end', counting_train_loop_end
  )
  result = run_tiny_electra(
      tmp_path,
      [
          'experiment.train_steps = 3',
          'experiment.steps_per_loop = 1',
          'experiment.checkpoint_interval = 3',
          *optimizer_bindings,
      ],
      mode='train',
  )
  assert result['global_step'] == 3
  assert traces_after_each_loop == [1, 1, 1]

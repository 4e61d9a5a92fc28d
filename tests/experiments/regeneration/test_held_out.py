"""Held-out metrics are read back from a run's evaluation summaries."""

import os

import tensorflow as tf

from experiments.regeneration import held_out


def _write(model_dir, points):
  writer = tf.summary.create_file_writer(
      os.path.join(model_dir, held_out.VALIDATION_SUBDIR)
  )
  with writer.as_default():
    for step, metrics in points:
      for name, value in metrics.items():
        tf.summary.scalar(name, value, step=step)
  writer.close()


def test_every_evaluation_is_read_back_by_step(ram_dir):
  _write(
      ram_dir,
      [
          (200, dict(masked_lm_accuracy=0.25, steps_per_second=9.0)),
          (100, dict(masked_lm_accuracy=0.125, discriminator_auc=0.75)),
      ],
  )
  curve = held_out.read_curve(ram_dir)
  assert list(curve) == [100, 200]
  assert curve[100] == dict(masked_lm_accuracy=0.125, discriminator_auc=0.75)
  # Orbit's own throughput scalar is not a metric of the model.
  assert curve[200] == dict(masked_lm_accuracy=0.25)


def test_a_resumed_runs_repeated_evaluation_keeps_the_later_values(tmp_path):
  _write(str(tmp_path), [(100, dict(masked_lm_accuracy=0.125))])
  _write(str(tmp_path), [(100, dict(masked_lm_accuracy=0.5))])
  assert len(tf.io.gfile.glob(str(tmp_path / 'validation' / '*'))) == 2
  assert held_out.read_curve(str(tmp_path)) == {
      100: dict(masked_lm_accuracy=0.5)
  }


def test_a_run_that_never_evaluated_has_no_curve(tmp_path):
  assert held_out.read_curve(str(tmp_path)) == {}

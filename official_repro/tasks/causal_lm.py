"""Causal (next-token) language modelling on word-level text (002 Table 3).

A Model Garden `Task` for `causal_lm.CausalLM`, run by `experiment.run` like
the pretraining objectives, but not a registered objective (no records, no
encoder for fine-tuning). Data: WikiText-format files cut into `[B, T + 1]`
windows; a resumed run skips the batches before its checkpoint. Metrics per
evaluation stream `s`: `s_nll`, `s_perplexity` (over the whole stream) and
`s_tokens`.
"""

import dataclasses
import functools
import os
from typing import Dict, List, Optional, Tuple

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory
from official.modeling.hyperparams import base_config
from official_repro.common import cli
from official_repro.common import gin_dataclass
from official_repro.data import wikitext
from official_repro.modeling.models import causal_lm
from official_repro.training import experiment

STREAMS = ('train', 'valid', 'test')


@dataclasses.dataclass
class CausalLMDataConfig(cfg.DataConfig):
  """Windows of a word-level corpus (fields: see `data_configs`).

  `streams`: ('train',) or any of 'valid', 'test'; `start_step`: the global
  step a training stream starts at.
  """

  train_file: str = ''
  valid_file: Optional[str] = None
  valid_fraction: Optional[float] = None
  test_file: Optional[str] = None
  max_vocab_size: Optional[int] = None
  seq_length: int = 64
  streams: Tuple[str, ...] = ('train',)
  start_step: int = 0


@dataclasses.dataclass
class CausalLMModelConfig(base_config.Config):
  """`causal_lm.CausalLM`'s arguments; vocab and length set from the data."""

  architecture: str = 'transformer'
  hidden_size: int = 128
  num_layers: int = 4
  num_attention_heads: int = 4
  intermediate_size: int = 512
  embedding_width: Optional[int] = None
  head_ratio: int = 2
  kernel_size: int = 9
  num_groups: int = 1
  activation: str = 'gelu_erf'
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02
  unigram_output_bias: bool = True
  vocab_size: int = 0
  max_seq_length: int = 0


@dataclasses.dataclass
class CausalLMTaskConfig(cfg.TaskConfig):
  """The causal LM and its data (evaluation: the validation stream)."""

  model: CausalLMModelConfig = dataclasses.field(
      default_factory=CausalLMModelConfig
  )
  train_data: CausalLMDataConfig = dataclasses.field(
      default_factory=CausalLMDataConfig
  )
  validation_data: CausalLMDataConfig = dataclasses.field(
      default_factory=lambda: CausalLMDataConfig(streams=('valid',))
  )


# gin `causal_lm.<field>`: the model config's fields but the derived ones.
_model_config_from_gin = gin_dataclass.external_configurable(
    CausalLMModelConfig, 'causal_lm', exclude=('vocab_size', 'max_seq_length')
)


_load_corpus = functools.lru_cache(maxsize=2)(wikitext.load_corpus)


def load_corpus(data: CausalLMDataConfig) -> wikitext.Corpus:
  """The encoded corpus of `data` (read once per process and arguments)."""
  return _load_corpus(
      data.train_file,
      data.valid_file,
      data.valid_fraction,
      data.max_vocab_size,
      data.test_file,
  )


def stream(corpus: wikitext.Corpus, name: str) -> np.ndarray:
  """The token ids of stream `name` ('train', 'valid' or 'test')."""
  if name not in STREAMS:
    raise cli.UserError(
        f'causal_lm_data streams must be among {STREAMS}, got {name!r}.'
    )
  ids = getattr(corpus, name)
  if ids is None:
    raise cli.UserError(
        f'Stream {name!r} needs causal_lm_data.test_file (none is set).'
    )
  return ids


@gin.configurable('causal_lm_data')
def data_configs(
    train_file: str = gin.REQUIRED,
    valid_file: Optional[str] = None,
    valid_fraction: Optional[float] = None,
    test_file: Optional[str] = None,
    max_vocab_size: Optional[int] = None,
    seq_length: int = 64,
    train_batch_size: int = 32,
    eval_batch_size: Optional[int] = None,
    seed: Optional[int] = None,
) -> Tuple[CausalLMDataConfig, CausalLMDataConfig]:
  """`(train_config, eval_config)` of one corpus (eval: valid and test).

  Args:
    train_file: WikiText-format training file.
    valid_file: validation file; exclusive with `valid_fraction`.
    valid_fraction: hold out this tail of `train_file` instead.
    test_file: optional test file, also evaluated.
    max_vocab_size: vocabulary cap, specials included.
    seq_length: T, the window length.
    train_batch_size: windows per training step.
    eval_batch_size: windows per evaluation batch (default: training's).
    seed: seed of the training order (None: the run's seed).
  """
  common = dict(
      train_file=train_file,
      valid_file=valid_file,
      valid_fraction=valid_fraction,
      test_file=test_file,
      max_vocab_size=max_vocab_size,
      seq_length=seq_length,
  )
  return (
      CausalLMDataConfig(
          streams=('train',),
          global_batch_size=train_batch_size,
          is_training=True,
          drop_remainder=True,
          seed=seed,
          **common,
      ),
      CausalLMDataConfig(
          streams=('valid', 'test') if test_file else ('valid',),
          global_batch_size=eval_batch_size or train_batch_size,
          is_training=False,
          drop_remainder=False,
          **common,
      ),
  )


def task_config_from_gin() -> CausalLMTaskConfig:
  """The task config from `causal_lm.*` and `causal_lm_data.*`."""
  train_data, validation_data = data_configs()
  corpus = load_corpus(train_data)
  model = _model_config_from_gin(
      vocab_size=len(corpus.vocab), max_seq_length=train_data.seq_length
  )
  return CausalLMTaskConfig(
      model=model, train_data=train_data, validation_data=validation_data
  )


@gin.configurable('causal_lm_experiment')
def experiment_config(
    train_steps: int = gin.REQUIRED,
    steps_per_loop: int = 100,
    checkpoint_interval: int = 1000,
    max_to_keep: int = 1,
    seed: Optional[int] = None,
    deterministic: bool = False,
) -> Tuple[cfg.ExperimentConfig, experiment.RunSettings]:
  """`(experiment_config, run_settings)` for `experiment.run`.

  Arguments as `experiment.experiment_config`'s; evaluation runs once,
  after the last step.
  """
  params = cfg.ExperimentConfig(
      task=task_config_from_gin(),
      trainer=experiment.trainer_config(
          'causal_lm_experiment',
          train_steps,
          steps_per_loop,
          checkpoint_interval,
          max_to_keep,
          validation_interval=train_steps,
      ),
  )
  return params, experiment.RunSettings(seed=seed, deterministic=deterministic)


def build_causal_lm(config: CausalLMModelConfig) -> causal_lm.CausalLM:
  """The model of `config`, built (its weights exist)."""
  arguments = config.as_dict()
  del arguments['unigram_output_bias']
  model = causal_lm.CausalLM(**arguments)
  model(tf.zeros([1, 1], tf.int32))
  return model


class StreamPerplexity(tf_keras.metrics.Mean):
  """exp of the weighted mean NLL: perplexity over everything it has seen."""

  def result(self):
    return tf.exp(super().result())


@task_factory.register_task_cls(CausalLMTaskConfig)
class CausalLMTask(base_task.Task):
  """Next-token cross-entropy on windows of a word-level corpus.

  Features `[B, T]`; labels `tokens` `[B, T + 1]`, `weights` `[B, T]` and
  `stream` `[B]` (index into the data config's `streams`).
  """

  def build_model(self) -> causal_lm.CausalLM:
    return build_causal_lm(self.task_config.model)

  def initialize(self, model: causal_lm.CausalLM) -> None:
    """A new run's output bias: the training stream's log unigram probs."""
    if not self.task_config.model.unigram_output_bias:
      return
    corpus = load_corpus(self.task_config.train_data)
    model.output_bias.assign(
        wikitext.unigram_log_probs(
            corpus.train, self.task_config.model.vocab_size
        )
    )

  def build_inputs(
      self,
      params: CausalLMDataConfig,
      input_context: Optional[tf.distribute.InputContext] = None,
  ) -> tf.data.Dataset:
    corpus = load_corpus(params)
    batch_size = params.global_batch_size
    batches_per_step = 1
    if input_context:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
      batches_per_step = max(
          1,
          input_context.num_replicas_in_sync
          // input_context.num_input_pipelines,
      )
    datasets = []
    for index, name in enumerate(params.streams):
      windows = wikitext.window_dataset(
          stream(corpus, name),
          params.seq_length,
          batch_size,
          training=params.is_training,
          seed=params.seed,
          name=name,
      )
      if params.is_training:
        windows = windows.skip(params.start_step * batches_per_step)

      def split(batch, index=index):
        tokens = batch['tokens']
        labels = dict(
            tokens=tokens,
            weights=batch['weights'],
            stream=tf.fill(tf.shape(tokens)[:1], index),
        )
        return tokens[:, :-1], labels

      datasets.append(windows.map(split))
    dataset = datasets[0]
    for other in datasets[1:]:
      dataset = dataset.concatenate(other)
    return dataset.prefetch(tf.data.AUTOTUNE)

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    """Mean next-token NLL over the batch's target tokens."""
    weights = tf.cast(labels['weights'], tf.float32)
    loss = tf.math.divide_no_nan(
        causal_lm.sequence_nll(model_outputs, labels['tokens'], weights),
        tf.reduce_sum(weights),
    )
    if aux_losses:
      loss += tf.add_n(aux_losses)
    return loss

  def _evaluated_streams(self, training: bool) -> Tuple[str, ...]:
    return () if training else tuple(self.task_config.validation_data.streams)

  def build_metrics(
      self, training: Optional[bool] = None
  ) -> List[tf_keras.metrics.Metric]:
    metrics = []
    for name in self._evaluated_streams(training):
      metrics += [
          tf_keras.metrics.Mean(name=f'{name}_nll'),
          StreamPerplexity(name=f'{name}_perplexity'),
          tf_keras.metrics.Sum(name=f'{name}_tokens'),
      ]
    return metrics

  def process_metrics(self, metrics, labels, model_outputs, **kwargs):
    if not metrics:
      return
    by_name = {metric.name: metric for metric in metrics}
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels['tokens'][:, 1:],
        logits=tf.cast(model_outputs, tf.float32),
    )
    weights = tf.cast(labels['weights'], tf.float32)
    for index, name in enumerate(self._evaluated_streams(training=False)):
      if f'{name}_nll' not in by_name:
        continue
      mask = tf.cast(tf.equal(labels['stream'], index), tf.float32)
      in_stream = weights * mask[:, None]
      by_name[f'{name}_nll'].update_state(nll, in_stream)
      by_name[f'{name}_perplexity'].update_state(nll, in_stream)
      by_name[f'{name}_tokens'].update_state(tf.reduce_sum(in_stream))


def train_summaries(model_dir: str) -> Dict[int, Dict[str, float]]:
  """{step: {tag: value}} of Orbit's training scalars (repeated step: last)."""
  pattern = os.path.join(model_dir, 'train', 'events.out.tfevents.*')
  latest: Dict[Tuple[int, str], Tuple[float, float]] = {}
  for path in tf.io.gfile.glob(pattern):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        number = (
            float(tf.make_ndarray(value.tensor))
            if value.HasField('tensor')
            else float(value.simple_value)
        )
        key = (int(event.step), value.tag)
        if key not in latest or event.wall_time >= latest[key][0]:
          latest[key] = (event.wall_time, number)
  summaries: Dict[int, Dict[str, float]] = {}
  for (step, tag), (_, number) in sorted(latest.items()):
    summaries.setdefault(step, {})[tag] = number
  return summaries

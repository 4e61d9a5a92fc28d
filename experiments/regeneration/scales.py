"""The scales a table's grid runs at below paper scale.

A scale is a gin include, `gin/regenerate/<name>.gin` (with its variants,
`runner.scale_gin_files`), plus what the include cannot say: how the corpus
becomes records, the reference run's steps, the pretraining seeds per model
and whether held-out text is evaluated while pretraining. The records'
sequence length is the include's `pretrain_data.max_seq_length`.
"""

import dataclasses
from typing import Dict, Optional


@dataclasses.dataclass(frozen=True)
class Scale:
  """How a grid is shrunk below paper scale.

  Attributes:
    name: 'tiny', 'cpu' or 'gpu'; the include is gin/regenerate/<name>.gin.
    reference_steps: default steps of a table's reference run.
    strategy: default distribution strategy of every job.
    learned_vocab_size: without --vocab_file, a WordPiece vocabulary of this
      size is learned from the training books (None: --vocab_file is
      required).
    eval_fraction: share of the books held out for evaluation (whole books).
    pretrain_seeds: pretraining seeds per compared model; each seed is its
      own run, fine-tuned alike, and a row reports their mean and spread.
    held_out_steps: batches of held-out text evaluated at every checkpoint
      of a pretraining run (0: none), the learning curves' points.
    default_tasks: GLUE tasks fine-tuned, as task:epochs.
  """

  name: str
  reference_steps: int
  strategy: str
  learned_vocab_size: Optional[int] = None
  eval_fraction: float = 0.01
  pretrain_seeds: int = 1
  held_out_steps: int = 0
  default_tasks: tuple = ('sst2:0.25',)


SCALES: Dict[str, Scale] = {
    scale.name: scale
    for scale in (
        Scale('tiny', reference_steps=400, strategy='cpu'),
        # Sized for 2 CPU cores: see gin/regenerate/cpu.gin and
        # experiments/reports/learning_cpu.md.
        Scale(
            'cpu',
            reference_steps=4000,
            strategy='cpu',
            learned_vocab_size=4096,
            eval_fraction=0.1,
            pretrain_seeds=3,
            held_out_steps=20,
            default_tasks=('sst2:1', 'mrpc:3', 'cola:3', 'rte:3', 'stsb:3'),
        ),
        Scale('gpu', reference_steps=5000, strategy='one_device'),
    )
}


def get(name: str) -> Scale:
  """The scale `name`, or a KeyError naming the known ones."""
  if name not in SCALES:
    raise KeyError(f'No scale {name!r}; known: {", ".join(SCALES)}.')
  return SCALES[name]

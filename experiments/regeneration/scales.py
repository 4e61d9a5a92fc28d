"""The scales a table's grid runs at below paper scale.

A scale is a gin include, `gin/regenerate/<name>.gin`, plus what it cannot
say: records, reference steps, pretraining seeds and held-out evaluation.
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
    learned_vocab_size: vocabulary learned without --vocab_file (None:
      --vocab_file required).
    eval_fraction: share of the books held out for evaluation.
    pretrain_seeds: pretraining seeds (runs) per compared model.
    held_out_steps: held-out batches evaluated per checkpoint (0: none).
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

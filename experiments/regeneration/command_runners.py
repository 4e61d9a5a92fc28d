"""The runners of the 'command' targets: one experiment module each.

Each runs its module (`Target.command`) in its own process and writes its
results as the grids write theirs (`write_command_table`).
"""

import dataclasses
import os
from typing import Optional

from experiments import attention_concentration as attention_experiment
from experiments import convbert_lm as lm_experiment
from experiments import convbert_speed as speed_experiment
from experiments import paper_tables
from experiments import commands
from experiments.regeneration import registry
from experiments.regeneration import runner
from experiments.regeneration import target_runners
from official_repro.common import json_files
from official_repro.common import markdown


def _run_module(module: str, *args: str) -> None:
  """Runs `python -m module args`, its output shown (or a CommandError)."""
  print(commands.run_module(module, args), end='', flush=True)


def write_command_table(
    target: registry.Target,
    out: str,
    body: str,
    results,
    header: Optional[str] = None,
) -> str:
  """Writes a 'command' target's <out>/<key>.md and .json; returns the md."""
  lines = f'{header}\n\n' if header else ''
  text = f'## {target.key}: {target.description}\n\n{lines}{body}\n'
  json_files.write_text(os.path.join(out, f'{target.key}.md'), text)
  json_files.write_json(
      os.path.join(out, f'{target.key}.json'),
      dict(
          target=target.key,
          header=header,
          command=target.command,
          results=results,
      ),
      sort_keys=False,
  )
  print(text)
  return text


@target_runners.registered('attention_concentration')
def attention_concentration(
    target: registry.Target, request: target_runners.Request
) -> None:
  """002 Table 1: BERT's and ConvBERT's attention on MRPC, pretrained alike."""
  out = target_runners.output_dir(request)
  request.require('corpus', 'glue_dir')
  settings = dataclasses.replace(
      request.grid_settings(target, {}, 0), finetune_fingerprint=''
  )
  encoders = runner.pretrain_only(target, settings, out, request.store())
  results_file = os.path.join(out, 'attention_concentration.json')
  args = [
      f'--glue_dir={request.glue_dir}',
      '--task=mrpc',
      '--split=dev',
      f'--output_file={results_file}',
  ]
  max_seq_length = runner.scale_max_seq_length(request.scale)
  if max_seq_length < 128:
    # The encoders' position tables end there.
    args.append(f'--max_seq_length={max_seq_length}')
  for run in target.runs:
    args += [f'--init_checkpoint={encoders[run.name]}', f'--label={run.row}']
  _run_module(target.command, *args)
  results = json_files.read_json(results_file)
  runs = '; '.join(f'{run.row}: {encoders[run.name]}' for run in target.runs)
  write_command_table(
      target,
      out,
      attention_experiment.format_table(results),
      results,
      header=(
          f'Scale: {request.scale}, {settings.reference_steps} '
          f'pretraining steps each, both with their paper gin '
          f'files (ELECTRA objective). Encoders: {runs}.'
      ),
  )


@target_runners.registered('speed_comparison')
def speed_comparison(
    target: registry.Target, request: target_runners.Request
) -> None:
  """004 Sec. 3.3: SCRIPT-small vs ELECTRA-small steps/s, same batch.

  On the built-in corpus with --vocab_file (step time depends on its size).
  """
  out = target_runners.output_dir(request)
  request.require('vocab_file')
  results = {}
  for run in target.runs:
    path = os.path.join(out, f'{run.name}.json')
    _run_module(
        target.command,
        *(f'--gin_file={gin_file}' for gin_file in run.gin_files),
        '--gin_param=pretrain_data.train_batch_size=16',
        '--steps=10',
        '--variants=ours',
        f'--output_json={path}',
        f'--vocab_file={request.vocab_file}',
    )
    results[run.row] = json_files.read_json(path)['results'][0][
        'steps_per_second'
    ]
  stated = paper_tables.load('004').stated
  paper = {row: stated[f'{row} iterations/s'].value for row in results}
  ours_ratio = results['SCRIPT-small'] / results['ELECTRA-small']
  paper_ratio = paper['SCRIPT-small'] / paper['ELECTRA-small']
  table = markdown.table(
      [
          'model',
          'ours (steps/s, batch 16, this machine)',
          '004 (it/s, TPU v3-8)',
      ],
      [[row, f'{results[row]:.3f}', f'{paper[row]:g}'] for row in results],
  )
  body = '\n'.join(table) + (
      f'\n\nSCRIPT / ELECTRA: ours {ours_ratio:.3f}, 004 {paper_ratio:.3f} '
      f'({stated["SCRIPT-small iterations/s"].where}).'
  )
  write_command_table(
      target,
      out,
      body,
      dict(
          steps_per_second=results,
          paper_iterations_per_second=paper,
          ratio=dict(ours=ours_ratio, paper=paper_ratio),
      ),
      header=f'Vocabulary: {request.vocab_file}; batch 16, 10 timed steps.',
  )


@target_runners.registered('convbert_speed')
def convbert_speed(
    target: registry.Target, request: target_runners.Request
) -> None:
  """002 Table 2: FLOPs and CPU time of self- vs mixed-attention blocks."""
  out = target_runners.output_dir(request)
  path = os.path.join(out, 'convbert_speed.json')
  _run_module(target.command, '--seq_lengths=128,512', f'--output_json={path}')
  results = json_files.read_json(path)
  body = (
      speed_experiment.format_table(results['rows'])
      + '\n\n'
      + speed_experiment.format_matches(results['paper_matches'])
  )
  write_command_table(target, out, body, results)


@target_runners.registered('convbert_lm')
def convbert_lm(
    target: registry.Target, request: target_runners.Request
) -> None:
  """002 Table 3: language-model perplexity, Transformer vs mixed attention."""
  out = target_runners.output_dir(request)
  request.require('lm_file')
  _run_module(
      target.command,
      f'--train_file={request.lm_file}',
      '--valid_fraction=0.1',
      f'--output_dir={out}',
  )
  results = json_files.read_json(os.path.join(out, 'results.json'))
  write_command_table(target, out, lm_experiment.format_table(results), results)

"""The registry: what regenerates each paper table and figure.

A `Target` names a table or figure, the paper cells it is compared with and
its runner's registered name (`target_runners`), so a new target is one entry
here. Kinds: `pretrain_glue` (pretraining runs fine-tuned on GLUE, at equal
FLOPs where the paper compares so), `command` (an experiment module),
`plan_only` (needs data or hardware only paper scale has) and `learning`.
"""

import dataclasses
import re
from typing import Dict, Optional, Tuple

# Our GLUE task names and the column names the papers print for them.
_001_COLUMNS = dict(
    mrpc='MRPC',
    cola='CoLA',
    mnli='MNLI',
    sst2='SST-2',
    qqp='QQP',
    qnli='QNLI',
    rte='RTE',
    stsb='STS-B',
)
_004_COLUMNS = dict(_001_COLUMNS, sst2='SST', stsb='STS')


@dataclasses.dataclass(frozen=True)
class Run:
  """One compared model: a pretraining run and the row it fills.

  Attributes:
    name: directory name of the run.
    row: the table's row key, or a figure's "series@x"; a figure row without
      "@" is a reference model, drawn as a horizontal line.
    gin_files: its paper gin files (repository-relative).
    budget_ratio: its training FLOPs relative to the reference run.
    scale_bindings: ((scale, bindings), ...) after that scale's include, for
      settings the include would erase (003 Fig. 4's generator depths, 002
      Table 4's "+Larger" widening).
    finetune_size: 'base' or 'large' when the paper fine-tunes this size
      with its own cells, else None.
    paper_row: False for a baseline the paper's table does not print.
  """

  name: str
  row: str
  gin_files: Tuple[str, ...]
  budget_ratio: float = 1.0
  scale_bindings: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
  finetune_size: Optional[str] = None
  paper_row: bool = True

  def bindings_at(self, scale: str) -> Tuple[str, ...]:
    """The run's gin bindings after the include of `scale`."""
    return dict(self.scale_bindings).get(scale, ())


@dataclasses.dataclass(frozen=True)
class Target:
  """One table or figure and how it is regenerated.

  Attributes:
    key: '<paper>.<table id>' or '<paper>.fig<id>' ('learning').
    paper: '001' .. '004', or None for the learning evidence.
    table: the paper_tables table id compared with, or None.
    kind: 'pretrain_glue', 'command', 'plan_only' or 'learning'.
    description: one line for --list.
    runner: its `target_runners.RUNNERS` name.
    runs: the compared models.
    reference: the run whose steps fix the FLOPs budget; None when the paper
      compares at its own steps.
    finetune_paper: folder under gin/finetune/ of the protocol.
    columns: {our GLUE task: the table's column}.
    average_column: the table's GLUE-average column, if any.
    command: the module for kind 'command'.
    figure: the x quantity of a figure's runs ('steps': learning curves).
    why_plan_only: for kind 'plan_only'.
    small_scale_runs: the runs made below paper scale (None: all), with
      `small_scale_note` saying why.
    scale_runs: ((scale, run names), ...) overriding `small_scale_runs`.
    squad: the SQuAD versions the table reports (paper scale only).
    parameters_column: the table's column of parameter counts, if any.
    claims: ((better run, worse run, where the paper says so), ...): orders
      checked over seeds like the averages' (`report.claims`).
    held_out_claims: held-out metrics the orders are checked on too.
  """

  key: str
  paper: Optional[str]
  table: Optional[str]
  kind: str
  description: str
  runner: str
  runs: Tuple[Run, ...] = ()
  reference: Optional[str] = None
  finetune_paper: Optional[str] = None
  columns: Dict[str, str] = dataclasses.field(default_factory=dict)
  average_column: Optional[str] = None
  command: Optional[str] = None
  figure: Optional[str] = None
  why_plan_only: Optional[str] = None
  small_scale_runs: Optional[Tuple[str, ...]] = None
  small_scale_note: Optional[str] = None
  scale_runs: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
  claims: Tuple[Tuple[str, str, str], ...] = ()
  held_out_claims: Tuple[str, ...] = ()
  squad: Tuple[str, ...] = ()
  parameters_column: Optional[str] = None

  def runs_at(self, scale: str) -> Tuple[Run, ...]:
    """The runs made at `scale` ('tiny', 'cpu', 'gpu' or 'paper')."""
    names = dict(self.scale_runs).get(scale, self.small_scale_runs)
    if scale == 'paper' or names is None:
      return self.runs
    return tuple(run for run in self.runs if run.name in names)


_SAME_SHRUNK_MODEL = (
    'shrunk by gin/regenerate/<scale>.gin, the other columns are the same '
    'model as this one (their sizes, batch and learning rate are what the '
    'include replaces), so only this column is run'
)


# 002's "+Larger" widens medium-small's hidden 384 to 432 (x1.125, feed-
# forward 4 x hidden); the scales' includes set one width for every run, so
# the widening is restated at each: tiny and cpu 128 -> 144, gpu 256 -> 288
# (head size 36, 72 and 72 with the includes' 4, 2 and 4 heads).
_WIDER_BY_432_OVER_384 = tuple(
    (
        scale,
        (
            f'encoder.hidden_size = {hidden * 9 // 8}',
            f'encoder.intermediate_size = {4 * hidden * 9 // 8}',
        ),
    )
    for scale, hidden in (('tiny', 128), ('cpu', 128), ('gpu', 256))
)


def _run(name: str, row: str, paper_gin: str, **fields) -> Run:
  """A `Run` of one paper gin file, `paper_gin` under gin/papers/."""
  return Run(name, row, (f'gin/papers/{paper_gin}.gin',), **fields)


def _runs(paper_dir: str, *rows: Tuple[str, str, str], **fields):
  """The `_run`s of (name, row, gin file in `paper_dir`), alike in `fields`."""
  return tuple(
      _run(name, row, f'{paper_dir}/{gin}', **fields) for name, row, gin in rows
  )


def _003_runs(column: str) -> Tuple[Run, ...]:
  """BERT, ELECTRA and TEAMS rows of one 003 Table 1 column."""
  label = column.replace('_pp', '++').title()  # 'small_pp': 'Small++'
  size = {'base': 'base', 'base_pp': 'base', 'large': 'large'}.get(column)
  bert_gin = (f'gin/papers/003_teams/table5_{column}.gin',)
  return (
      Run(
          f'bert_{column}',
          f'BERT-{label}',
          bert_gin + ('gin/pretrain/masked_lm.gin',),
          finetune_size=size,
      ),
      _run(
          f'electra_{column}',
          f'ELECTRA-{label} (Our reimplementation)',
          f'003_teams/electra_{column}',
          finetune_size=size,
      ),
      _run(
          f'teams_{column}',
          f'TEAMS-{label}',
          f'003_teams/{column}',
          finetune_size=size,
      ),
  )


def _003_small_pp_baselines(suffix: str) -> Tuple[Run, ...]:
  """The ELECTRA-Small++ and TEAMS-Small++ rows 003's ablations repeat."""
  return (
      _run(f'electra{suffix}', 'ELECTRA-Small++', '003_teams/electra_small_pp'),
      _run(f'teams{suffix}', 'TEAMS-Small++', '003_teams/small_pp'),
  )


_ELECTRA_SMALL = _run('electra_small', 'ELECTRA-small', '001_ale/electra_small')
_SCRIPT_SMALL = _run('script_small', 'SCRIPT-small', '004_script/small')
_MIXED_ATTENTION = (
    "002 Response 3: mixed attention improves on BERT's self-attention, all "
    'else equal'
)
_RUNNERS_OF_KINDS = dict(pretrain_glue='grid', plan_only='plan_only')


def _entry(key: str, description: str, **fields) -> Target:
  """A paper's `Target`, its paper and table (if a number) from its key.

  Its kind is 'command' with a `command`, 'plan_only' with `why_plan_only`,
  else 'pretrain_glue'.
  """
  paper, _, name = key.partition('.')
  table = name if re.fullmatch(r'[0-9]+|[IVX]+', name) else None
  kind = 'pretrain_glue'
  if 'command' in fields:
    kind = 'command'
  elif 'why_plan_only' in fields:
    kind = 'plan_only'
  fields.setdefault('runner', _RUNNERS_OF_KINDS.get(kind))
  return Target(key, paper, table, kind, description, **fields)


_TARGETS = (
    _entry(
        '001.III',
        'BERT/XLNet fine-tuned on RACE-middle and Penn Treebank POS',
        finetune_paper='001_ale',
        why_plan_only=(
            'needs RACE-middle, the Penn Treebank and pretrained BERT_base / '
            'BERT_large checkpoints, none of which ../shared/data holds; '
            'XLNet is not implemented here'
        ),
    ),
    _entry(
        '001.IV',
        'BERT_small, ELECTRA_small (1x, 2x) and ALE_small at equal FLOPs, '
        'GLUE dev',
        runs=(
            _run('bert_small', 'BERT_small', '001_ale/bert_small'),
            _run('electra_small', 'ELECTRA_small', '001_ale/electra_small'),
            _run(
                'electra_small_2x',
                '2x time',
                '001_ale/electra_small',
                budget_ratio=2.0,
            ),
            _run('ale_small', 'ALE_small', '001_ale/ale_small'),
        ),
        reference='electra_small',
        finetune_paper='001_ale',
        columns=_001_COLUMNS,
        average_column='Avg.',
        scale_runs=(('cpu', ('bert_small', 'electra_small', 'ale_small')),),
        small_scale_note=(
            'at cpu scale the three models at equal FLOPs, each with several '
            'pretraining seeds; "2x time" would double the grid\'s '
            'cost'
        ),
    ),
    _entry(
        '002.1',
        'attention-map diagonal concentration on MRPC, BERT vs ConvBERT',
        runner='attention_concentration',
        runs=(
            _run('bert_small', 'BERT', '001_ale/electra_small'),
            _run('convbert_small', 'ConvBERT', '002_convbert/small'),
        ),
        command='experiments.attention_concentration',
    ),
    _entry(
        '002.2',
        'FLOPs and CPU time of a base self-attention vs mixed-attention '
        'block',
        runner='convbert_speed',
        command='experiments.convbert_speed',
    ),
    _entry(
        '002.3',
        'language-model perplexity, Transformer vs mixed attention',
        runner='convbert_lm',
        command='experiments.convbert_lm',
    ),
    _entry(
        '002.4',
        'medium-small +BNK,+GL and +Larger: parameters and GLUE',
        runs=(
            _run(
                'bnk_gl',
                'ConvBERTmedium-small / +BNK,+GL',
                '002_convbert/table4_bnk_gl',
            ),
            _run(
                'bnk_gl_larger',
                'ConvBERTmedium-small / +BNK,+GL,+Larger',
                '002_convbert/table4_bnk_gl_larger',
                scale_bindings=_WIDER_BY_432_OVER_384,
            ),
        ),
        finetune_paper='002_convbert',
        average_column='GLUE',
        parameters_column='Params',
    ),
    _entry(
        '002.5',
        'pretraining wall-clock on TPU v3-8',
        runs=(
            _ELECTRA_SMALL,
            _run('convbert_small', 'CONVBERT-small', '002_convbert/small'),
            _run(
                'convbert_medium_small',
                'CONVBERT-medium-small',
                '002_convbert/medium_small',
            ),
            _run('convbert_base', 'CONVBERT-base', '002_convbert/base'),
        ),
        why_plan_only='TPU v3-8 wall-clock: the plan, and steps/s measured '
        'here with experiments.benchmark_pretraining',
    ),
    _entry(
        '002.6',
        'ConvBERT-small GLUE dev, mean ± standard error over runs, and the '
        'BERT-backbone ELECTRA-small it improves on',
        runs=(
            _run('convbert_small', 'ConvBERT-small', '002_convbert/small'),
            _run(
                'electra_small',
                'ELECTRA-small (BERT backbone)',
                '002_convbert/electra_small',
                paper_row=False,
            ),
        ),
        finetune_paper='002_convbert',
        columns=_001_COLUMNS,
        average_column='Avg.',
        claims=(('convbert_small', 'electra_small', _MIXED_ATTENTION),),
    ),
    _entry(
        '002.mlm',
        "002's mixed attention against BERT's self-attention under 001's "
        'masked-LM recipe: held-out masked-LM accuracy and GLUE dev, at '
        "equal training FLOPs below paper scale (at paper scale 001's "
        '163k steps each); ours: 002 trains ELECTRA, whose discriminator '
        'does not learn at the cpu scale',
        runs=(
            _run(
                'bert_small',
                'BERT backbone, masked LM (001 BERT_small)',
                '001_ale/bert_small',
                paper_row=False,
            ),
            _run(
                'convbert_small',
                'ConvBERT backbone, masked LM (001 BERT_small recipe)',
                '002_convbert/masked_lm_small',
                paper_row=False,
            ),
        ),
        reference='bert_small',
        finetune_paper='002_convbert',
        columns=_001_COLUMNS,
        claims=(('convbert_small', 'bert_small', _MIXED_ATTENTION),),
        held_out_claims=('masked_lm_accuracy',),
    ),
    _entry(
        '003.1',
        'BERT, ELECTRA and TEAMS, GLUE (SQuAD at paper scale)',
        runs=sum(
            (
                _003_runs(column)
                for column in ('small', 'small_pp', 'base', 'base_pp', 'large')
            ),
            (),
        ),
        finetune_paper='003_teams',
        average_column='GLUE',
        squad=('squad11', 'squad20'),
        small_scale_runs=('bert_small', 'electra_small', 'teams_small'),
        small_scale_note=f'the Small column; {_SAME_SHRUNK_MODEL}',
    ),
    _entry(
        '003.2',
        'small++ pretraining tasks: MLM, RTD, MWS, RTD + MWS',
        runs=_runs(
            '003_teams',
            ('only_mlm', 'Only MLM (i.e., BERT)', 'table2_only_mlm'),
            ('only_rtd', 'Only RTD (i.e., ELECTRA)', 'table2_only_rtd'),
            ('only_mws', 'Only MWS', 'table2_only_mws'),
            ('teams', 'RTD + MWS (i.e., TEAMS)', 'small_pp'),
        ),
        finetune_paper='003_teams',
        average_column='GLUE',
        squad=('squad11', 'squad20'),
    ),
    _entry(
        '003.3',
        'small++ task-head designs and exported representations',
        runs=(
            *_003_small_pp_baselines(''),
            _run(
                'ffn_heads', 'Use FFN task heads', '003_teams/table3_ffn_heads'
            ),
            _run(
                'heads_on_top',
                'Add task head on 12th layer',
                '003_teams/table3_task_heads_on_top',
            ),
            _run(
                'export_rtd',
                'Use RTD task head outputs',
                '003_teams/table3_export_rtd',
            ),
        ),
        finetune_paper='003_teams',
        average_column='GLUE',
        squad=('squad11', 'squad20'),
    ),
    _entry(
        '003.4',
        'generator/discriminator layer sharing, small++ and base++',
        runs=(
            *_003_small_pp_baselines('_small_pp'),
            _run('full_tie', 'Full Tie', '003_teams/table4_full_tie'),
            _run('no_tie', 'Small++ / No Tie', '003_teams/table4_no_tie'),
            *_runs(
                '003_teams',
                ('electra_base_pp', 'ELECTRA-Base++', 'electra_base_pp'),
                ('teams_base_pp', 'TEAMS-Base++', 'base_pp'),
                ('base_pp_no_tie', 'Base++ / No Tie', 'table4_base_pp_no_tie'),
                finetune_size='base',
            ),
        ),
        finetune_paper='003_teams',
        average_column='GLUE',
        squad=('squad11', 'squad20'),
        small_scale_runs=(
            'electra_small_pp',
            'teams_small_pp',
            'full_tie',
            'no_tie',
        ),
        small_scale_note=f'the Small++ rows; {_SAME_SHRUNK_MODEL}',
    ),
    _entry(
        '003.fig3',
        'learning curves: GLUE over pretraining steps, ELECTRA vs TEAMS',
        runs=(
            _run('electra_small', 'ELECTRA-Small', '003_teams/electra_small'),
            _run('teams_small', 'TEAMS-Small', '003_teams/small'),
        ),
        finetune_paper='003_teams',
        figure='steps',
    ),
    _entry(
        '003.fig4',
        'GLUE against the number of generator layers (TEAMS-small++)',
        runs=tuple(
            _run(
                f'generator_num_layers_{n}',
                f'TEAMS@{n}',
                f'003_teams/fig4_generator_num_layers_{n}',
                scale_bindings=(
                    ('tiny', (f'teams.generator_num_layers = {n // 3}',)),
                    ('cpu', (f'teams.generator_num_layers = {n // 6}',)),
                ),
            )
            for n in range(1, 13)
        ),
        finetune_paper='003_teams',
        figure='generator layers',
        small_scale_runs=tuple(
            f'generator_num_layers_{n}' for n in (3, 6, 9, 12)
        ),
        scale_runs=(
            ('cpu', ('generator_num_layers_6', 'generator_num_layers_12')),
        ),
        small_scale_note=(
            'generators of 3, 6, 9 and 12 layers; the tiny discriminator has '
            '4 layers, not 12, so there they become 1, 2, 3 and 4 (a quarter '
            'of the depth each), plotted at their paper depth; the cpu '
            "scale's 2-layer discriminator allows only generators of 6 and "
            '12 layers, as 1 and 2'
        ),
    ),
    _entry(
        '003.fig5',
        'GLUE against K, Sampled vs Hardest negatives (TEAMS-small++)',
        runs=tuple(
            _run(
                f'{strategy}_k{k}',
                f'{strategy.title()}@{k}',
                f'003_teams/fig5_{strategy}_k{k}',
            )
            for strategy in ('sampled', 'hardest')
            for k in (3, 5, 10, 20, 50)
        )
        + (
            # 003 Sec. 4.3: "for K from 3 to 50 TEAMS outperforms
            # ELECTRA", drawn as the figure's reference line.
            _003_small_pp_baselines('')[0],
        ),
        finetune_paper='003_teams',
        figure='K',
        small_scale_runs=tuple(
            f'{strategy}_k{k}'
            for strategy in ('sampled', 'hardest')
            for k in (3, 5, 20)
        )
        + ('electra',),
        scale_runs=(('cpu', ('sampled_k5', 'hardest_k5', 'electra')),),
        small_scale_note=(
            'K = 3, 5 and 20 of the five values, so that six runs and the '
            'ELECTRA-Small++ reference fit the hour at tiny scale; at cpu '
            "scale K = 5 (003's default) only, each with several "
            'pretraining seeds'
        ),
        claims=(
            (
                'sampled_k5',
                'hardest_k5',
                '003 Sec. 4.3: "Sampled" negatives beat "Hardest" ones',
            ),
            (
                'sampled_k5',
                'electra',
                '003 Sec. 4.3: TEAMS beats ELECTRA for K from 3 to 50',
            ),
        ),
    ),
    _entry(
        '004.1',
        'ELECTRA vs SCRIPT, GLUE mean (SQuAD at paper scale)',
        runs=(_ELECTRA_SMALL, _SCRIPT_SMALL),
        finetune_paper='004_script',
        average_column='GLUE Mean',
        squad=('squad11', 'squad20'),
    ),
    _entry(
        '004.2',
        'BERT, ELECTRA and SCRIPT small, GLUE per task',
        runs=(
            _run('bert_small', 'BERT-small', '001_ale/bert_small'),
            _ELECTRA_SMALL,
            _run('script_small', 'SCRIPT-small (ours)', '004_script/small'),
        ),
        finetune_paper='004_script',
        columns=_004_COLUMNS,
        average_column='Mean',
    ),
    _entry(
        '004.3',
        'LibriSpeech N-best rescoring WER with the PLL',
        why_plan_only=(
            'needs LibriSpeech N-best lists from a first-pass recogniser; '
            'python -m official_repro.rescore runs on lists a user brings, '
            'and experiments.script_nbest ranks synthetic WikiText-2 lists'
        ),
    ),
    _entry(
        '004.fig2',
        'GLUE mean over pretraining steps, ELECTRA-small vs SCRIPT-small',
        runs=(_ELECTRA_SMALL, _SCRIPT_SMALL),
        finetune_paper='004_script',
        figure='steps',
    ),
    _entry(
        '004.sec3.3',
        'training speed, ELECTRA-small vs SCRIPT-small (it/s)',
        runner='speed_comparison',
        runs=(_ELECTRA_SMALL, _SCRIPT_SMALL),
        command='experiments.benchmark_pretraining',
    ),
)

_LEARNING = Target(
    'learning',
    None,
    None,
    'learning',
    'every objective leaves the unigram plateau: held-out metrics against '
    'targets, learning curves, word order, pretrained vs random init',
    runner='learning',
    # Each paper's own recipe of the objective, as the tables train it, so
    # that a table at the same scale and run store reads these runs back.
    runs=(
        _run('masked_lm', 'masked LM (001 BERT_small)', '001_ale/bert_small'),
        _run('electra', 'ELECTRA (001 ELECTRA_small)', '001_ale/electra_small'),
        _run('teams', 'TEAMS (003 TEAMS-Small)', '003_teams/small'),
        _run('script', 'SCRIPT (004 SCRIPT-small)', '004_script/small'),
    ),
    # Mean over fine-tuning seeds, the aggregation the comparison needs.
    finetune_paper='004_script',
)

TARGETS: Dict[str, Target] = {
    target.key: target for target in (*_TARGETS, _LEARNING)
}


def get(key: str) -> Target:
  """The target `key` ('001.IV'), or a KeyError listing them all."""
  if key not in TARGETS:
    raise KeyError(
        f'No table or figure {key!r}; run --list. Known: '
        f'{", ".join(TARGETS)}.'
    )
  return TARGETS[key]

"""The N-best construction of experiments/script_nbest.py on tiny fixtures."""

import os
import random

import numpy as np
import pytest
import tensorflow as tf

from experiments import script_nbest

WIKITEXT = [
    ' \n',
    ' = Homarus gammarus = \n',
    ' The lobster is blue above . It has two claws and eight legs . \n',
    ' The <unk> is red . The larvae swim to the water surface at night . \n',
    ' The spines are red @-@ tipped on the claws of the lobster . \n',
]


def test_wikitext_sentences_skips_headings_unk_and_escapes():
  assert script_nbest.wikitext_sentences(WIKITEXT, 5, 12) == [
      'The lobster is blue above .',
      'It has two claws and eight legs .',
      'The larvae swim to the water surface at night .',
  ]
  assert script_nbest.wikitext_sentences(WIKITEXT, 7, 8) == [
      'It has two claws and eight legs .'
  ]


def test_sentences_file_read_from_ram_filesystem(tmp_path, ram_dir):
  text = ''.join(WIKITEXT).replace('\n', '\r\n', 2)
  local = tmp_path / 'wiki.tokens'
  local.write_bytes(text.encode('utf-8'))
  remote = os.path.join(ram_dir, 'wiki.tokens')
  with tf.io.gfile.GFile(remote, 'wb') as f:
    f.write(text.encode('utf-8'))
  with open(local, encoding='utf-8') as f:
    expected = [line.rstrip('\n') for line in f.readlines()]
  assert script_nbest._read_lines(remote) == expected + ['']
  assert script_nbest.wikitext_sentences(
      script_nbest._read_lines(remote), 5, 12
  ) == script_nbest.wikitext_sentences(WIKITEXT, 5, 12)
  with pytest.raises(FileNotFoundError, match=f'{ram_dir}/missing'):
    script_nbest._read_lines(os.path.join(ram_dir, 'missing'))


def _lists(seed, num_distractors=4):
  sentences = ['the cat sat on the mat .', 'a dog ran to the park .']
  vocabulary = ' '.join(sentences).split()
  return script_nbest.build_nbest(
      sentences, num_distractors, random.Random(seed), vocabulary
  )


def test_build_nbest_makes_distinct_one_edit_distractors():
  for hypotheses in _lists(seed=0):
    true = hypotheses[0]
    assert true.edit is None
    assert [h.edit for h in hypotheses[1:]] == [
        'substitute',
        'delete',
        'swap',
        'substitute',
    ]
    assert len({h.text for h in hypotheses}) == 5
    words = true.text.split()
    for h in hypotheses[1:]:
      edited = h.text.split()
      if h.edit == 'substitute':
        assert len(edited) == len(words)
        assert sum(a != b for a, b in zip(words, edited)) == 1
      elif h.edit == 'delete':
        assert any(
            words[:i] + words[i + 1 :] == edited for i in range(len(words))
        )
      else:
        assert sorted(edited) == sorted(words)
        changed = [i for i, (a, b) in enumerate(zip(words, edited)) if a != b]
        assert len(changed) == 2 and changed[1] == changed[0] + 1


def test_build_nbest_is_fixed_by_the_seed():
  assert _lists(seed=3) == _lists(seed=3)
  assert _lists(seed=3) != _lists(seed=4)


def test_build_nbest_rejects_uneditable_input():
  with pytest.raises(ValueError, match='too short'):
    script_nbest.build_nbest(['a a a'], 1, random.Random(0), ['a', 'b'])
  with pytest.raises(ValueError, match='two different words'):
    script_nbest.build_nbest(['a b c'], 1, random.Random(0), ['a', 'a'])
  with pytest.raises(ValueError, match="No new 'swap'"):
    # 'a b c' has two swaps; the 9th distractor would be the third.
    script_nbest.build_nbest(['a b c'], 9, random.Random(0), ['a', 'b'])
  assert (
      len(
          script_nbest.build_nbest(['a b c'], 8, random.Random(0), ['a', 'b'])[
              0
          ]
      )
      == 9
  )


def test_ranking_summary_counts_strict_wins():
  nbest = _lists(seed=0, num_distractors=3)
  scores = [
      [-1.0, -2.0, -0.5, -3.0],  # Loses to the deletion.
      [-1.0, -2.0, -1.5, -1.0],
  ]  # Tie with the swap: not first.
  assert script_nbest.ranking_summary(nbest, scores) == dict(
      num_lists=2,
      top1=0.0,
      chance=0.25,
      substitute_win_rate=1.0,
      delete_win_rate=0.5,
      swap_win_rate=0.5,
  )
  assert (
      script_nbest.ranking_summary(nbest, [[0.0, -1, -1, -1]] * 2)['top1']
      == 1.0
  )


def test_per_word_divides_by_each_hypothesis_word_count():
  nbest = [
      [
          script_nbest.Hypothesis('a b c d'),
          script_nbest.Hypothesis('a b c', 'delete'),
      ]
  ]
  # The deletion wins on the sum and loses per word: -4/4 > -3.6/3.
  scores = [[-4.0, -3.6]]
  assert script_nbest.per_word(nbest, scores) == [[-1.0, -1.2]]
  assert script_nbest.ranking_summary(nbest, scores)['top1'] == 0.0
  assert (
      script_nbest.ranking_summary(nbest, script_nbest.per_word(nbest, scores))[
          'top1'
      ]
      == 1.0
  )


def test_spearman_matches_the_closed_form_without_ties():
  first = [0.3, -1.0, 2.5, 0.0, 1.1]
  second = [10.0, 2.0, 30.0, 5.0, 1.0]

  def ranks(values):
    return {v: r for r, v in enumerate(sorted(values))}

  rank_a, rank_b = ranks(first), ranks(second)
  d2 = sum((rank_a[a] - rank_b[b]) ** 2 for a, b in zip(first, second))
  n = len(first)
  assert script_nbest.spearman(first, second) == pytest.approx(
      1 - 6 * d2 / (n * (n * n - 1))
  )


def test_first_pass_lists_rank_every_hypothesis_by_a_random_score():
  nbest = script_nbest.build_nbest(
      ['the cat sat on the mat .', 'a dog ran in the park today .'],
      4,
      random.Random(0),
      'the a cat dog mat park sat ran on in'.split(),
  )
  lists = script_nbest.first_pass_lists(nbest, np.random.default_rng(0), 'dev')
  assert sorted(lists) == ['dev-0000', 'dev-0001']
  first_ranks = []
  for hypotheses, (_, entry) in zip(nbest, sorted(lists.items())):
    assert entry['ref'] == hypotheses[0].text
    ranked = [entry[f'hyp_{rank}'] for rank in range(1, 6)]
    assert sorted(h['text'] for h in ranked) == sorted(
        h.text for h in hypotheses
    )
    scores = [h['score'] for h in ranked]
    assert scores == sorted(scores, reverse=True)
    first_ranks.append([h['text'] for h in ranked].index(entry['ref']))
  # The true sentence is not always first: the first pass knows nothing.
  assert first_ranks != [0, 0]


def test_report_shows_each_scores_ranking_and_the_rescoring():
  summary = dict(
      num_lists=2,
      top1=0.5,
      chance=0.2,
      substitute_win_rate=1.0,
      delete_win_rate=0.5,
      swap_win_rate=0.75,
  )
  result = dict(
      model_dir='m',
      checkpoint='m/ckpt-4',
      num_candidate_sentences=9,
      nbest=summary,
      nbest_per_word=dict(summary, top1=0.25),
      nbest_mlm=dict(summary, top1=1.0),
      spearman_true_sentences=0.9,
      spearman_all_hypotheses=0.8,
      rescore=dict(
          command='c',
          weight=1.0,
          length_bonus=0.5,
          sets={'test': dict(markdown='### test: table')},
      ),
  )
  text = script_nbest.format_report(result, 'Command: x')
  assert '4 one-edit distractors' in text
  assert (
      '| one-pass PLL (004 Eq. 7) | 0.500 | 0.200 | 1.000 | 0.500 | 0.750 |'
      in text
  )
  assert '| T-pass masked-LM PLL | 1.000 |' in text
  assert '0.900 over the true sentences, 0.800 over all' in text
  assert 'PLL weight 1, length bonus 0.5' in text and '### test: table' in text

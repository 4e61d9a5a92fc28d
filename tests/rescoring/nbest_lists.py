"""Hand-made N-best lists shared by the rescoring tests.

Each utterance: (reference, [(hypothesis, first-pass score, LM score), ...])
in rank order. The expected WERs are derived in test_interpolation.py.
"""

DEV = {
    'u1': (
        'the cat sat',
        [
            ('the cat sat down', -1.0, -10.0),
            ('the cat sat', -2.0, -4.0),
            ('a cat', -3.0, -2.0),
        ],
    ),
    'u2': (
        'hello world',
        [('hello word', -1.0, -8.0), ('hello world', -1.5, -6.0)],
    ),
}
TEST = {
    'v1': (
        'good morning sir',
        [
            ('good morning', -1.0, -9.0),
            ('good morning sir', -1.2, -5.0),
            ('could morning sir sir', -4.0, -1.0),
        ],
    ),
    'v2': ('yes', [('yes', -0.5, -3.0), ('yes yes', -2.0, -4.0)]),
    'v3': (
        'open the door',
        [('open a door', -1.0, -6.0), ('open the door', -3.0, -7.0)],
    ),
}

"""Asking for devices that are not there is one line, not a fallback."""

import pytest

from official_repro.common import cli
from official_repro.training import distribute


@pytest.mark.parametrize('strategy', ['mirrored', 'one_device', 'cpu'])
def test_more_gpus_than_the_host_has_are_refused(strategy):
  with pytest.raises(cli.UserError, match='--num_gpus=4, but this host has 0'):
    distribute.get_strategy(strategy, num_gpus=4)


@pytest.mark.parametrize('address', ['', 'no-such-tpu'])
def test_a_tpu_that_is_not_there_is_refused(address):
  with pytest.raises(cli.UserError, match='--strategy=tpu: no TPU reachable'):
    distribute.get_strategy('tpu', tpu_address=address)

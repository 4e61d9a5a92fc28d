"""Test-only plug-ins: an objective and a backbone outside the package."""

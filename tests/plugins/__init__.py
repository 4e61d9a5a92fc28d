"""Test-only plug-ins: an objective and a backbone living outside the package."""

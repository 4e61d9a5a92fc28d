"""Paper-table regeneration: registry, scales, plan, grid runner and report."""

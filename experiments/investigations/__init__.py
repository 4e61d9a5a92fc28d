"""One-off investigations of this project's development, not the product."""

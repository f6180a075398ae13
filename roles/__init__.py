"""roles package."""

"""neurips26."""

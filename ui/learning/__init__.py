"""The "Watch attention learn" page's views: its controls (inputs), the run as it grows (live),
what a trained model reads as (after), its files (files), figures, cached readings (data) and
questions."""

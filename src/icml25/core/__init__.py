"""Paper-agnostic building blocks shared by every icml25 pipeline.

Nothing in this package knows about a particular paper: device and seeding, the torch
training loop, MLflow variant tracking, claims and parameter validation.
"""

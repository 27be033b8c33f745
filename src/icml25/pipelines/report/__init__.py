"""The reproduction scorecard: every paper's claims, judged on its own last run."""

"""Methods, one module per paper, plus baselines (framework-free)."""

"""The prompt-based continual-learning track: NoRGa (Le et al., NeurIPS 2024) against HiDe-Prompt
and other prompt methods."""

"""Joint hierarchies of samples and features (Lin, Coifman, Mishne & Talmon, NeurIPS 2025).

See docs/method.md section 13.
"""

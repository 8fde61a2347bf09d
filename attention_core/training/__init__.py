"""Training attention: the backward pass of this package's formulas, AdamW, and a small
attention-only transformer that learns on the "Watch attention learn" page.
"""

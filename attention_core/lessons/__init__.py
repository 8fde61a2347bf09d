"""Lessons: the content the pages teach with, built from the formulas but not formulas themselves.

    presets               the scaled dot-product page's preset Q, K, V (`Example`), the page's
                          settings run through `attend`, and every number behind one row
    mask_experiments      the mask kinds (one table) and what breaks without a mask: padding
                          leaks, additive fills, float16
    position_experiments  order blindness, the sinusoid broken down, RoPE shifts, extrapolation
    scaling               why divide by √d_k, measured
    quiz                  predict-then-reveal questions computed from the numbers on screen

Each module arranges `attention_core`'s formulas into an experiment or an example; the
formulas themselves live once, in the modules beside this package.
"""

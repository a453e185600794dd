"""Chapter 03: masks.

reference.py  causal_mask, padding_mask, build_attention_mask
exercises.py  03.causal_mask, 03.padding_mask, 03.build_attention_mask
"""

TITLE = "Masks"
PART = "Build it in NumPy"
SUMMARY = "causal and padding masks, fully masked rows"

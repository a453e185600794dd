"""Chapter 01: attention from scratch, in NumPy.

reference.py  softmax, scaled_dot_product_attention
exercises.py  01.softmax, 01.scaled_dot_product_attention
"""

TITLE = "Attention from scratch (NumPy)"
PART = "Build it in NumPy"
SUMMARY = "softmax and scaled dot-product attention"

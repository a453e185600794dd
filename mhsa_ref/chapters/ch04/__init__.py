"""Chapter 04: many heads.

reference.py  split_heads, merge_heads, multi_head_attention
exercises.py  04.split_heads, 04.merge_heads, 04.multi_head_attention
"""

TITLE = "Many heads"
PART = "Build it in NumPy"
SUMMARY = "split, attend, merge, W_O; the parameter count"

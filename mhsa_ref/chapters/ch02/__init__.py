"""Chapter 02: why the scores are divided by sqrt(d_k).

reference.py  softmax_jacobian
exercises.py  02.softmax_jacobian
"""

TITLE = "Why divide by √dₖ"
PART = "Build it in NumPy"
SUMMARY = "variance, saturation, the softmax Jacobian"

"""Chapter 05: PyTorch, on the GPU.

reference_torch.py  MultiHeadSelfAttention, from_torch_mha (and to_torch_mha, mha_mask)
exercises.py        05.MultiHeadSelfAttention, 05.from_torch_mha
mistakes.py         the misconceptions as wrong modules
"""

TITLE = "PyTorch, on the GPU"
PART = "Port it to PyTorch"
SUMMARY = "a module equal to nn.MultiheadAttention"
REQUIRES = ("torch",)

"""Chapter 10: one mechanism, many domains.

The same attention reads sentences, images and genomes: a pronoun resolved, images cut into
patches (a tiny vision Transformer), and two DNA motifs found far apart.
"""

TITLE = "One mechanism, many domains"
PART = "Look inside, and beyond"
SUMMARY = "pronouns, image patches, DNA"
REQUIRES = ("torch",)

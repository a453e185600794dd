"""Chapter 09: a committee that disagrees.

Do the heads of a trained model differ, how much do they duplicate each other, how many can go,
and can they be made to differ on purpose?
"""

TITLE = "A committee that disagrees"
PART = "Look inside, and beyond"
SUMMARY = "head patterns, CKA, redundancy"
REQUIRES = ("torch",)

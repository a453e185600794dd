"""A scripted class for ``mhsa-grade`` (issue 14): ``roster.py`` says who hands in what and what
each exercise must get, ``sources.py`` turns the learners of ``tests/chNN/learners.py`` (and the
attacks of ``hostile.py``) into notebook cells, and ``builder.py`` writes the class folder.
``tests/test_grading_class.py`` grades it and checks every number the grader writes.
"""

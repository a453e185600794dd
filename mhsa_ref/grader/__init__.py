"""The autograder: grade a class's notebooks without ever trusting the code being graded.

    discover  which notebooks, whose, which chapter
    extract   the definitions to grade, by AST (nothing is executed here)
    run       the sandbox's parent side: one fresh isolated process per submission
    sandbox/  what runs inside it (boot: isolation; runner: calls; protocol: the only channel)
    grade     one notebook: extract, run, judge (mhsa_ref.judge), attribute
    batch     many notebooks in parallel, atomic results, resume
    report    JSON, gradebook CSV, feedback, Gradescope results, class summary
    gradescope  the Gradescope autograder bundle
    cli       ``mhsa-grade``
"""

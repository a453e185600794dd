"""The untrusted side of the grader: what runs inside the sandbox.

``boot`` isolates a fresh process (namespaces, unprivileged user, limits) and hands over to
``runner``, which executes the extracted submission and streams outcomes back over the
``protocol``. None of these modules imports ``mhsa_ref``: the sandbox never holds reference code.
"""

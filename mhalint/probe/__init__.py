"""The runtime probe: confirms flagged call sites by rebuilding them with torch on tiny tensors.

It runs in ONE subprocess (`python -m mhalint.probe`) that imports torch once and executes each rule's
experiment from the statically resolved arguments. It never imports, executes or evaluates the user's code:
masks are rebuilt by `evaluator`, which accepts only known torch factories and operators.
"""

"""What the service does, without HTTP: admit a request (``accept``, ``plan_accept``), answer it from
the cache or solve it (``solve``: the one rule for which cache entry answers), plan (``plan``), run
jobs in killable processes (``jobs``), report jobs, count (``metrics``). Every answer is a
:class:`~.replies.Reply` that the HTTP layer sends as it is.
"""

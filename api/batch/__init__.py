"""``pipesched batch``: an offline sweep of problems solved in parallel, resumably, into one folder
(no HTTP: it runs here, or through a service with ``--server``).

- :mod:`.run`: the driver (read, resume, feed the engine, write, summarise, Ctrl-C);
- :mod:`.engines`: where each problem runs (``local`` solver processes, ``--server``), behind one interface;
- :mod:`.plans`: plan requests in a sweep; :mod:`.io`: reading items, writing results and the summary;
- :mod:`.chunks` and :mod:`.ray`: the ``--engine ray`` engine (chunks of problems per Ray task).
"""

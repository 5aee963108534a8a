"""One list-scheduler engine (:mod:`.engine`), its rules (:mod:`.memory`, :mod:`.rules`) and the named policies (:mod:`.policies`)."""

"""The ILP (PuLP): the disjunctive big-M formulation, its CBC / HiGHS backends, the method."""

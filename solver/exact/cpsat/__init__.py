"""CP-SAT: integer scaling, the formulation, one solver run, the single-device relaxations, the method."""

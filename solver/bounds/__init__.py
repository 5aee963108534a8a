"""Lower bounds no schedule can beat, and the fast infeasibility check; no search, no solver."""

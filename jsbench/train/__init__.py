"""Training: the REINFORCE loop for schedule policies (reinforce.py), its configuration (config.py: dataclasses,
no torch, read by --help), the peer methods' training steps, and the training of the scenes-dit backbone's
weights. Above evaluation (a run scores its held-out curve); below the reports that compare trained policies."""
